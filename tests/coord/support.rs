//! Shared pieces: a scripted demand source, a token book, a scripted host (a plain
//! tungstenite client) and polling with a deadline.

use runner_manager::coordinator::auth::{TokenBook, token_hash};
use runner_manager::coordinator::demand::DemandSource;
use runner_manager::coordinator::placement::{CoordTarget, PlacementConfig};
use runner_manager::coordinator::protocol::{CoordMsg, Hello, HostMsg, LaunchFrame};
use runner_manager::coordinator::server::{ServeOptions, ServerHandle, serve};
use runner_manager::domain::QueuedJob;
use runner_manager::secret::Secret;
use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tungstenite::client::IntoClientRequest;
use tungstenite::{Message, WebSocket};

pub const T0: i64 = 1_800_000_000_000;

/// Polls `f` until it is true or `secs` pass.
pub fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A coordinator log that keeps its lines, for tests that read what it said.
pub fn captured_log() -> (
    runner_manager::coordinator::ws::LogFn,
    Arc<Mutex<Vec<String>>>,
) {
    let lines = Arc::new(Mutex::new(Vec::new()));
    let l2 = lines.clone();
    (
        Arc::new(move |l: &str| l2.lock().unwrap().push(l.to_string())),
        lines,
    )
}

/// The hosts' token hashes; `remove` is `coordinator host rm`.
pub struct Tokens(pub Mutex<Vec<(String, Vec<u8>)>>);

impl TokenBook for Tokens {
    fn hashes(&self) -> Option<Vec<(String, Vec<u8>)>> {
        Some(self.0.lock().unwrap().clone())
    }
}

impl Tokens {
    pub fn remove(&self, host: &str) {
        self.0.lock().unwrap().retain(|(h, _)| h != host);
    }
}

pub fn tokens(hosts: &[&str]) -> Arc<Tokens> {
    Arc::new(Tokens(Mutex::new(
        hosts
            .iter()
            .map(|h| {
                (
                    h.to_string(),
                    token_hash(&Secret::new(token_of(h))).to_vec(),
                )
            })
            .collect(),
    )))
}

pub fn token_of(host: &str) -> String {
    format!("token-of-{host}-0123456789abcdef")
}

pub type Queue = Arc<Mutex<Vec<QueuedJob>>>;

pub struct Scripted {
    target: CoordTarget,
    jobs: Queue,
}

impl DemandSource for Scripted {
    fn target(&self) -> &CoordTarget {
        &self.target
    }
    fn interval(&self) -> Duration {
        Duration::from_millis(10)
    }
    fn queued(&mut self) -> Result<Vec<QueuedJob>, String> {
        Ok(self.jobs.lock().unwrap().clone())
    }
}

pub fn job(id: i64, labels: &[&str]) -> QueuedJob {
    QueuedJob {
        id,
        run_id: 1,
        repo: "octo/app".into(),
        name: format!("job {id}"),
        labels: labels.iter().map(|s| s.to_string()).collect(),
        created_at: T0 + id,
    }
}

/// A coordinator on 127.0.0.1 with the given hosts' tokens and one scripted target
/// `ct` (`octo/app` on the default API).
pub fn coordinator(hosts: &[&str], ttl_secs: u64) -> (ServerHandle, Queue) {
    let (h, q, _) = coordinator_with(hosts, ttl_secs, |_| {});
    (h, q)
}

/// [`coordinator`], with its options changed by `tune` first, and its token book.
pub fn coordinator_with(
    hosts: &[&str],
    ttl_secs: u64,
    tune: impl FnOnce(&mut ServeOptions),
) -> (ServerHandle, Queue, Arc<Tokens>) {
    let jobs: Queue = Arc::new(Mutex::new(Vec::new()));
    let src = Scripted {
        target: CoordTarget {
            name: "ct".into(),
            scope: "octo/app".into(),
            api_url: "https://api.github.com".into(),
        },
        jobs: jobs.clone(),
    };
    let mut opts = ServeOptions::new("127.0.0.1:0".parse().unwrap());
    opts.placement = PlacementConfig {
        ttl_secs,
        refusal_memory_ms: 60_000,
        orphan_grace_ms: 60_000,
        away_grace_ms: 5_000,
        reconcile_interval_secs: None,
    };
    opts.tick = Duration::from_millis(20);
    opts.ping_interval = Duration::from_millis(500);
    opts.log = Arc::new(|_| {});
    tune(&mut opts);
    let book = tokens(hosts);
    let h = serve(opts, book.clone(), vec![Box::new(src)]).unwrap();
    (h, jobs, book)
}

