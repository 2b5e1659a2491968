//! The harvesters under test: real `reaper` processes, so scenarios can kill and stall them.
//!
//! Each member prints its events as JSON lines (`--events-json`); a sampler thread reads its
//! CPU time and peak RSS from `/proc` every 200 ms and keeps the last values, so they survive a
//! `kill -9`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use testkit::process::{Observed, Signal};

use crate::BenchError;

/// CPU and memory of one process, as last sampled.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcStats {
    pub cpu_seconds: f64,
    pub peak_rss_bytes: u64,
}

/// Linux reports /proc/<pid>/stat times in USER_HZ, which is 100 on every Linux ABI.
const USER_HZ: f64 = 100.0;

fn read_proc(pid: u32) -> Option<ProcStats> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let hwm_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    Some(ProcStats {
        cpu_seconds: (utime + stime) / USER_HZ,
        peak_rss_bytes: hwm_kb * 1024,
    })
}

/// Samples one process's [`ProcStats`] every 200 ms on a thread of its own until dropped or the
/// process is gone; the last sample stays readable after a `kill -9`.
#[derive(Debug)]
pub struct ProcSampler {
    pid: u32,
    stats: Arc<Mutex<ProcStats>>,
    sampling: Arc<AtomicBool>,
}

impl ProcSampler {
    pub fn start(pid: u32) -> ProcSampler {
        let stats = Arc::new(Mutex::new(ProcStats::default()));
        let sampling = Arc::new(AtomicBool::new(true));
        let (s, on) = (Arc::clone(&stats), Arc::clone(&sampling));
        std::thread::spawn(move || {
            while on.load(Ordering::Relaxed) {
                if !sample_into(pid, &s) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        ProcSampler {
            pid,
            stats,
            sampling,
        }
    }

    /// Samples now (before a signal ends the process: the thread's last sample can be 200 ms
    /// old).
    pub fn refresh(&self) {
        sample_into(self.pid, &self.stats);
    }

    /// The last sample.
    pub fn stats(&self) -> ProcStats {
        *self.stats.lock()
    }
}

/// Reads `pid`'s figures into `stats`; false once the process is gone. A process that exited
/// and is not yet reaped still has its times but no VmHWM: the peak is the highest seen.
fn sample_into(pid: u32, stats: &Mutex<ProcStats>) -> bool {
    let Some(p) = read_proc(pid) else {
        return false;
    };
    let mut last = stats.lock();
    let peak = last.peak_rss_bytes.max(p.peak_rss_bytes);
    *last = ProcStats {
        peak_rss_bytes: peak,
        ..p
    };
    true
}

impl Drop for ProcSampler {
    fn drop(&mut self) {
        self.sampling.store(false, Ordering::Relaxed);
    }
}

/// One reaper process.
#[derive(Debug)]
pub struct Member {
    pub name: String,
    pub proc: Observed,
    pub http: SocketAddr,
    sampler: ProcSampler,
    /// Set once [`Member::wait_exit`] saw it exit: its pid may be reused, so no more signals.
    exited: Option<ExitStatus>,
}

impl Member {
    /// Starts `reaper --config <config> --events-json --set ...` and waits for its endpoint;
    /// with `ack_log`, the member writes its acknowledgement log there (`audit.ack_log`).
    pub fn spawn(
        name: &str,
        reaper: &Path,
        config: &Path,
        settings: &[(String, String)],
        ack_log: Option<&Path>,
    ) -> Result<Member, BenchError> {
        let mut cmd = Command::new(reaper);
        cmd.arg("--config").arg(config).arg("--events-json");
        for (k, v) in settings {
            cmd.arg("--set").arg(format!("{k}={v}"));
        }
        if let Some(path) = ack_log {
            cmd.arg("--set")
                .arg(format!("audit.ack_log={}", path.display()));
        }
        cmd.env(
            "RUST_LOG",
            std::env::var("BENCH_REAPER_LOG").unwrap_or_else(|_| "warn".into()),
        );
        let proc = Observed::spawn(name, cmd)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let http = loop {
            if let Some(line) = proc.lines_of("http").first() {
                break line.value["addr"].as_str().and_then(|a| a.parse().ok());
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        .ok_or_else(|| {
            BenchError::Run(format!(
                "reaper {name} did not start (see its stderr above)"
            ))
        })?;
        let sampler = ProcSampler::start(proc.pid());
        Ok(Member {
            name: name.to_owned(),
            proc,
            http,
            sampler,
            exited: None,
        })
    }

    /// Whether `/leader` answers 200.
    pub fn is_leader(&self) -> bool {
        testkit::http::get(self.http, "/leader").is_ok_and(|(s, _)| s == 200)
    }

    /// When this member acquired leadership (each time), as read by the bench.
    pub fn acquired(&self) -> Vec<Instant> {
        self.proc
            .lines_of("acquired")
            .iter()
            .map(|l| l.at)
            .collect()
    }

    pub fn fenced(&self) -> Vec<Instant> {
        self.proc.lines_of("fenced").iter().map(|l| l.at).collect()
    }

    /// The `published` count of its last meter event.
    pub fn last_published(&self) -> u64 {
        self.proc
            .lines_of("meter")
            .last()
            .and_then(|l| l.value["published"].as_u64())
            .unwrap_or(0)
    }

    /// A cumulative counter of its last meter event (0 before the first).
    pub fn last_meter(&self, field: &str) -> u64 {
        self.proc
            .lines_of("meter")
            .last()
            .and_then(|l| l.value[field].as_u64())
            .unwrap_or(0)
    }

    /// The records it had in flight when it was frozen at `stopped`, from its own meter events
    /// on either side of the freeze: the last one before it and the first one after it (a
    /// frozen process emits none, so that one was taken on the brink or on waking, before its
    /// pipeline moved on). The larger of the two; `None` if it never emitted one.
    pub fn in_flight_at_freeze(&self, stopped: Instant) -> Option<u64> {
        let lines = self.proc.lines_of("meter");
        let in_flight = |l: &testkit::process::Line| l.value["in_flight_records"].as_u64();
        let before = lines
            .iter()
            .rev()
            .find(|l| l.at <= stopped)
            .and_then(in_flight);
        let after = lines.iter().find(|l| l.at > stopped).and_then(in_flight);
        before.max(after)
    }

    /// Every meter event's (arrival, cumulative `published` count), oldest first.
    pub fn published_series(&self) -> Vec<(Instant, u64)> {
        self.proc
            .lines_of("meter")
            .iter()
            .filter_map(|l| Some((l.at, l.value["published"].as_u64()?)))
            .collect()
    }

    pub fn stats(&self) -> ProcStats {
        self.sampler.stats()
    }

    /// Sends `signal`, unless the process was already seen to exit (then nothing).
    pub fn signal(&self, signal: Signal) -> Result<(), BenchError> {
        if self.exited.is_some() {
            return Ok(());
        }
        Ok(self.proc.signal(signal)?)
    }

    /// Waits up to `timeout` for the process to exit; its exit status, once it has.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.proc.wait_exit(timeout);
        }
        self.exited
    }
}

/// The harvesters of one scenario.
#[derive(Debug)]
pub struct Fleet {
    pub members: Vec<Member>,
    pub config: PathBuf,
    /// Where the members write their acknowledgement logs, if they do.
    pub acks: Option<PathBuf>,
}

impl Fleet {
    /// Starts `n` members; with `acks`, each writes its acknowledgement log into that folder
    /// ([`crate::acks`]).
    pub fn start(
        n: usize,
        reaper: &Path,
        config: PathBuf,
        settings: &[(String, String)],
        acks: Option<PathBuf>,
    ) -> Result<Fleet, BenchError> {
        let members = (0..n)
            .map(|i| {
                let name = format!("reaper-{i}");
                let log = acks.as_deref().map(|d| crate::acks::path(d, &name));
                Member::spawn(&name, reaper, &config, settings, log.as_deref())
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Fleet {
            members,
            config,
            acks,
        })
    }

    /// Starts one more member (`reaper-<n>`, n the members so far) with the fleet's config
    /// file; returns its index.
    pub fn add(
        &mut self,
        reaper: &Path,
        settings: &[(String, String)],
    ) -> Result<usize, BenchError> {
        let i = self.members.len();
        let name = format!("reaper-{i}");
        let log = (self.acks.as_deref()).map(|d| crate::acks::path(d, &name));
        let member = Member::spawn(&name, reaper, &self.config, settings, log.as_deref())?;
        self.members.push(member);
        Ok(i)
    }

    /// The first instant any member acquired leadership.
    pub fn first_acquired(&self) -> Option<Instant> {
        self.members.iter().flat_map(Member::acquired).min()
    }

    /// Waits until some member leads; returns its index.
    pub fn wait_leader(&self, timeout: Duration) -> Result<usize, BenchError> {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(i) = self.members.iter().position(Member::is_leader) {
                return Ok(i);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(BenchError::Run(format!(
            "no harvester led within {timeout:?}"
        )))
    }

    /// For harvesters sharing the outbox by bucket (their `/buckets` answers): waits until
    /// every member owns at least one bucket, so a scale-out run measures all of them. Returns
    /// whether they share (false for a single-leader kind, at once).
    pub fn wait_sharing(&self, timeout: Duration) -> Result<bool, BenchError> {
        let owned = |m: &Member| -> Option<usize> {
            let (status, body) = testkit::http::get(m.http, "/buckets").ok()?;
            if status != 200 {
                return None;
            }
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            Some(v["owned"].as_array().map_or(0, Vec::len))
        };
        let deadline = Instant::now() + timeout;
        loop {
            let counts: Vec<Option<usize>> = self.members.iter().map(owned).collect();
            if counts.iter().any(Option::is_none) {
                return Ok(false);
            }
            if counts.iter().all(|c| c.unwrap_or(0) > 0) {
                return Ok(true);
            }
            if Instant::now() > deadline {
                return Err(BenchError::Run(format!(
                    "the harvesters did not all own buckets within {timeout:?}: {counts:?}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// SIGTERM everyone still running and wait (bounded) for them to exit.
    pub fn stop(&mut self) {
        for m in &self.members {
            let _ = m.signal(Signal::Cont);
            let _ = m.signal(Signal::Term);
        }
        for m in &mut self.members {
            let _ = m.wait_exit(Duration::from_secs(20));
        }
    }

    /// Sum of CPU seconds and the largest peak RSS over the members.
    pub fn totals(&self) -> ProcStats {
        self.members.iter().fold(ProcStats::default(), |acc, m| {
            let s = m.stats();
            ProcStats {
                cpu_seconds: acc.cpu_seconds + s.cpu_seconds,
                peak_rss_bytes: acc.peak_rss_bytes.max(s.peak_rss_bytes),
            }
        })
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.config);
    }
}
