//! Running the real `reaper` binary against a test's world: its config file, the process, and
//! its HTTP endpoint.

use std::net::SocketAddr;

use harvester::config::Limits;
use std::process::Command;
use std::time::{Duration, Instant};

use testkit::process::Observed;

use super::World;

/// A file in the temp dir, removed on drop.
pub struct TempFile(pub std::path::PathBuf);

impl TempFile {
    pub fn write(name: &str, text: &str) -> TempFile {
        let p = std::env::temp_dir().join(name);
        std::fs::write(&p, text).unwrap();
        TempFile(p)
    }

    pub fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

impl World {
    /// A reaper config file for this world, written by serialising its [`harvester::Config`]
    /// (HTTP on a free port) after `limits` adjusts the limits.
    pub fn reaper_config(&self, limits: impl FnOnce(&mut Limits)) -> TempFile {
        let mut c = self.config();
        c.http.listen = Some(SocketAddr::from(([127, 0, 0, 1], 0)));
        c.limits.min_metrics_interval = Duration::from_millis(50);
        limits(&mut c.limits);
        let text = toml::to_string(&c).expect("a config serialises to TOML");
        TempFile::write(
            &format!("{}-{}.toml", self.group, testkit::names::unique("cfg")),
            &text,
        )
    }
}

/// The reaper's own bound for a graceful stop (`bin/reaper.rs`): the drain, the revocation, and
/// 10 s; beyond it the reaper exits 3.
pub fn stop_bound(config: &harvester::Config) -> Duration {
    config.drain_timeout() + config.leader.revoke_timeout() + Duration::from_secs(10)
}

/// The bound for a reaper's start-up: two connects at the default connect timeout (10 s), its
/// elector's start, and the load margin.
pub const START_UP: Duration = testkit::within(Duration::from_secs(25));

/// Waits until `proc` (a reaper run with `--events-json`) serves http: its start-up, connecting
/// to the database and the brokers (each bounded by limits.connect_timeout, 10 s by default)
/// and starting its elector. A reaper that exits instead fails the wait at once, with its
/// status.
pub async fn wait_serving(proc: &mut Observed) {
    let started = Instant::now();
    while proc.lines_of("http").is_empty() {
        if let Some(status) = proc.try_exit() {
            panic!(
                "reaper {} exited ({status}) before serving http (its stderr is above)",
                proc.name
            );
        }
        assert!(
            started.elapsed() < START_UP,
            "reaper {}: not serving http after {START_UP:?}",
            proc.name
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A reaper process with its HTTP address.
pub struct Reaper {
    pub proc: Observed,
    pub http: SocketAddr,
}

impl Reaper {
    /// Spawns `reaper --config <config> --events-json` and waits for its HTTP endpoint.
    pub async fn spawn(name: &str, config: &TempFile) -> Reaper {
        Reaper::spawn_with(name, config, &[]).await
    }

    /// [`Reaper::spawn`] with more arguments (`--set PATH=VALUE` pairs).
    pub async fn spawn_with(name: &str, config: &TempFile, extra: &[String]) -> Reaper {
        let mut args = vec!["--config", config.path(), "--events-json"];
        args.extend(extra.iter().map(String::as_str));
        Reaper::serving(spawn_raw(name, &args)).await
    }

    /// A reaper process started by the caller, once its HTTP endpoint serves.
    pub async fn serving(mut proc: Observed) -> Reaper {
        wait_serving(&mut proc).await;
        let http = proc.lines_of("http")[0].value["addr"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        Reaper { proc, http }
    }

    /// `GET path` on its endpoint.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let (addr, path) = (self.http, path.to_owned());
        tokio::task::spawn_blocking(move || testkit::http::get(addr, &path))
            .await
            .unwrap()
            .unwrap_or((0, String::new()))
    }

    pub async fn is_leader(&self) -> bool {
        self.get("/leader").await.0 == 200
    }
}

/// The spawned reapers' log filter: `warn`, or `REAPER_LOG` when set (to see a member's
/// hand-overs and closes while a test is investigated, e.g. `REAPER_LOG=info`).
fn log_filter() -> String {
    std::env::var("REAPER_LOG").unwrap_or_else(|_| "warn".into())
}

/// The reaper binary: cargo's build of this test's tree, or `REAPER_BIN` (a build kept apart,
/// e.g. while other checkouts share the target directory and its `target/debug/reaper`).
pub fn reaper_bin() -> String {
    std::env::var("REAPER_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_reaper").to_owned())
}

/// Spawns the reaper binary with `args` (its log filter from [`log_filter`]).
pub fn spawn_raw(name: &str, args: &[&str]) -> Observed {
    let mut cmd = Command::new(reaper_bin());
    cmd.args(args).env("RUST_LOG", log_filter());
    Observed::spawn(name, cmd).unwrap()
}

/// Runs the reaper binary to completion; (exit code, stdout, stderr).
pub fn run_to_end(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(reaper_bin())
        .args(args)
        .env("RUST_LOG", log_filter())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
