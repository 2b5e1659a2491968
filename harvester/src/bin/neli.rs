//! `neli`: watch NELI leader election work against a Kafka cluster.
//!
//! `neli run` is one contender: it prints JSON lines (`status` every interval, `action` for each
//! unit of leader work, gated by `is_leader()` and stamped with the term) until SIGTERM/SIGINT,
//! then leaves the group gracefully. `neli demo -n 3` runs N contenders as child processes and
//! prints who leads over time. Tests use `run` as the process under observation.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use clap::{Parser, Subcommand};
use harvester::config::KafkaConfig;
use harvester::election::neli::{Neli, NeliConfig};
use harvester::election::{run_while_leader, Elector};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(about = "NELI leader election over Kafka: run contenders and watch who leads")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, clap::Args, Clone)]
struct Common {
    /// Kafka bootstrap servers.
    #[arg(long, env = "KAFKA_BROKERS", default_value = "localhost:9092")]
    bootstrap: String,
    /// Consumer group shared by the contenders.
    #[arg(long, default_value = "neli-demo")]
    group: String,
    /// Heartbeat timeout (session timeout is 3x).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    heartbeat_timeout: Duration,
    /// Minimum poll interval.
    #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
    min_poll_interval: Duration,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run one contender, printing JSON lines.
    Run {
        #[command(flatten)]
        common: Common,
        /// Member name (default: host_pid_time).
        #[arg(long)]
        name: Option<String>,
        /// How often to print a status line.
        #[arg(long, default_value = "50ms", value_parser = humantime::parse_duration)]
        status_interval: Duration,
    },
    /// Run N contenders as child processes and print who leads over time.
    Demo {
        #[command(flatten)]
        common: Common,
        /// Number of contenders.
        #[arg(short = 'n', long, default_value_t = 3)]
        contenders: usize,
        /// How long to run.
        #[arg(long, default_value = "20s", value_parser = humantime::parse_duration)]
        duration: Duration,
    },
}

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_millis()
}

fn emit(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

async fn run(
    common: Common,
    name: Option<String>,
    status_interval: Duration,
) -> Result<(), String> {
    let kafka = KafkaConfig::with_bootstrap(&common.bootstrap);
    let config = NeliConfig {
        group_id: Some(common.group.clone()),
        name,
        heartbeat_timeout: common.heartbeat_timeout,
        min_poll_interval: common.min_poll_interval,
        ..Default::default()
    };
    let neli = std::sync::Arc::new(Neli::start(&kafka, &config).map_err(|e| e.to_string())?);
    let member = neli.settings().name.clone();
    let events = neli.take_events().ok_or("events already taken")?;
    let cancel = CancellationToken::new();

    let status = {
        let (neli, cancel, member) = (neli.clone(), cancel.clone(), member.clone());
        tokio::spawn(async move {
            while !cancel.is_cancelled() {
                let term = neli.term().map(|t| t.to_string());
                emit(
                    serde_json::json!({"kind": "status", "member": member, "t": now_ms() as u64, "leader": neli.is_leader(), "term": term}),
                );
                tokio::time::sleep(status_interval).await;
            }
        })
    };
    let signals = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
            }
            cancel.cancel();
        })
    };
    let work = {
        let m = member.clone();
        let n = neli.clone();
        run_while_leader(
            neli.as_ref(),
            events,
            cancel.clone(),
            move |term, _token| {
                let (m, n) = (m.clone(), n.clone());
                async move {
                    // The leader action: gated by is_leader() immediately before, stamped with term.
                    if n.is_leader() {
                        emit(
                            serde_json::json!({"kind": "action", "member": m, "t": now_ms() as u64, "term": term.to_string()}),
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            },
        )
    };
    let result = work.await;
    neli.close();
    let closed = neli.closed().await;
    cancel.cancel();
    let _ = status.await;
    signals.abort();
    emit(serde_json::json!({"kind": "closed", "member": member, "t": now_ms() as u64}));
    result.and(closed).map_err(|e| e.to_string())
}

async fn demo(common: Common, contenders: usize, duration: Duration) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    let mut children = Vec::new();
    for i in 0..contenders {
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "run",
                "--bootstrap",
                &common.bootstrap,
                "--group",
                &common.group,
            ])
            .args([
                "--heartbeat-timeout",
                &humantime::format_duration(common.heartbeat_timeout).to_string(),
            ])
            .args([
                "--min-poll-interval",
                &humantime::format_duration(common.min_poll_interval).to_string(),
            ])
            .args([
                "--name",
                &format!("contender-{i}"),
                "--status-interval",
                "250ms",
            ])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| e.to_string())?;
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let tx = tx.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Ok(v) = serde_json::from_str(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        children.push(child);
    }
    let start = std::time::Instant::now();
    let mut leaders = std::collections::BTreeMap::<String, bool>::new();
    let mut last_print = String::new();
    while start.elapsed() < duration {
        if let Ok(Some(v)) = tokio::time::timeout(Duration::from_millis(250), rx.recv()).await {
            if v["kind"] == "status" {
                leaders.insert(
                    v["member"].as_str().unwrap_or("?").to_owned(),
                    v["leader"].as_bool().unwrap_or(false),
                );
            }
        }
        let who: Vec<_> = leaders
            .iter()
            .filter(|(_, l)| **l)
            .map(|(m, _)| m.as_str())
            .collect();
        let line = if who.is_empty() {
            "nobody".to_owned()
        } else {
            who.join(", ")
        };
        if line != last_print {
            println!("{:>7.2}s leader: {line}", start.elapsed().as_secs_f64());
            last_print = line;
        }
    }
    for child in &mut children {
        if let Some(pid) = child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status();
        }
    }
    for mut child in children {
        let _ = tokio::time::timeout(Duration::from_secs(10), child.wait()).await;
    }
    Ok(())
}

#[tokio::main]
async fn main() {
    // Quiet unless RUST_LOG says otherwise: these tools print their own results.
    harvester::config::LoggingConfig {
        level: "warn".into(),
        format: harvester::config::LogFormat::Human,
    }
    .init();
    let result = match Cli::parse().command {
        Cmd::Run {
            common,
            name,
            status_interval,
        } => run(common, name, status_interval).await,
        Cmd::Demo {
            common,
            contenders,
            duration,
        } => demo(common, contenders, duration).await,
    };
    if let Err(e) = result {
        eprintln!("neli: {e}");
        std::process::exit(1);
    }
}
