//! The host side of the coordinator link, for the daemon: one named thread holding a
//! blocking WebSocket (`ws://` or `wss://`) to the coordinator. It says `hello`,
//! hands each `launch` to a [`LaunchHandler`] (the daemon's launch book) and answers
//! `launch_ack`, passes `cancel_launch` and `owners` on, and sends the daemon's [`Report`]s, each
//! attempt's start and finish at most once. A coordinator that takes usage rows
//! (`hello_ack`'s `usage_after`) gets the roll-up rows changed since, a bounded batch
//! in each `status` frame. A lost link calls `link_lost` and is redialled with
//! jittered backoff that shutdown interrupts.

use super::protocol::{
    AttemptFinished, AttemptStarted, CoordMsg, Hello, HostMsg, LaunchAck, MAX_USAGE_ROWS,
    OwnerReport, Status, UsageReport, VERSION,
};
use super::ws::{self, LogFn, Stream, WakeRx, Waker};
use crate::backoff::{Backoff, Jitter};
use crate::reconcile::launch_book::{Accepted, Launch, Refusal};
use crate::secret::Secret;
use crossbeam_channel::{Receiver, Sender, select};
use rustls::pki_types::ServerName;
use rustls::{ClientConnection, StreamOwned};
use std::collections::{HashSet, VecDeque};
use std::io;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use tungstenite::client::IntoClientRequest;
use tungstenite::http::HeaderValue;
use tungstenite::{Message, WebSocket};

/// What the daemon does with the coordinator's instructions. Called from the link
/// thread; the daemon implements it around its mutex-guarded launch book.
pub trait LaunchHandler: Send + Sync {
    /// Accept or refuse a launch (`LaunchBook::offer` with the pass's view and `now`).
    fn offer(&self, launch: &Launch) -> Result<Accepted, Refusal>;
    /// The coordinator cancelled a lease (`LaunchBook::cancel`).
    fn cancel(&self, lease_id: &str);
    /// `hello_ack` arrived: these of the host's targets are covered (empty for an
    /// older coordinator: nothing is directed).
    fn link_up(&self, covered: &[String]);
    /// The link went down after it was up (`LaunchBook::link_lost`; the target
    /// modes' link is `Down { since: now }`).
    fn link_lost(&self);
    /// Why the link is not up: a session that ended (after `link_lost` when it was
    /// up) or a dial that failed. For the daemon's record of the link, which `status`
    /// and `top` show.
    fn link_error(&self, _why: &str) {}
    /// The host's usage roll-up rows whose sequence number is past `after`, lowest
    /// first, at most `limit`, each with its number (none unless the daemon keeps a
    /// roll-up).
    fn usage_after(&self, _after: i64, _limit: usize) -> Vec<(i64, UsageReport)> {
        Vec::new()
    }
    /// Whose job some of the host's runners took, from the coordinator's queue read
    /// (an `owners` frame; sent only when the `hello` names the `owners` feature).
    fn owners(&self, _owners: Vec<OwnerReport>) {}
}

/// What the daemon tells the coordinator.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    Started(AttemptStarted),
    Finished(AttemptFinished),
    /// Only the latest status waiting to be sent is kept.
    Status(Status),
}

pub struct LinkConfig {
    /// `ws://HOST:PORT[/PATH]` or `wss://...`.
    pub url: String,
    pub token: Secret,
    pub hello: Hello,
    /// Extra CA certificates (PEM) trusted for `wss://`, for a private pool.
    pub ca_file: Option<PathBuf>,
    pub connect_timeout: Duration,
    pub ping_interval: Duration,
    pub backoff_min: Duration,
    pub backoff_max: Duration,
    pub log: LogFn,
}

impl LinkConfig {
    pub fn new(url: impl Into<String>, token: Secret, hello: Hello) -> LinkConfig {
        LinkConfig {
            url: url.into(),
            token,
            hello,
            ca_file: None,
            connect_timeout: Duration::from_secs(10),
            ping_interval: Duration::from_secs(15),
            backoff_min: Duration::from_millis(500),
            backoff_max: Duration::from_secs(30),
            log: ws::stderr_log("coordinator_link"),
        }
    }
}

/// Reports waiting to go out; bounded (oldest dropped first) so a long outage cannot
/// grow it without end.
const MAX_QUEUED: usize = 4096;
/// Attempts remembered as reported (per kind), oldest forgotten first.
const LEDGER: usize = 8192;

struct Shared {
    up: AtomicBool,
    connects: AtomicU64,
    stopping: AtomicBool,
    hello: Mutex<(Hello, bool)>,
    queue: Mutex<VecDeque<Report>>,
    sent: AtomicU64,
}

