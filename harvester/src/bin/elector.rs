//! `elector`: watch leader election work, with any elector kind (`[leader] kind = ...`).
//!
//! `elector run` is one contender: it prints JSON lines (`status` every interval, `action` for
//! each unit of leader work, gated by `is_leader()` and stamped with the term) until
//! SIGTERM/SIGINT, then leaves gracefully. `elector demo -n 3` runs N contenders as child
//! processes and prints who leads over time. Tests use `run` as the process under observation,
//! for every kind alike. Settings come as for the reaper: `--config FILE` (a harvester config;
//! only `[leader]` and `kafka` matter), `HARVESTER__*` variables, `--set PATH=VALUE`, and
//! shorthands for NELI's usual ones.

use std::io::Write;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use clap::{Parser, Subcommand};
use harvester::election::run_while_leader;
use harvester::Config;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Parser)]
#[command(
    about = "Leader election (NELI, NATS KV, ZooKeeper, etcd): run contenders and watch who leads"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, clap::Args, Clone)]
struct Common {
    /// A harvester config file (TOML, YAML or JSON); `[leader]` picks the elector.
    #[arg(long, short)]
    config: Option<PathBuf>,
    /// Override any field, e.g. `--set leader.kind=etcd` (repeatable).
    #[arg(long = "set", value_name = "PATH=VALUE")]
    set: Vec<String>,
    /// Kafka bootstrap servers (NELI): shorthand for `--set kafka.bootstrap.servers=...`.
    #[arg(long, env = "KAFKA_BROKERS")]
    bootstrap: Option<String>,
    /// NELI's consumer group: shorthand for `--set leader.group_id=...`.
    #[arg(long)]
    group: Option<String>,
    /// NELI's heartbeat timeout (session = 3x): shorthand for `--set leader.heartbeat_timeout=...`.
    #[arg(long)]
    heartbeat_timeout: Option<String>,
    /// NELI's minimum poll interval: shorthand for `--set leader.min_poll_interval=...`.
    #[arg(long)]
    min_poll_interval: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Run one contender, printing JSON lines.
    Run {
        #[command(flatten)]
        common: Common,
        /// Member name: shorthand for `--set leader.name=...` (default: host_pid_time).
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

impl Common {
    /// `--set` pairs, shorthands last (they win).
    fn pairs(&self, name: Option<&str>) -> Result<Vec<(String, String)>, String> {
        let mut pairs = Vec::new();
        for s in &self.set {
            let (k, v) = s
                .split_once('=')
                .ok_or_else(|| format!("--set {s}: use PATH=VALUE"))?;
            pairs.push((k.to_owned(), v.to_owned()));
        }
        let shorthands = [
            ("kafka.bootstrap.servers", self.bootstrap.as_deref()),
            ("leader.group_id", self.group.as_deref()),
            (
                "leader.heartbeat_timeout",
                self.heartbeat_timeout.as_deref(),
            ),
            (
                "leader.min_poll_interval",
                self.min_poll_interval.as_deref(),
            ),
            ("leader.name", name),
        ];
        for (k, v) in shorthands {
            if let Some(v) = v {
                pairs.push((k.to_owned(), v.to_owned()));
            }
        }
        Ok(pairs)
    }

    /// The layered, validated config.
    fn config(&self, name: Option<&str>) -> Result<Config, String> {
        let pairs = self.pairs(name)?;
        let config = Config::layered(
            self.config.as_deref(),
            std::env::vars(),
            pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())),
        )
        .map_err(|e| harvester::chain(&e))?;
        config
            .leader
            .problems(&config.kafka)
            .into_iter()
            .map(|p| p.to_string())
            .reduce(|a, b| format!("{a}; {b}"))
            .map_or(Ok(config), Err)
    }

    /// These settings as arguments for a child `elector run`.
    fn args(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(c) = &self.config {
            args.extend(["--config".to_owned(), c.display().to_string()]);
        }
        for s in &self.set {
            args.extend(["--set".to_owned(), s.clone()]);
        }
        let shorthands = [
            ("--bootstrap", &self.bootstrap),
            ("--group", &self.group),
            ("--heartbeat-timeout", &self.heartbeat_timeout),
            ("--min-poll-interval", &self.min_poll_interval),
        ];
        for (flag, v) in shorthands {
            if let Some(v) = v {
                args.extend([flag.to_owned(), v.clone()]);
            }
        }
        args
    }
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
    let config = common.config(name.as_deref())?;
    let elector = config
        .leader
        .build(&config.kafka)
        .await
        .map_err(|e| harvester::chain(&e))?;
    let member = name.unwrap_or_else(|| elector.describe());
    let events = elector.take_events().ok_or("events already taken")?;
    let cancel = CancellationToken::new();

    let status = {
        let (elector, cancel, member) = (elector.clone(), cancel.clone(), member.clone());
        tokio::spawn(async move {
            while !cancel.is_cancelled() {
                let term = elector.term().map(|t| t.to_string());
                emit(
                    serde_json::json!({"kind": "status", "member": member, "t": now_ms() as u64, "leader": elector.is_leader(), "term": term}),
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
        let n = elector.clone();
        run_while_leader(
            elector.as_ref(),
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
    elector.close();
    let closed = elector.closed().await;
    cancel.cancel();
    let _ = status.await;
    signals.abort();
    emit(serde_json::json!({"kind": "closed", "member": member, "t": now_ms() as u64}));
    result.and(closed).map_err(|e| harvester::chain(&e))
}

async fn demo(common: Common, contenders: usize, duration: Duration) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<serde_json::Value>();
    let mut children = Vec::new();
    for i in 0..contenders {
        let mut child = tokio::process::Command::new(&exe)
            .arg("run")
            .args(common.args())
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
        eprintln!("elector: {e}");
        std::process::exit(1);
    }
}
