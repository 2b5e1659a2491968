//! The HTTP endpoint operators and orchestrators probe: `/metrics` (Prometheus text),
//! `/healthz` (the process answers), `/readyz` (the store and the broker answer) and `/leader`
//! (200 only while this instance leads, for Kubernetes probes and load balancers).
//!
//! Four GET routes do not justify an HTTP framework in every embedder's build: this is a small
//! HTTP/1.1 responder on a tokio listener, one request per connection, with bounded reads so a
//! stuck client cannot hold a task forever.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rdkafka::consumer::{BaseConsumer, Consumer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::election::ElectorState;
use crate::error::Error;
use crate::{Harvester, Result};

/// A bound endpoint, serving until its token is cancelled.
#[derive(Debug)]
pub struct Endpoint {
    /// The address actually bound (useful with port 0).
    pub addr: SocketAddr,
    pub task: JoinHandle<()>,
}

/// Binds `addr` and serves the routes for `harvester` until `cancel`. Boxed, as
/// [`Harvester::connect`] says why.
pub fn serve(
    harvester: Arc<Harvester>,
    addr: SocketAddr,
    cancel: CancellationToken,
) -> futures::future::BoxFuture<'static, Result<Endpoint>> {
    Box::pin(serve_inner(harvester, addr, cancel))
}

async fn serve_inner(
    harvester: Arc<Harvester>,
    addr: SocketAddr,
    cancel: CancellationToken,
) -> Result<Endpoint> {
    let listener = TcpListener::bind(addr).await.map_err(|source| Error::Io {
        action: format!("listen on {addr} for HTTP"),
        source,
    })?;
    let addr = listener.local_addr().map_err(|source| Error::Io {
        action: "read the HTTP listener's address".into(),
        source,
    })?;
    let probe = Arc::new(BrokerProbe::new(&harvester)?);
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                () = cancel.cancelled() => return,
            };
            match accepted {
                Ok((stream, _)) => {
                    let (h, p) = (Arc::clone(&harvester), Arc::clone(&probe));
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(Duration::from_secs(10), handle(stream, h, p))
                            .await;
                    });
                }
                Err(e) => {
                    tracing::warn!("http accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    tracing::info!(%addr, "serving /metrics, /healthz, /readyz, /leader");
    Ok(Endpoint { addr, task })
}

/// Broker reachability: a metadata request from a client of its own (never the producers').
struct BrokerProbe {
    consumer: BaseConsumer,
}

impl std::fmt::Debug for BrokerProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BrokerProbe")
    }
}

impl BrokerProbe {
    /// With the harvester's `kafka` settings as every other client gets them: secrets given as
    /// `<property>_file` or `_env` read in (librdkafka knows no such property).
    fn new(h: &Harvester) -> Result<Self> {
        let config = h
            .config()
            .kafka
            .client_config("kafka", "readiness probe", &[])
            .map_err(Error::InvalidConfig)?;
        let consumer = config
            .create()
            .map_err(Error::kafka("create the readiness probe client"))?;
        Ok(BrokerProbe { consumer })
    }

    fn reachable(&self, timeout: Duration) -> std::result::Result<(), String> {
        self.consumer
            .fetch_metadata(None, timeout)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }
}

async fn handle(mut stream: TcpStream, h: Arc<Harvester>, probe: Arc<BrokerProbe>) {
    let mut buf = vec![0u8; 4096];
    let mut len = 0;
    // Read until the end of the request head (GET requests carry no body).
    while len < buf.len() {
        match stream.read(&mut buf[len..]).await {
            Ok(0) | Err(_) => break,
            Ok(n) => len += n,
        }
        if buf[..len].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    let head = String::from_utf8_lossy(&buf[..len]);
    let mut parts = head.split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, content_type, body) = if method != "GET" && method != "HEAD" {
        (405, "text/plain", "only GET is served\n".to_owned())
    } else {
        route(path, &h, &probe).await
    };
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        405 => "Method Not Allowed",
        _ => "Service Unavailable",
    };
    let body = if method == "HEAD" {
        String::new()
    } else {
        body
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

async fn route(
    path: &str,
    h: &Arc<Harvester>,
    probe: &Arc<BrokerProbe>,
) -> (u16, &'static str, String) {
    match path {
        "/metrics" => (
            200,
            "text/plain; version=0.0.4",
            crate::metrics::scrape(h).await,
        ),
        "/healthz" => (200, "text/plain", "ok\n".into()),
        // The buckets owned now (deadline-checked), for a harvester sharing by bucket.
        "/buckets" => match h.owned_buckets() {
            Some(owned) => (
                200,
                "application/json",
                format!("{}\n", serde_json::json!({ "owned": owned })),
            ),
            None => (404, "text/plain", "not sharing by bucket\n".into()),
        },
        "/leader" => {
            if h.is_leader() {
                let id = h.leader_id().map(|i| i.to_string()).unwrap_or_default();
                (200, "text/plain", format!("leader {id}\n"))
            } else {
                (503, "text/plain", "not leader\n".into())
            }
        }
        "/readyz" => {
            let mut problems = Vec::new();
            if let Some(e) = h.elector().filter(|e| e.state() != ElectorState::Live) {
                problems.push(format!("elector is {:?}", e.state()));
            }
            match tokio::time::timeout(Duration::from_secs(2), h.store().ping()).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(crate::error::chain(&e)),
                Err(_) => problems.push("database: no answer within 2s".into()),
            }
            let p = Arc::clone(probe);
            match tokio::task::spawn_blocking(move || p.reachable(Duration::from_secs(2))).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => problems.push(format!("kafka: {e}")),
                Err(e) => problems.push(format!("kafka probe failed: {e}")),
            }
            if problems.is_empty() {
                (200, "text/plain", "ready\n".into())
            } else {
                (503, "text/plain", format!("{}\n", problems.join("\n")))
            }
        }
        _ => (
            404,
            "text/plain",
            "routes: /metrics /healthz /readyz /leader\n".into(),
        ),
    }
}