pub struct LinkHandle {
    shared: Arc<Shared>,
    waker: Waker,
    threads: Vec<JoinHandle<()>>,
}

impl LinkHandle {
    /// Whether `hello_ack` arrived on the current connection.
    pub fn is_up(&self) -> bool {
        self.shared.up.load(Ordering::SeqCst)
    }

    /// Connections made so far (for status and tests).
    pub fn connects(&self) -> u64 {
        self.shared.connects.load(Ordering::SeqCst)
    }

    /// Frames of reports sent so far.
    pub fn reports_sent(&self) -> u64 {
        self.shared.sent.load(Ordering::SeqCst)
    }

    /// The host's targets or pool profiles changed: say hello again with these.
    pub fn update_hello(&self, hello: Hello) {
        *self.shared.hello.lock().unwrap_or_else(|p| p.into_inner()) = (hello, true);
        self.waker.wake();
    }

    /// Waits for the link's threads (after the shutdown channel fired).
    pub fn join(mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Starts the link. It runs until `shutdown` receives or disconnects; `reports`
/// carries the daemon's reports (disconnecting it is fine).
pub fn spawn_link(
    cfg: LinkConfig,
    handler: Arc<dyn LaunchHandler>,
    reports: Receiver<Report>,
    shutdown: Receiver<()>,
) -> io::Result<LinkHandle> {
    let tls = if cfg.url.starts_with("wss://") {
        Some(super::tls::client_config(cfg.ca_file.as_deref()).map_err(io::Error::other)?)
    } else if cfg.url.starts_with("ws://") {
        None
    } else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "coordinator URL must start with ws:// or wss:// (got {:?})",
                cfg.url
            ),
        ));
    };
    let shared = Arc::new(Shared {
        up: AtomicBool::new(false),
        connects: AtomicU64::new(0),
        stopping: AtomicBool::new(false),
        hello: Mutex::new((cfg.hello.clone(), false)),
        queue: Mutex::new(VecDeque::new()),
        sent: AtomicU64::new(0),
    });
    let (waker, wake_rx) = ws::waker()?;
    // The forwarder owns the daemon's channels; dropping `stop_tx` tells the link
    // thread to stop even while it waits out a backoff.
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let fwd = {
        let (shared, waker) = (shared.clone(), waker.try_clone()?);
        std::thread::Builder::new()
            .name("coord-link-reports".into())
            .spawn(move || forward(reports, shutdown, shared, waker, stop_tx))?
    };
    let link = {
        let shared = shared.clone();
        std::thread::Builder::new()
            .name("coord-link".into())
            .spawn(move || run(cfg, tls, handler, shared, wake_rx, stop_rx))?
    };
    Ok(LinkHandle {
        shared,
        waker,
        threads: vec![fwd, link],
    })
}

fn forward(
    reports: Receiver<Report>,
    shutdown: Receiver<()>,
    shared: Arc<Shared>,
    waker: Waker,
    _stop: Sender<()>,
) {
    let mut reports_open = true;
    loop {
        let never = crossbeam_channel::never();
        let r = if reports_open { &reports } else { &never };
        select! {
            recv(shutdown) -> _ => break,
            recv(r) -> rep => match rep {
                Ok(rep) => {
                    let mut q = shared.queue.lock().unwrap_or_else(|p| p.into_inner());
                    if matches!(rep, Report::Status(_)) {
                        q.retain(|x| !matches!(x, Report::Status(_)));
                    }
                    q.push_back(rep);
                    while q.len() > MAX_QUEUED {
                        q.pop_front();
                    }
                    drop(q);
                    waker.wake();
                }
                Err(_) => reports_open = false,
            },
        }
    }
    shared.stopping.store(true, Ordering::SeqCst);
    waker.wake();
}

/// The longest wait before dialling a coordinator that refused or reset the
/// connection: nothing listens there (it is restarting), so asking again is cheap, and
/// a host that waited longer would stay standalone after it came back.
const ABSENT_RETRY_MAX: Duration = Duration::from_secs(5);

/// Full jitter on an exponential backoff: uniform in [min, min * 2^n], capped by
/// `backoff_max`, and by [`ABSENT_RETRY_MAX`] when the coordinator was `absent`.
fn backoff(cfg: &LinkConfig, n: u32, absent: bool, jitter: f64) -> Duration {
    let max = if absent {
        cfg.backoff_max.min(ABSENT_RETRY_MAX)
    } else {
        cfg.backoff_max
    };
    Backoff::new(cfg.backoff_min, max).full(n, jitter)
}

