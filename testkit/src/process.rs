//! Child processes under observation: spawn, collect their JSON-line output, signal them.
//!
//! Failover tests need real process death (`kill -9`) and real stalls (`SIGSTOP`), which only
//! separate OS processes give. Output lines are parsed as JSON and kept with the instant they
//! were read, so a test can reconstruct a timeline across processes.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::TestkitError;

/// A JSON line printed by a child.
#[derive(Debug, Clone)]
pub struct Line {
    /// When the line was read.
    pub at: Instant,
    pub value: serde_json::Value,
}

/// A spawned child whose stdout is collected (stderr is inherited for diagnostics).
#[derive(Debug)]
pub struct Observed {
    pub name: String,
    child: Child,
    lines: Arc<Mutex<Vec<Line>>>,
}

/// Signals understood by [`Observed::signal`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Kill,
    Stop,
    Cont,
}

impl Observed {
    /// Spawns `command`, collecting its stdout lines.
    pub fn spawn(name: &str, mut command: Command) -> Result<Self, TestkitError> {
        let mut child = command
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| TestkitError::Broker("no stdout".into()))?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str(&line) {
                    sink.lock().push(Line {
                        at: Instant::now(),
                        value,
                    });
                }
            }
        });
        Ok(Observed {
            name: name.to_owned(),
            child,
            lines,
        })
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A snapshot of the lines read so far.
    pub fn lines(&self) -> Vec<Line> {
        self.lines.lock().clone()
    }

    /// Lines whose `kind` field equals `kind`.
    pub fn lines_of(&self, kind: &str) -> Vec<Line> {
        self.lines
            .lock()
            .iter()
            .filter(|l| l.value["kind"] == kind)
            .cloned()
            .collect()
    }

    /// Sends a signal.
    pub fn signal(&self, signal: Signal) -> Result<(), TestkitError> {
        let sig = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
            Signal::Stop => libc::SIGSTOP,
            Signal::Cont => libc::SIGCONT,
        };
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| TestkitError::Broker("pid out of range".into()))?;
        #[allow(unsafe_code)]
        // SAFETY: kill(2) with a pid we spawned and a valid signal number has no memory effects.
        let rc = unsafe { libc::kill(pid, sig) };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error().into())
        }
    }

    /// Waits up to `timeout` for the process to exit (polling every 20 ms; asked once more at
    /// the end).
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        while start.elapsed() < timeout {
            if let Some(status) = self.try_exit() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.try_exit()
    }

    /// Its exit status, if it has exited.
    pub fn try_exit(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
