//! Who was busy during the measured part of a run: the broker (the embedded one, or a real
//! one running on this machine), the harvesters, the database (Postgres or MariaDB); and from
//! that, what the run was bound by.
//!
//! On a small machine the embedded broker (librdkafka's mock cluster) serves every produce and
//! fetch request of a cluster on **one thread** (`rdk:mock`), for the harvester and for the
//! verifier alike. When that thread is saturated, the figures measure the mock, not the
//! harvester, and the report has to say so. CPU time comes from `/proc/<pid>/stat` and
//! `/proc/<pid>/task/<tid>/stat` (utime + stime), read at the start and end of the interval;
//! Postgres is every process whose `comm` is `postgres` (its backends come and go, so a
//! sampler keeps each one's last value), MariaDB its `mariadbd` (or MySQL's `mysqld`) process,
//! measured only when the database is on this machine.
//!
//! CPU time alone understates a saturated thread on a machine with more runnable threads than
//! cores (two cores here, shared by broker, harvester, Postgres and the verifier): a thread that
//! always has work but waits for a core half the time shows 50 %. So the broker thread's
//! *busy* share is its time on a CPU plus its time runnable but waiting for one, from
//! `/proc/<pid>/task/<tid>/schedstat`; its CPU share is reported beside it.
//!
//! A real broker (Kafka's JVM) is many threads: it counts, as the database does, by its share
//! of the machine, every process listening on a local port of the bootstrap list
//! ([`super::listeners`]).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use workloads::Backend;

use crate::result::{Bound, CpuUsage};

/// Linux reports /proc times in USER_HZ, which is 100 on every Linux ABI.
const USER_HZ: f64 = 100.0;

/// The broker thread counts as the bottleneck at this share of one core.
pub const BROKER_SATURATED: f64 = 0.9;
/// The database or the harvesters count as the bottleneck from this share of what they could
/// use (see [`bound_by`]).
pub const SATURATED_SHARE: f64 = 0.5;

/// utime + stime of a `/proc/.../stat` file, in seconds.
fn stat_seconds(path: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(path).ok()?;
    // Fields after the parenthesised command name; utime and stime are fields 14 and 15.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: f64 = fields.next()?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    Some((utime + stime) / USER_HZ)
}

fn comm(path: &str) -> Option<String> {
    Some(std::fs::read_to_string(path).ok()?.trim_end().to_owned())
}

/// (seconds on a CPU, seconds runnable waiting for one) from a `schedstat` file.
fn schedstat(path: &str) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(path).ok()?;
    let mut fields = text.split_whitespace();
    let run: f64 = fields.next()?.parse().ok()?;
    let wait: f64 = fields.next()?.parse().ok()?;
    Some((run / 1e9, wait / 1e9))
}

/// One mock-cluster thread: CPU seconds, and (on CPU, waiting) seconds when the kernel keeps
/// scheduler statistics.
#[derive(Debug, Clone, Copy, Default)]
struct ThreadSample {
    cpu: f64,
    sched: Option<(f64, f64)>,
}

/// The broker process's CPU, and each of its mock-cluster threads'.
#[derive(Debug, Clone, Default)]
struct BrokerSample {
    process: f64,
    mock_threads: HashMap<u32, ThreadSample>,
}

fn sample_broker(pid: u32) -> Option<BrokerSample> {
    let process = stat_seconds(&format!("/proc/{pid}/stat"))?;
    let mut mock_threads = HashMap::new();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) {
        for t in tasks.flatten() {
            let Some(tid) = t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if comm(&format!("/proc/{pid}/task/{tid}/comm")).as_deref() == Some("rdk:mock") {
                if let Some(cpu) = stat_seconds(&format!("/proc/{pid}/task/{tid}/stat")) {
                    let sched = schedstat(&format!("/proc/{pid}/task/{tid}/schedstat"));
                    mock_threads.insert(tid, ThreadSample { cpu, sched });
                }
            }
        }
    }
    Some(BrokerSample {
        process,
        mock_threads,
    })
}