fn run(
    cfg: LinkConfig,
    tls: Option<Arc<rustls::ClientConfig>>,
    handler: Arc<dyn LaunchHandler>,
    shared: Arc<Shared>,
    wake_rx: WakeRx,
    stop: Receiver<()>,
) {
    let mut ledger = Ledger::default();
    let mut failures = 0u32;
    let mut jitter = Jitter::from_clock();
    while !shared.stopping.load(Ordering::SeqCst) {
        let mut absent = false;
        match connect(&cfg, tls.as_ref()) {
            Ok(mut socket) => {
                shared.connects.fetch_add(1, Ordering::SeqCst);
                let mut s = Session {
                    cfg: &cfg,
                    handler: handler.as_ref(),
                    shared: &shared,
                    ledger: &mut ledger,
                    was_up: false,
                    usage_after: None,
                    unknown: ws::Throttle::new(
                        super::server::UNKNOWN_FRAME_LINES,
                        Duration::from_secs(60),
                    ),
                };
                let why = s.run(&mut socket, &wake_rx);
                let was_up = s.was_up;
                shared.up.store(false, Ordering::SeqCst);
                if was_up {
                    failures = 0;
                    handler.link_lost();
                }
                if !shared.stopping.load(Ordering::SeqCst) {
                    (cfg.log)(&format!("link to {} lost: {why}", cfg.url));
                    handler.link_error(&why);
                }
            }
            Err(Dial { why, absent: gone }) => {
                absent = gone;
                // An absent coordinator is dialled every few seconds: say so at
                // first, then about once a minute.
                if !gone || failures < 3 || failures.is_multiple_of(12) {
                    (cfg.log)(&format!("cannot connect to {}: {why}", cfg.url));
                }
                handler.link_error(&format!("cannot connect: {why}"));
            }
        }
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        let wait = backoff(&cfg, failures, absent, jitter.draw());
        failures = failures.saturating_add(1);
        select! {
            recv(stop) -> _ => break,
            default(wait) => {}
        }
    }
}

/// Why a dial failed, and whether nothing was there to answer (the connection was
/// refused, reset or aborted before the handshake): the coordinator is away.
struct Dial {
    why: String,
    absent: bool,
}

impl From<String> for Dial {
    fn from(why: String) -> Dial {
        Dial { why, absent: false }
    }
}

impl From<&str> for Dial {
    fn from(why: &str) -> Dial {
        Dial::from(why.to_string())
    }
}

fn connect(
    cfg: &LinkConfig,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<WebSocket<Stream>, Dial> {
    let mut req = cfg
        .url
        .as_str()
        .into_client_request()
        .map_err(|e| format!("bad coordinator URL: {e}"))?;
    let mut auth = HeaderValue::from_str(&format!("Bearer {}", cfg.token.expose().trim()))
        .map_err(|_| "the coordinator token has characters a header cannot carry".to_string())?;
    auth.set_sensitive(true);
    req.headers_mut().insert("authorization", auth);
    let host = req.uri().host().ok_or("no host in the URL")?.to_string();
    let host = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let port = req
        .uri()
        .port_u16()
        .unwrap_or(if tls.is_some() { 443 } else { 80 });
    let addrs: Vec<_> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| format!("resolving {host}: {e}"))?
        .collect();
    let mut last = Dial::from("no address");
    let mut tcp = None;
    for a in addrs {
        match TcpStream::connect_timeout(&a, cfg.connect_timeout) {
            Ok(s) => {
                tcp = Some(s);
                break;
            }
            Err(e) => {
                last = Dial {
                    why: format!("{a}: {e}"),
                    absent: matches!(
                        e.kind(),
                        std::io::ErrorKind::ConnectionRefused
                            | std::io::ErrorKind::ConnectionReset
                            | std::io::ErrorKind::ConnectionAborted
                    ),
                }
            }
        }
    }
    let tcp = tcp.ok_or(last)?;
    tcp.set_read_timeout(Some(cfg.connect_timeout))
        .and_then(|_| tcp.set_write_timeout(Some(cfg.connect_timeout)))
        .and_then(|_| tcp.set_nodelay(true))
        .map_err(|e| e.to_string())?;
    let stream = match tls {
        None => Stream::Plain(tcp),
        Some(c) => {
            let name = ServerName::try_from(host.clone()).map_err(|e| format!("{host}: {e}"))?;
            let conn = ClientConnection::new(c.clone(), name).map_err(|e| e.to_string())?;
            Stream::ClientTls(Box::new(StreamOwned::new(conn, tcp)))
        }
    };
    match tungstenite::client::client_with_config(req, stream, Some(ws::ws_config())) {
        Ok((s, _)) => Ok(s),
        Err(tungstenite::HandshakeError::Failure(tungstenite::Error::Http(r)))
            if r.status() == 401 =>
        {
            Err(
                "the coordinator refused this host's token (401); check coordinator_token_file"
                    .into(),
            )
        }
        Err(e) => Err(format!("handshake: {e}").into()),
    }
}

