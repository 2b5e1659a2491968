//! A relay in front of one Kafka listener that can cut its clients off mid-flight: the network
//! partition a stalled producer lives through. Armed for a topic, it forwards until a client
//! sends a Produce request to that topic, then holds that request and everything after it from
//! every connection, unsent, until released; the broker acknowledges none of it meanwhile.
//! Released, the held requests reach the broker in their order, late: exactly what a zombie's
//! sends are. The broker's answers to the held Produce requests are read back (their
//! partitions' error codes), so a test can say whether the broker wrote them or refused them.
//!
//! Kafka clients connect to the addresses a broker advertises, so the relay is only in the path
//! of a listener that advertises the relay's own address ([`super::PrivateKafka::start_relayed`]).
//! Frames are forwarded whole (a 4-byte length, then the request or response); the relay reads
//! only a request's header, a Produce request's first topic and a Produce response's error
//! codes.

use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::thread;

use parking_lot::Mutex;

use crate::TestkitError;

mod produce;

pub use produce::ProduceAnswer;

/// Kafka's api key of Produce.
const PRODUCE: i16 = 0;

/// What the relay does with a client's requests.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
enum Mode {
    #[default]
    Forward,
    /// Forward until a Produce request to this topic, then hold.
    Armed(String),
    Holding,
}

/// One client connection: its way to the broker and what is held of it.
struct Conn {
    upstream: TcpStream,
    held: Vec<Vec<u8>>,
    /// Held Produce requests not yet answered: correlation id -> (api version, topic).
    produce: HashMap<i32, (i16, String)>,
    /// The client closed its side: the upstream is shut once nothing is held.
    closed: bool,
}

#[derive(Default)]
struct State {
    mode: Mode,
    conns: Vec<Arc<Mutex<Conn>>>,
    held: Held,
    answers: Vec<ProduceAnswer>,
}

/// What the relay holds now, or held before its release.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Produce requests held (from the arming on), by the first topic each writes to.
    pub produce: BTreeMap<String, u64>,
    /// Requests of any kind held.
    pub requests: u64,
    /// Their bytes.
    pub bytes: u64,
}

impl Held {
    /// Produce requests held that write to `topic`.
    pub fn produce_to(&self, topic: &str) -> u64 {
        self.produce.get(topic).copied().unwrap_or(0)
    }
}

/// A relay listening on loopback; [`Relay::start`] gives it its broker.
pub struct Relay {
    listener: TcpListener,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Relay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Relay")
            .field("addr", &self.listener.local_addr().ok())
            .finish_non_exhaustive()
    }
}

impl Relay {
    /// Binds a free loopback port (the address a listener is to advertise).
    pub fn bind() -> Result<Relay, TestkitError> {
        Ok(Relay {
            listener: TcpListener::bind(("127.0.0.1", 0))?,
            state: Arc::default(),
        })
    }

    /// The relay's own address.
    pub fn addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener")
    }

    /// Accepts clients from now on and relays each to `upstream`, on threads of its own (the
    /// relay outlives a test's stalls: it never runs on the test's runtime).
    pub fn start(&self, upstream: SocketAddr) -> Result<(), TestkitError> {
        let listener = self.listener.try_clone()?;
        let state = Arc::clone(&self.state);
        thread::Builder::new()
            .name("relay-accept".into())
            .spawn(move || {
                for client in listener.incoming().flatten() {
                    if let Ok(server) = TcpStream::connect(upstream) {
                        connect(&state, client, server);
                    }
                }
            })?;
        Ok(())
    }

    /// From the next Produce request to `topic` on (that one included), holds every request of
    /// every connection.
    pub fn arm(&self, topic: &str) {
        let mut s = self.state.lock();
        if s.mode == Mode::Forward {
            s.mode = Mode::Armed(topic.to_owned());
        }
    }

    /// What is held so far.
    pub fn held(&self) -> Held {
        self.state.lock().held.clone()
    }

    /// Sends every held request on, each connection's in its order, and forwards from now on.
    pub fn release(&self) {
        let mut s = self.state.lock();
        s.mode = Mode::Forward;
        for conn in &s.conns {
            let mut c = conn.lock();
            let held = std::mem::take(&mut c.held);
            for frame in held {
                if c.upstream.write_all(&frame).is_err() {
                    break;
                }
            }
            if c.closed {
                let _ = c.upstream.shutdown(Shutdown::Write);
            }
        }
    }

    /// The broker's answers to the held Produce requests so far.
    pub fn answers(&self) -> Vec<ProduceAnswer> {
        self.state.lock().answers.clone()
    }
}

