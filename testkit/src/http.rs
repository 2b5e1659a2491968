//! A blocking HTTP GET for probing `/metrics`, `/leader` and friends (and Prometheus's and
//! Jaeger's query APIs) in tests and the benchmark, without an HTTP client dependency. It asks
//! in HTTP/1.0, so every server answers with the whole body and closes: never in chunks.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::TestkitError;

/// Status code and body of `GET path` on `addr`.
pub fn get(addr: SocketAddr, path: &str) -> Result<(u16, String), TestkitError> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nhost: {addr}\r\n\r\n")?;
    let mut raw = String::new();
    stream.read_to_string(&mut raw)?;
    let status = raw
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| TestkitError::Broker(format!("not an HTTP response: {raw:.80}")))?;
    let body = raw
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((status, body))
}

/// The value of an unlabelled sample `name` in a Prometheus exposition.
pub fn metric(exposition: &str, name: &str) -> Option<f64> {
    exposition.lines().find_map(|l| {
        let (n, v) = l.split_once(' ')?;
        (n == name).then(|| v.trim().parse().ok())?
    })
}