impl ws::Peer for Session<'_> {
    fn stop(&mut self, socket: &mut WebSocket<Stream>) -> Option<String> {
        if !self.shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let _ = socket.close(None);
        let _ = socket.flush();
        Some("stopping".into())
    }

    fn receive(&mut self, socket: &mut WebSocket<Stream>, m: Message) -> Result<(), String> {
        self.frame(socket, m)
    }

    /// A fresh `hello` when the daemon asked for one, then the reports once the
    /// coordinator has answered the first.
    fn send_pending(&mut self, socket: &mut WebSocket<Stream>) -> Result<(), String> {
        if self
            .shared
            .hello
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .1
        {
            self.hello(socket)?;
        }
        if self.was_up {
            self.drain_reports(socket)?;
        }
        Ok(())
    }
}

/// Attempts already reported, so a report is sent at most once per kind.
#[derive(Default)]
struct Ledger {
    seen: HashSet<(bool, String)>,
    order: VecDeque<(bool, String)>,
}

impl Ledger {
    fn key(r: &Report) -> Option<(bool, String)> {
        match r {
            Report::Started(s) => Some((true, s.runner_name.clone())),
            Report::Finished(f) => Some((false, f.runner_name.clone())),
            Report::Status(_) => None,
        }
    }

    fn contains(&self, r: &Report) -> bool {
        Self::key(r).is_some_and(|k| self.seen.contains(&k))
    }

    fn record(&mut self, r: &Report) {
        if let Some(k) = Self::key(r)
            && self.seen.insert(k.clone())
        {
            self.order.push_back(k);
            while self.order.len() > LEDGER {
                if let Some(old) = self.order.pop_front() {
                    self.seen.remove(&old);
                }
            }
        }
    }
}

struct Session<'a> {
    cfg: &'a LinkConfig,
    handler: &'a dyn LaunchHandler,
    shared: &'a Shared,
    ledger: &'a mut Ledger,
    was_up: bool,
    /// Where the usage rows this coordinator takes resume; `None` when it takes none
    /// (an older coordinator, or one without a store).
    usage_after: Option<i64>,
    /// Lines about skipped frames, so many a minute (as the coordinator does).
    unknown: ws::Throttle,
}