/// Starts the two pumps of one client connection.
fn connect(state: &Arc<Mutex<State>>, client: TcpStream, server: TcpStream) {
    let (Ok(client_read), Ok(server_read)) = (client.try_clone(), server.try_clone()) else {
        return;
    };
    let conn = Arc::new(Mutex::new(Conn {
        upstream: server,
        held: Vec::new(),
        produce: HashMap::new(),
        closed: false,
    }));
    state.lock().conns.push(Arc::clone(&conn));
    let (s1, c1) = (Arc::clone(state), Arc::clone(&conn));
    let _ = thread::Builder::new()
        .name("relay-up".into())
        .spawn(move || requests(&s1, &c1, client_read));
    let s2 = Arc::clone(state);
    let _ = thread::Builder::new()
        .name("relay-down".into())
        .spawn(move || responses(&s2, &conn, server_read, client));
}

/// Reads one frame (length included), or `None` at the end of the stream.
fn frame(from: &mut TcpStream) -> Option<Vec<u8>> {
    let mut len = [0u8; 4];
    from.read_exact(&mut len).ok()?;
    let n = usize::try_from(i32::from_be_bytes(len)).ok()?;
    let mut f = vec![0u8; 4 + n];
    f[..4].copy_from_slice(&len);
    from.read_exact(&mut f[4..]).ok()?;
    Some(f)
}

/// Client -> broker: forwards each request, or holds it.
fn requests(state: &Mutex<State>, conn: &Mutex<Conn>, mut client: TcpStream) {
    while let Some(f) = frame(&mut client) {
        let (api_key, version, correlation) = header(&f);
        let topic = (api_key == PRODUCE).then(|| produce::topic(&f, version).unwrap_or_default());
        let mut s = state.lock();
        if matches!((&s.mode, &topic), (Mode::Armed(t), Some(p)) if t == p) {
            s.mode = Mode::Holding;
        }
        let mut c = conn.lock();
        if s.mode == Mode::Holding {
            s.held.requests += 1;
            s.held.bytes += f.len() as u64;
            if let Some(topic) = topic {
                *s.held.produce.entry(topic.clone()).or_default() += 1;
                c.produce.insert(correlation, (version, topic));
            }
            c.held.push(f);
        } else if c.upstream.write_all(&f).is_err() {
            break;
        }
    }
    // Held requests still go out at the release, as a zombie's bytes in the network would.
    let _s = state.lock();
    let mut c = conn.lock();
    c.closed = true;
    if c.held.is_empty() {
        let _ = c.upstream.shutdown(Shutdown::Write);
    }
}

/// Broker -> client: forwards each response, reading the answers to held Produce requests.
fn responses(
    state: &Mutex<State>,
    conn: &Mutex<Conn>,
    mut server: TcpStream,
    mut client: TcpStream,
) {
    while let Some(f) = frame(&mut server) {
        let correlation = i32::from_be_bytes([f[4], f[5], f[6], f[7]]);
        let held = conn.lock().produce.remove(&correlation);
        if let Some((version, topic)) = held {
            let answer = ProduceAnswer::parse(&f[4..], version, topic);
            state.lock().answers.push(answer);
        }
        if client.write_all(&f).is_err() {
            break;
        }
    }
    let _ = client.shutdown(Shutdown::Write);
}

/// A request's api key, api version and correlation id (the same place in every header version).
fn header(f: &[u8]) -> (i16, i16, i32) {
    if f.len() < 12 {
        return (-1, -1, -1);
    }
    (
        i16::from_be_bytes([f[4], f[5]]),
        i16::from_be_bytes([f[6], f[7]]),
        i32::from_be_bytes([f[8], f[9], f[10], f[11]]),
    )
}