/// CPU seconds of a real broker's processes on this machine, summed; `None` without any.
pub(crate) fn kafka_cpu_seconds(pids: &[u32]) -> Option<f64> {
    (!pids.is_empty()).then(|| {
        pids.iter()
            .filter_map(|pid| stat_seconds(&format!("/proc/{pid}/stat")))
            .sum()
    })
}

/// The `comm` of the database server's processes.
fn processes(backend: Backend) -> &'static [&'static str] {
    match backend {
        Backend::Postgres => &["postgres"],
        Backend::MariaDb => &["mariadbd", "mysqld"],
    }
}

/// CPU seconds of every process of the database server, by pid.
fn sample_database(backend: Backend) -> HashMap<u32, f64> {
    let mut out = HashMap::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let name = comm(&format!("/proc/{pid}/comm"));
        if name.is_some_and(|n| processes(backend).contains(&n.as_str())) {
            if let Some(s) = stat_seconds(&format!("/proc/{pid}/stat")) {
                out.insert(pid, s);
            }
        }
    }
    out
}

/// Whether a database URL points at this machine (a loopback host or a Unix socket).
pub fn is_local(database_url: &str) -> bool {
    let Some(rest) = database_url.split_once("://").map(|(_, r)| r) else {
        return false;
    };
    let authority = rest.split(['/', '?']).next().unwrap_or("");
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or("")
    } else {
        host_port.split(':').next().unwrap_or("")
    };
    let socket = rest
        .split_once('?')
        .is_some_and(|(_, q)| q.split('&').any(|kv| kv.starts_with("host=/")));
    socket || host.is_empty() || matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// The "bound by" verdict.
///
/// - **broker** when the broker's thread was at least [`BROKER_SATURATED`] (90 %) busy (on a
///   CPU or waiting for one; its CPU share where the kernel keeps no scheduler statistics): it
///   is one thread, so it cannot go faster, and everything else waited on it.
/// - else **database**, **harvester** or a real **broker** (Kafka's JVM on this machine),
///   whichever used the largest share of what it could use,
///   provided that share is at least [`SATURATED_SHARE`] (50 %). Both are multi-threaded (the
///   harvester's pipeline stages, Postgres's backends and background workers) and share the
///   machine's cores with everything else, so what each could use is the cores × the interval;
///   half the machine for one component is a bottleneck on any box this bench runs on.
/// - else **none**: nothing was saturated, so the run was bound by round trips (latency) or by
///   its own load (writers, rate targets), which is what a steady run at half capacity shows.
pub fn bound_by(u: &CpuUsage) -> Bound {
    if u.broker_busy
        .or(u.broker_utilisation)
        .is_some_and(|b| b >= BROKER_SATURATED)
    {
        return Bound::Broker;
    }
    let capacity = u.wall_seconds * u.cores.max(1) as f64;
    if capacity <= 0.0 {
        return Bound::None;
    }
    let harvester = u.harvester_cpu_seconds / capacity;
    let database = u.postgres_cpu_seconds.unwrap_or(0.0) / capacity;
    // A real broker (no mock thread measured) by its share of the machine, as the database.
    let real_broker = match u.broker_utilisation {
        None => u.broker_cpu_seconds.unwrap_or(0.0) / capacity,
        Some(_) => 0.0,
    };
    let (bound, share) = [
        (Bound::Harvester, harvester),
        (Bound::Database, database),
        (Bound::Broker, real_broker),
    ]
    .into_iter()
    .fold(
        (Bound::None, 0.0),
        |best, (b, s)| {
            if s > best.1 {
                (b, s)
            } else {
                best
            }
        },
    );
    if share >= SATURATED_SHARE {
        bound
    } else {
        Bound::None
    }
}

/// CPU seconds of the database's processes by pid: when the interval started, and last seen
/// (a backend that exits keeps its last value).
#[derive(Debug, Default)]
struct DatabaseCpu {
    first: HashMap<u32, f64>,
    last: HashMap<u32, f64>,
}