impl Session<'_> {
    fn send(&self, socket: &mut WebSocket<Stream>, m: &HostMsg) -> Result<(), String> {
        socket
            .send(Message::text(m.encode()))
            .map_err(|e| format!("send: {e}"))
    }

    fn hello(&self, socket: &mut WebSocket<Stream>) -> Result<(), String> {
        let mut h = {
            let mut g = self.shared.hello.lock().unwrap_or_else(|p| p.into_inner());
            g.1 = false;
            g.0.clone()
        };
        h.version = VERSION;
        self.send(socket, &HostMsg::Hello(h))
    }

    fn run(&mut self, socket: &mut WebSocket<Stream>, wake: &WakeRx) -> String {
        if let Err(e) = self.hello(socket) {
            return e;
        }
        ws::pump(socket, wake, self.cfg.ping_interval, self)
    }

    fn frame(&mut self, socket: &mut WebSocket<Stream>, m: Message) -> Result<(), String> {
        let text = match m {
            Message::Text(t) => t,
            Message::Binary(_) => return Err("the coordinator sent a binary frame".into()),
            Message::Close(f) => {
                // Its code and reason say why (stopping, host removed, a version it
                // does not speak); the reason is the peer's text, so it is escaped.
                return Err(match f {
                    Some(f) => {
                        let mut reason = f.reason.as_str().chars().take(123).collect();
                        super::protocol::escape_controls(&mut reason);
                        format!(
                            "closed by the coordinator ({}): {reason}",
                            u16::from(f.code)
                        )
                    }
                    None => "closed by the coordinator".into(),
                });
            }
            _ => return Ok(()),
        };
        match CoordMsg::decode(text.as_str()) {
            Ok(CoordMsg::HelloAck(a)) => {
                // A coordinator answering a version this build does not speak is left,
                // with a close frame and an error naming both versions.
                if let Err(why) = super::protocol::host_accepts(a.version) {
                    let _ = socket.close(Some(tungstenite::protocol::CloseFrame {
                        code: tungstenite::protocol::frame::coding::CloseCode::Protocol,
                        reason: "protocol version not supported".into(),
                    }));
                    let _ = socket.flush();
                    return Err(why);
                }
                // An older coordinator directs nothing: run as if no target is covered.
                let covered = if a.version >= VERSION {
                    a.covered
                } else {
                    Vec::new()
                };
                self.handler.link_up(&covered);
                self.usage_after = a.usage_after;
                self.was_up = true;
                self.shared.up.store(true, Ordering::SeqCst);
                Ok(())
            }
            Ok(CoordMsg::Launch(l)) => {
                let ack = if self.was_up {
                    self.handler.offer(&l.to_launch())
                } else {
                    Err(Refusal::NotCoordinated)
                };
                let ack = LaunchAck {
                    lease_id: l.lease_id,
                    accepted: ack.is_ok(),
                    reason: ack.err().map(|r| r.as_str().to_string()),
                };
                self.send(socket, &HostMsg::LaunchAck(ack))
            }
            Ok(CoordMsg::CancelLaunch { lease_id }) => {
                self.handler.cancel(&lease_id);
                Ok(())
            }
            Ok(CoordMsg::Owners(o)) => {
                self.handler.owners(o.owners);
                Ok(())
            }
            Err(e) if e.is_skippable() => {
                self.unknown.log(&self.cfg.log, &e.to_string());
                Ok(())
            }
            Err(e) => {
                let _ = socket.close(None);
                Err(e.to_string())
            }
        }
    }

    /// The status with the next batch of usage rows, when the coordinator takes them.
    fn with_usage(&self, mut s: Status) -> Status {
        if let Some(after) = self.usage_after {
            s.pack_usage(self.handler.usage_after(after, MAX_USAGE_ROWS));
        }
        s
    }

    fn drain_reports(&mut self, socket: &mut WebSocket<Stream>) -> Result<(), String> {
        loop {
            let Some(r) = self
                .shared
                .queue
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
            else {
                return Ok(());
            };
            if self.ledger.contains(&r) {
                continue;
            }
            let msg = match &r {
                Report::Started(s) => HostMsg::AttemptStarted(s.clone()),
                Report::Finished(f) => HostMsg::AttemptFinished(f.clone()),
                Report::Status(s) => HostMsg::Status(self.with_usage(s.clone())),
            };
            // Recorded before the write: a write that fails half way may still have
            // reached the coordinator, and at most once is the promise.
            self.ledger.record(&r);
            self.send(socket, &msg)?;
            self.shared.sent.fetch_add(1, Ordering::SeqCst);
            // Rows resend after a reconnect from where the coordinator says it has them.
            if let HostMsg::Status(Status {
                usage_upto: Some(upto),
                ..
            }) = msg
            {
                self.usage_after = Some(upto);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LinkConfig {
        let hello = Hello {
            targets: Vec::new(),
            profiles: Vec::new(),
            ..Hello::fixture("h-id", "h", 2, 1, &[])
        };
        LinkConfig::new("ws://127.0.0.1:1/", Secret::new("t"), hello)
    }

    /// A coordinator that is away (restarting) is dialled again within about 5 s
    /// however long it has been away; other failures back off up to `backoff_max`.
    #[test]
    fn an_absent_coordinator_is_dialled_again_within_five_seconds() {
        let c = cfg();
        let mut j = Jitter::seeded(3);
        for n in 0..40 {
            let w = backoff(&c, n, true, j.draw());
            assert!(w >= c.backoff_min && w <= ABSENT_RETRY_MAX, "{n}: {w:?}");
        }
        // Full jitter reaches past 5 s for other failures once the exponent allows.
        let longest = (0..200)
            .map(|_| backoff(&c, 10, false, j.draw()))
            .max()
            .unwrap();
        assert!(longest <= c.backoff_max);
        assert!(longest > ABSENT_RETRY_MAX, "{longest:?}");
    }

    #[test]
    fn a_refused_dial_says_the_coordinator_is_absent() {
        // A port nothing listens on, on loopback: refused at once.
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        drop(listener);
        let mut c = cfg();
        c.url = format!("ws://127.0.0.1:{port}/");
        let Err(dial) = connect(&c, None) else {
            panic!("a dial to a closed port connected");
        };
        assert!(dial.absent, "{}", dial.why);
    }
}
