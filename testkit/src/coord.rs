//! The coordination servers the electors use (NATS with JetStream, ZooKeeper, etcd): where the
//! shared ones are, and private ones a test may stop and restart.
//!
//! `scripts/services.sh up` provides the shared servers and writes their addresses to
//! `.state/services.env`; the helpers here read the environment first, then that file, so a
//! test run by hand after `up` finds them without sourcing anything. Tests that take a server
//! away (stop, restart) use a [`PrivateServer`] of their own, never the shared one.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{names, state_dir, TestkitError};

/// `var` from the environment, else its `export var=...` line in `.state/services.env`, else
/// `default`.
pub fn address(var: &str, default: &str) -> String {
    if let Ok(v) = std::env::var(var) {
        if !v.trim().is_empty() {
            return v;
        }
    }
    let env = std::fs::read_to_string(state_dir().join("services.env")).unwrap_or_default();
    let prefix = format!("export {var}=");
    env.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .map(|v| v.trim().trim_matches('"').to_owned())
        .unwrap_or_else(|| default.to_owned())
}

/// The shared NATS server (with JetStream).
pub fn nats_url() -> String {
    address("NATS_URL", "nats://127.0.0.1:4222")
}

/// The shared ZooKeeper server, `host:port`.
pub fn zookeeper_addr() -> String {
    address("ZOOKEEPER_ADDR", "127.0.0.1:21810")
}

/// The shared etcd, its first client URL.
pub fn etcd_endpoint() -> String {
    etcd_endpoints().swap_remove(0)
}

/// The shared etcd, every client URL (`ETCD_ENDPOINTS` is comma-separated); at least one.
pub fn etcd_endpoints() -> Vec<String> {
    let all = address("ETCD_ENDPOINTS", "http://127.0.0.1:23790");
    let mut urls: Vec<String> = all
        .split(',')
        .map(|e| e.trim().to_owned())
        .filter(|e| !e.is_empty())
        .collect();
    if urls.is_empty() {
        urls.push("http://127.0.0.1:23790".to_owned());
    }
    urls
}

/// Which server a [`PrivateServer`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    Nats,
    ZooKeeper,
    Etcd,
    /// etcd over TLS with client certificates and authentication on (`https://` address):
    /// [`tls::files`](crate::tls::files) in [`PrivateServer::tls_dir`], the user `harvester`
    /// (role readwrite on `/harvester/` and `/conformance/`) with its password in
    /// [`PrivateServer::password_file`], and `root`.
    EtcdTls,
    /// NATS with JetStream, TLS only (`tls://` address), the user `harvester` with its password
    /// in [`PrivateServer::password_file`].
    NatsTls,
}

impl Server {
    fn command(self) -> &'static str {
        match self {
            Server::Nats => "private-nats",
            Server::ZooKeeper => "private-zookeeper",
            Server::Etcd => "private-etcd",
            Server::EtcdTls => "private-etcd-tls",
            Server::NatsTls => "private-nats-tls",
        }
    }

    /// Whether it runs with TLS material of its own (written into its dir before start).
    fn secured(self) -> bool {
        matches!(self, Server::EtcdTls | Server::NatsTls)
    }
}

/// A server of the test's own on a free loopback port (`scripts/services.sh private-*`), with
/// its data dir under `.state/private/`. Stopped (and its data removed) on drop.
#[derive(Debug)]
pub struct PrivateServer {
    server: Server,
    dir: PathBuf,
    port: u16,
    address: String,
}

/// A port nothing listens on now, and (for etcd's peer port) neither on `port + 10`.
fn free_port() -> Result<u16, TestkitError> {
    for _ in 0..50 {
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        if port < 65000 && TcpListener::bind(("127.0.0.1", port + 10)).is_ok() {
            return Ok(port);
        }
    }
    Err(TestkitError::Server("no free port pair found".into()))
}

fn services(args: &[&str]) -> Result<String, TestkitError> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/services.sh");
    let out = Command::new(script).args(args).output()?;
    if !out.status.success() {
        return Err(TestkitError::Server(format!(
            "scripts/services.sh {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

impl PrivateServer {
    /// Starts one (installing the package if needed, as `services.sh` does).
    pub fn start(server: Server) -> Result<PrivateServer, TestkitError> {
        let port = free_port()?;
        let dir = state_dir()
            .join("private")
            .join(names::unique(server.command()));
        if server.secured() {
            crate::tls::write_material(&dir.join("tls"))?;
        }
        let mut s = PrivateServer {
            server,
            dir,
            port,
            address: String::new(),
        };
        s.up()?;
        Ok(s)
    }

    fn up(&mut self) -> Result<(), TestkitError> {
        let dir = self.dir.display().to_string();
        let port = self.port.to_string();
        self.address = services(&[self.server.command(), "up", &dir, &port])?;
        Ok(())
    }

    /// Its client address (`nats://...`, `host:port`, `http://...`).
    pub fn address(&self) -> &str {
        &self.address
    }

    /// Where a secured server's certificates are ([`crate::tls::files`]).
    pub fn tls_dir(&self) -> PathBuf {
        self.dir.join("tls")
    }

    /// The file (0600) holding the password of `user` on a secured server (`harvester`, and
    /// `root` on etcd).
    pub fn password_file(&self, user: &str) -> PathBuf {
        self.dir.join(format!("{user}.password"))
    }

    /// Stops the server, keeping its data (as a crash or a maintenance stop would).
    pub fn stop(&self) -> Result<(), TestkitError> {
        let dir = self.dir.display().to_string();
        services(&[self.server.command(), "down", &dir, &self.port.to_string()]).map(|_| ())
    }

    /// Starts it again on the same port and data.
    pub fn restart(&mut self) -> Result<(), TestkitError> {
        self.up()
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let _ = self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