/// A running measurement; [`CpuMeter::finish`] gives the figures.
#[derive(Debug)]
pub struct CpuMeter {
    started: Instant,
    broker_pid: Option<u32>,
    broker: Option<BrokerSample>,
    kafka_pids: Vec<u32>,
    kafka_first: Option<f64>,
    database: Backend,
    postgres: Option<Arc<Mutex<DatabaseCpu>>>,
    sampling: Arc<AtomicBool>,
}

impl CpuMeter {
    /// Starts measuring the broker process `broker_pid` (embedded broker), or `kafka_pids` (a
    /// real broker's processes on this machine), and, when
    /// `local_database` names the backend of a database on this machine, its processes.
    pub fn start(
        broker_pid: Option<u32>,
        kafka_pids: Vec<u32>,
        local_database: Option<Backend>,
    ) -> CpuMeter {
        let sampling = Arc::new(AtomicBool::new(true));
        let postgres = local_database.map(|backend| {
            let first = sample_database(backend);
            let state = Arc::new(Mutex::new(DatabaseCpu {
                last: first.clone(),
                first,
            }));
            let (s, on) = (Arc::clone(&state), Arc::clone(&sampling));
            std::thread::spawn(move || {
                while on.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let now = sample_database(backend);
                    s.lock().last.extend(now);
                }
            });
            state
        });
        CpuMeter {
            started: Instant::now(),
            database: local_database.unwrap_or_default(),
            broker_pid,
            broker: broker_pid.and_then(sample_broker),
            kafka_first: kafka_cpu_seconds(&kafka_pids),
            kafka_pids,
            postgres,
            sampling,
        }
    }

    /// Ends the interval; `harvester_cpu_seconds` is the fleet's over the same interval.
    pub fn finish(self, harvester_cpu_seconds: f64) -> CpuUsage {
        let wall = self.started.elapsed().as_secs_f64();
        self.sampling.store(false, Ordering::Relaxed);
        let end = self.broker_pid.and_then(sample_broker);
        let wall_share = |s: f64| s / wall.max(1e-9);
        let (broker_cpu_seconds, broker_utilisation, broker_busy) = match (&self.broker, &end) {
            (Some(a), Some(b)) => {
                // Per mock thread over the interval: (CPU, on CPU + waiting) seconds. A thread
                // started during the interval counts from zero.
                let deltas: Vec<(f64, Option<f64>)> = b
                    .mock_threads
                    .iter()
                    .map(|(tid, end)| {
                        let start = a.mock_threads.get(tid).copied().unwrap_or(ThreadSample {
                            cpu: 0.0,
                            sched: Some((0.0, 0.0)),
                        });
                        let busy = match (start.sched, end.sched) {
                            (Some((r0, w0)), Some((r1, w1))) => Some((r1 - r0) + (w1 - w0)),
                            _ => None,
                        };
                        (end.cpu - start.cpu, busy)
                    })
                    .collect();
                let process = b.process - a.process;
                // The busiest thread is the cluster this run used (the others idle); without a
                // visible mock thread, the process as a whole stands in for it.
                let busiest = deltas
                    .iter()
                    .copied()
                    .max_by(|x, y| x.1.unwrap_or(x.0).total_cmp(&y.1.unwrap_or(y.0)));
                (
                    Some(process),
                    Some(wall_share(busiest.map_or(process, |t| t.0))),
                    busiest.and_then(|t| t.1).map(wall_share),
                )
            }
            _ => (
                self.kafka_first
                    .zip(kafka_cpu_seconds(&self.kafka_pids))
                    .map(|(a, b)| (b - a).max(0.0)),
                None,
                None,
            ),
        };
        let postgres_cpu_seconds = self.postgres.as_ref().map(|state| {
            let pg = &mut *state.lock();
            pg.last.extend(sample_database(self.database));
            pg.last
                .iter()
                .map(|(pid, s)| (s - pg.first.get(pid).copied().unwrap_or(0.0)).max(0.0))
                .sum()
        });
        let mut usage = CpuUsage {
            wall_seconds: wall,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            broker_cpu_seconds,
            broker_utilisation,
            broker_busy,
            harvester_cpu_seconds,
            postgres_cpu_seconds,
            bound_by: Bound::None,
            database: self.database,
        };
        usage.bound_by = bound_by(&usage);
        usage
    }
}