pub fn hello(name: &str, version: u32, capacity: u32) -> Hello {
    Hello::fixture(
        &format!("{name:0>16}"),
        name,
        version,
        capacity,
        &["self-hosted", "linux", "rm-pool-linux"],
    )
}

/// A host played by the test: a raw WebSocket client.
pub struct ScriptedHost {
    pub ws: WebSocket<TcpStream>,
}

// Short-lived test values: boxing the socket would only add noise.
#[allow(clippy::large_enum_variant)]
pub enum Connect {
    Ok(ScriptedHost),
    Refused(u16),
}

pub fn dial(addr: std::net::SocketAddr, token: Option<&str>) -> Connect {
    let mut req = format!("ws://{addr}/").into_client_request().unwrap();
    if let Some(t) = token {
        req.headers_mut()
            .insert("authorization", format!("Bearer {t}").parse().unwrap());
    }
    let tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    match tungstenite::client::client(req, tcp) {
        Ok((ws, _)) => {
            ws.get_ref()
                .set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            Connect::Ok(ScriptedHost { ws })
        }
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r))) => {
            Connect::Refused(r.status().as_u16())
        }
        Err(e) => panic!("handshake: {e}"),
    }
}

impl ScriptedHost {
    pub fn connect(
        addr: std::net::SocketAddr,
        name: &str,
        version: u32,
        capacity: u32,
    ) -> ScriptedHost {
        let Connect::Ok(mut h) = dial(addr, Some(&token_of(name))) else {
            panic!("{name} refused")
        };
        h.send(&HostMsg::Hello(hello(name, version, capacity)));
        match h.next(5) {
            Some(CoordMsg::HelloAck(_)) => h,
            other => panic!("expected hello_ack, got {other:?}"),
        }
    }

    pub fn send(&mut self, m: &HostMsg) {
        self.ws.send(Message::text(m.encode())).unwrap();
    }

    pub fn send_raw(&mut self, text: String) {
        self.ws.send(Message::text(text)).unwrap();
    }

    /// The next coordinator frame within `secs`, or `None` (timeout or closed).
    pub fn next(&mut self, secs: u64) -> Option<CoordMsg> {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            match self.ws.read() {
                Ok(Message::Text(t)) => return Some(CoordMsg::decode(t.as_str()).unwrap()),
                Ok(_) => {}
                Err(e) if timed_out(&e) => {}
                Err(_) => return None,
            }
        }
        None
    }

    /// Frames arriving within `ms` (none expected: proves a quiet connection).
    pub fn quiet_for(&mut self, ms: u64) -> Vec<CoordMsg> {
        let end = Instant::now() + Duration::from_millis(ms);
        let mut out = Vec::new();
        while Instant::now() < end {
            match self.ws.read() {
                Ok(Message::Text(t)) => out.push(CoordMsg::decode(t.as_str()).unwrap()),
                Ok(_) => {}
                Err(tungstenite::Error::Io(_)) => {}
                Err(_) => break,
            }
        }
        out
    }

    pub fn launch(&mut self, secs: u64) -> LaunchFrame {
        match self.next(secs) {
            Some(CoordMsg::Launch(l)) => l,
            other => panic!("expected a launch, got {other:?}"),
        }
    }

    /// The close frame the coordinator sends within `secs` (frames before it are
    /// skipped); `None` when it closed without one, or did not close.
    pub fn close_frame(&mut self, secs: u64) -> Option<tungstenite::protocol::CloseFrame> {
        self.closing(secs).flatten()
    }

    /// Whether the coordinator closed the connection within `secs`.
    pub fn closed_within(&mut self, secs: u64) -> bool {
        self.closing(secs).is_some()
    }

    /// How the connection ended within `secs`: `Some` with the close frame, if one
    /// came (any other end of the connection counts too); `None` if it did not end.
    fn closing(&mut self, secs: u64) -> Option<Option<tungstenite::protocol::CloseFrame>> {
        let end = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < end {
            match self.ws.read() {
                Ok(Message::Close(f)) => return Some(f),
                Ok(_) => {}
                Err(e) if timed_out(&e) => {}
                Err(_) => return Some(None),
            }
        }
        None
    }
}

/// Whether a read only ran into the socket's read timeout (nothing arrived yet).
fn timed_out(e: &tungstenite::Error) -> bool {
    matches!(
        e,
        tungstenite::Error::Io(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            )
    )
}