impl Drop for CpuMeter {
    fn drop(&mut self) {
        self.sampling.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(broker: Option<f64>, harvester: f64, postgres: Option<f64>) -> CpuUsage {
        CpuUsage {
            wall_seconds: 10.0,
            cores: 2,
            broker_cpu_seconds: broker.map(|b| b * 10.0),
            broker_utilisation: broker,
            broker_busy: None,
            harvester_cpu_seconds: harvester,
            postgres_cpu_seconds: postgres,
            bound_by: Bound::None,
            database: Backend::Postgres,
        }
    }

    #[test]
    fn the_bound_follows_the_heuristic() {
        assert_eq!(
            bound_by(&usage(Some(0.95), 15.0, Some(15.0))),
            Bound::Broker
        );
        // 75 % on a CPU, but runnable 95 % of the time: saturated, starved of a core.
        let starved = CpuUsage {
            broker_busy: Some(0.95),
            ..usage(Some(0.75), 15.0, Some(15.0))
        };
        assert_eq!(bound_by(&starved), Bound::Broker);
        let idle = CpuUsage {
            broker_busy: Some(0.5),
            ..usage(Some(0.45), 1.0, Some(1.0))
        };
        assert_eq!(bound_by(&idle), Bound::None);
        assert_eq!(
            bound_by(&usage(Some(0.5), 12.0, Some(4.0))),
            Bound::Harvester
        );
        assert_eq!(
            bound_by(&usage(Some(0.5), 4.0, Some(11.0))),
            Bound::Database
        );
        assert_eq!(bound_by(&usage(Some(0.5), 4.0, Some(3.0))), Bound::None);
        // A real broker: no mock thread, its processes' share of the machine.
        let kafka = CpuUsage {
            broker_cpu_seconds: Some(12.0),
            broker_utilisation: None,
            ..usage(None, 4.0, Some(6.0))
        };
        assert_eq!(bound_by(&kafka), Bound::Broker);
        let light = CpuUsage {
            broker_cpu_seconds: Some(2.0),
            ..kafka
        };
        assert_eq!(bound_by(&light), Bound::None);
        // A real cluster, a remote database.
        assert_eq!(bound_by(&usage(None, 10.0, None)), Bound::Harvester);
    }

    #[test]
    fn local_databases_are_recognised() {
        assert!(is_local("postgres://postgres@127.0.0.1:5432/postgres"));
        assert!(is_local("postgres://u:p@localhost/db"));
        assert!(is_local("postgres://[::1]:5432/db"));
        assert!(is_local("postgres:///db?host=/var/run/postgresql"));
        assert!(!is_local("postgres://u@db.example.com:5432/db"));
        assert!(is_local("mysql://root@127.0.0.1:3306/test"));
        assert!(!is_local("mariadb://app:pw@db.example.com:3306/orders"));
    }

    #[test]
    fn cpu_time_and_scheduler_statistics_agree() {
        let stat = || stat_seconds("/proc/thread-self/stat").unwrap();
        let sched = || schedstat("/proc/thread-self/schedstat");
        let (cpu0, sched0) = (stat(), sched());
        // Spin until this thread has had 100 ms of CPU (however busy the machine is).
        let deadline = Instant::now() + Duration::from_secs(20);
        while stat() - cpu0 < 0.1 && Instant::now() < deadline {
            std::hint::black_box(Instant::now());
        }
        assert!(stat() - cpu0 >= 0.1, "no CPU time in 20 s");
        // Where the kernel keeps scheduler statistics, they saw the same time on a CPU (stat
        // counts in 10 ms ticks).
        if let (Some((run0, _)), Some((run1, _))) = (sched0, sched()) {
            assert!(run1 - run0 >= 0.08, "{}", run1 - run0);
        }
    }
}
