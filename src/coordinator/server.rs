//! `coordinator serve`: the WebSocket server. An acceptor thread hands each
//! connection to its own thread, which authenticates the bearer token during the
//! handshake (401 before any frame is read). Until then the connection is in the
//! [`Gate`]: one deadline for the whole handshake, and caps on unauthenticated
//! connections per source and in total that never cost an authenticated host its
//! place (hosts are capped apart). An authenticated connection then pumps frames: host
//! frames go to the placer thread as events, its launches and cancels come back
//! through the connection's outbox and waker. The placer owns the pure [`Placement`],
//! one demand thread per target feeds it queue snapshots, and it writes the live view
//! to the coordinator's store for `coordinator status|hosts|leases`.

use super::auth::{self, TokenBook, bearer};
use super::demand::DemandSource;
use super::gate::{Gate, GateLimits};
use super::placement::{Action, CloseWhy, ConnId, Placement, PlacementConfig, Taken};
use super::protocol::{CoordMsg, FrameError, HostMsg};
use super::ws::{self, LogFn, Stream, Throttle, Waker};
use crate::domain::QueuedJob;
use crate::store::{CoordHostRow, SqliteStore};
use crate::timefmt::{Millis, now_millis};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, select, tick, unbounded};
use rustls::{ServerConnection, StreamOwned};
use std::collections::BTreeMap;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::http;
use tungstenite::{Message, WebSocket};

pub struct ServeOptions {
    pub listen: SocketAddr,
    /// TLS when given (`wss://`).
    pub tls: Option<Arc<rustls::ServerConfig>>,
    pub placement: PlacementConfig,
    /// Authenticated host connections at once; a host beyond them gets 503.
    pub max_connections: usize,
    /// Connections still in their handshake, at once, from every source.
    pub max_unauthenticated: usize,
    /// Connections still in their handshake, at once, from one source address.
    pub max_unauthenticated_per_source: usize,
    pub ping_interval: Duration,
    /// The whole handshake (TLS, the HTTP upgrade, the token) must finish within this,
    /// however the bytes trickle in.
    pub handshake_timeout: Duration,
    /// How often leases are checked for expiry and the view is written.
    pub tick: Duration,
    /// The coordinator's state directory, for the live view (`None`: keep no view).
    pub store_dir: Option<PathBuf>,
    pub log: LogFn,
}

impl ServeOptions {
    pub fn new(listen: SocketAddr) -> ServeOptions {
        ServeOptions {
            listen,
            tls: None,
            placement: PlacementConfig::default(),
            max_connections: 256,
            max_unauthenticated: 64,
            max_unauthenticated_per_source: 8,
            ping_interval: Duration::from_secs(15),
            handshake_timeout: Duration::from_secs(10),
            tick: Duration::from_secs(1),
            store_dir: None,
            log: ws::stderr_log("coordinator"),
        }
    }
}

enum Event {
    Open {
        conn: ConnId,
        name: String,
        /// The hash of the token it authenticated with, to cut it off once removed.
        token: [u8; 32],
        out: Sender<Out>,
        waker: Waker,
    },
    Frame {
        conn: ConnId,
        msg: HostMsg,
    },
    Closed {
        conn: ConnId,
    },
    Queue {
        target: String,
        jobs: Vec<QueuedJob>,
        taken: Vec<Taken>,
        /// When the read began: a job held since after it stays held.
        read_at: Millis,
    },
}

/// The placer's end of one connection.
struct ConnOut {
    out: Sender<Out>,
    waker: Waker,
    name: String,
    token: [u8; 32],
}

enum Out {
    Frame(CoordMsg),
    Close(Closing),
}

/// Why the coordinator closes a host's connection: the close frame's code and reason,
/// and the log's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Closing {
    /// The same host connected again on another connection.
    Replaced,
    /// Its token was removed (`coordinator host rm`).
    Removed,
    /// The coordinator is stopping.
    Stopping,
    /// Its `hello` named a protocol version this coordinator does not speak.
    Unsupported(u32),
}

impl Closing {
    fn frame(self) -> tungstenite::protocol::CloseFrame {
        use tungstenite::protocol::frame::coding::CloseCode;
        let (code, reason) = match self {
            Closing::Replaced => (CloseCode::Policy, "replaced by a newer connection".into()),
            Closing::Removed => (CloseCode::Policy, "host removed".into()),
            Closing::Stopping => (CloseCode::Away, "coordinator stopping".into()),
            // 1002: the peer broke the protocol, as RFC 6455 words it.
            Closing::Unsupported(v) => (
                CloseCode::Protocol,
                format!(
                    "protocol version {v} is not supported (this coordinator speaks {}-{})",
                    super::protocol::MIN_VERSION,
                    super::protocol::VERSION
                ),
            ),
        };
        tungstenite::protocol::CloseFrame {
            code,
            reason: reason.into(),
        }
    }
}

/// Lines about skipped (unknown-type) frames logged per connection and minute.
pub const UNKNOWN_FRAME_LINES: u32 = 5;

/// A running coordinator. Dropping it stops and joins every thread.
pub struct ServerHandle {
    addr: SocketAddr,
    placement: Arc<Mutex<Placement>>,
    stop: Option<Sender<()>>,
    stopping: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    gate: Arc<Gate>,
    /// Demand threads, each with a channel that disconnects when it ends: one may sit
    /// in a long poll no signal interrupts, so stopping waits for them only so long.
    demand: Vec<(JoinHandle<()>, Receiver<()>)>,
}

/// How long stopping waits for the demand threads (a scale set long poll is held up to
/// ~50 s by GitHub; its session is ended on stop regardless).
pub const DEMAND_STOP_WAIT: Duration = Duration::from_secs(10);

impl ServerHandle {
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A copy of the placement book as it is now (for status and tests).
    pub fn placement(&self) -> Placement {
        self.placement
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Connections still in their handshake.
    pub fn unauthenticated(&self) -> usize {
        self.gate.pending()
    }

    /// Stops accepting, closes every connection, joins every thread.
    pub fn shutdown(&mut self) {
        self.stopping.store(true, Ordering::SeqCst);
        self.stop.take();
        // Wake the acceptor out of accept(2).
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let deadline = Instant::now() + DEMAND_STOP_WAIT;
        for (t, done) in self.demand.drain(..) {
            let left = deadline.saturating_duration_since(Instant::now());
            match done.recv_timeout(left) {
                // Still polling: left to the process exit.
                Err(RecvTimeoutError::Timeout) => {}
                _ => {
                    let _ = t.join();
                }
            }
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The key this life's lease ids come from (`placement::LeaseIds`): the coordinator's
/// one draw of kernel randomness, fresh at each start. None to be had is an error.
fn lease_key() -> io::Result<[u8; 32]> {
    let mut key = [0u8; 32];
    crate::random::fill(&mut key).map_err(|e| {
        io::Error::other(format!(
            "the kernel gave no random bytes for lease ids: {e}"
        ))
    })?;
    Ok(key)
}

/// Starts the coordinator: binds `opts.listen`, spawns the acceptor, the placer and
/// one demand thread per source.
pub fn serve(
    opts: ServeOptions,
    tokens: Arc<dyn TokenBook>,
    sources: Vec<Box<dyn DemandSource>>,
) -> io::Result<ServerHandle> {
    let listener = TcpListener::bind(opts.listen)?;
    let addr = listener.local_addr()?;
    let targets = sources.iter().map(|s| s.target().clone()).collect();
    let placement = Placement::new(opts.placement.clone(), targets, lease_key()?);
    let placement = Arc::new(Mutex::new(placement));
    let (stop_tx, stop_rx) = crossbeam_channel::bounded::<()>(0);
    let (ev_tx, ev_rx) = unbounded::<Event>();
    let stopping = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    let log = opts.log.clone();
    {
        let (p, stop, log) = (placement.clone(), stop_rx.clone(), log.clone());
        let (tickd, dir, book) = (opts.tick, opts.store_dir.clone(), tokens.clone());
        threads.push(
            std::thread::Builder::new()
                .name("coord-placer".into())
                .spawn(move || placer(p, ev_rx, stop, tickd, dir, book, log))?,
        );
    }
    let mut demand = Vec::new();
    for mut src in sources {
        let (ev, stop, log) = (ev_tx.clone(), stop_rx.clone(), log.clone());
        let (done_tx, done) = crossbeam_channel::bounded::<()>(0);
        let t = std::thread::Builder::new()
            .name(format!("coord-demand-{}", src.target().name))
            .spawn(move || {
                let _done = done_tx;
                loop {
                    let read_at = now_millis();
                    match src.queued() {
                        Ok(jobs) => {
                            let target = src.target().name.clone();
                            let taken = src.taken();
                            if ev
                                .send(Event::Queue {
                                    target,
                                    jobs,
                                    taken,
                                    read_at,
                                })
                                .is_err()
                            {
                                return;
                            }
                        }
                        Err(e) => log(&format!("demand: {e}")),
                    }
                    select! {
                        recv(stop) -> _ => return,
                        default(src.interval()) => {}
                    }
                }
            })?;
        demand.push((t, done));
    }
    let gate = Arc::new(Gate::new(GateLimits {
        max_unauthenticated: opts.max_unauthenticated,
        max_per_source: opts.max_unauthenticated_per_source,
        handshake: opts.handshake_timeout,
    }));
    {
        let (g, stop) = (gate.clone(), stop_rx.clone());
        let every = (opts.handshake_timeout / 10)
            .clamp(Duration::from_millis(10), Duration::from_millis(500));
        threads.push(
            std::thread::Builder::new()
                .name("coord-gate".into())
                .spawn(move || {
                    let t = tick(every);
                    loop {
                        select! {
                            recv(stop) -> _ => return,
                            recv(t) -> _ => { g.expire(Instant::now()); }
                        }
                    }
                })?,
        );
    }
    let ctx = Arc::new(ConnCtx {
        gate: gate.clone(),
        hosts: AtomicUsize::new(0),
        max_hosts: opts.max_connections,
        refusals: Throttle::new(20, Duration::from_secs(60)),
        tokens,
        tls: opts.tls.clone(),
        events: ev_tx,
        stop: stop_rx,
        stopping: stopping.clone(),
        ping: opts.ping_interval,
        handshake: opts.handshake_timeout,
        log,
    });
    threads.push(
        std::thread::Builder::new()
            .name("coord-accept".into())
            .spawn(move || acceptor(listener, ctx))?,
    );
    Ok(ServerHandle {
        addr,
        placement,
        gate,
        stop: Some(stop_tx),
        stopping,
        threads,
        demand,
    })
}

struct ConnCtx {
    gate: Arc<Gate>,
    /// Authenticated connections now, and at most.
    hosts: AtomicUsize,
    max_hosts: usize,
    /// Log lines unauthenticated peers cause (refused handshakes, closed for room).
    refusals: Throttle,
    tokens: Arc<dyn TokenBook>,
    tls: Option<Arc<rustls::ServerConfig>>,
    events: Sender<Event>,
    stop: Receiver<()>,
    stopping: Arc<AtomicBool>,
    ping: Duration,
    handshake: Duration,
    log: LogFn,
}

fn acceptor(listener: TcpListener, ctx: Arc<ConnCtx>) {
    let next = AtomicU64::new(1);
    let mut conns: Vec<JoinHandle<()>> = Vec::new();
    for tcp in listener.incoming() {
        if ctx.stopping.load(Ordering::SeqCst) {
            break;
        }
        let Ok(tcp) = tcp else { continue };
        conns.retain(|h| !h.is_finished());
        let (Ok(peer), Ok(handle)) = (tcp.peer_addr(), tcp.try_clone()) else {
            continue;
        };
        let id = next.fetch_add(1, Ordering::SeqCst);
        let closed = ctx.gate.admit(id, peer.ip(), handle, Instant::now());
        if closed > 0 {
            ctx.refusals.log(
                &ctx.log,
                &format!(
                    "{peer}: closed {closed} unauthenticated connection(s) to make room \
                     (at most {} per source, {} in all)",
                    ctx.gate.limits().max_per_source,
                    ctx.gate.limits().max_unauthenticated
                ),
            );
        }
        let ctx2 = ctx.clone();
        match std::thread::Builder::new()
            .name(format!("coord-conn-{id}"))
            .spawn(move || connection(tcp, id, &ctx2))
        {
            Ok(h) => conns.push(h),
            Err(e) => {
                ctx.gate.left(id);
                (ctx.log)(&format!("cannot start a connection thread: {e}"));
            }
        }
    }
    for h in conns {
        let _ = h.join();
    }
}

fn unauthorized() -> ErrorResponse {
    let mut r = http::Response::new(Some(
        "unauthorized: give Authorization: Bearer <host token>".to_string(),
    ));
    *r.status_mut() = http::StatusCode::UNAUTHORIZED;
    r
}

fn too_many_hosts(max: usize) -> ErrorResponse {
    let mut r = http::Response::new(Some(format!("too many hosts: {max} already connected")));
    *r.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    r
}

/// Counts an authenticated connection while it lives.
struct HostSlot<'a>(&'a AtomicUsize);

impl Drop for HostSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An authenticated host's connection, as the pump drives it: its frames go to the
/// placer as events, and the placer's frames and close come back through `out`.
struct HostPeer<'a> {
    ctx: &'a ConnCtx,
    conn: ConnId,
    name: &'a str,
    out: Receiver<Out>,
    unknown: Throttle,
}

impl ws::Peer for HostPeer<'_> {
    fn stop(&mut self, socket: &mut WebSocket<Stream>) -> Option<String> {
        let ctx = self.ctx;
        if !ctx.stopping.load(Ordering::SeqCst)
            && !matches!(
                ctx.stop.try_recv(),
                Err(crossbeam_channel::TryRecvError::Disconnected)
            )
        {
            return None;
        }
        let _ = socket.close(Some(Closing::Stopping.frame()));
        let _ = socket.flush();
        Some("coordinator stopping".to_string())
    }

    /// A frame that is not one of ours (binary, malformed) closes the connection
    /// with 1008; a type this build does not know is skipped and logged.
    fn receive(&mut self, socket: &mut WebSocket<Stream>, m: Message) -> Result<(), String> {
        let fatal = match m {
            Message::Text(t) => match HostMsg::decode(t.as_str()) {
                Ok(msg) => {
                    let _ = self.ctx.events.send(Event::Frame {
                        conn: self.conn,
                        msg,
                    });
                    return Ok(());
                }
                Err(e) if e.is_skippable() => {
                    let line = format!("host {}: {e}", self.name);
                    self.unknown.log(&self.ctx.log, &line);
                    return Ok(());
                }
                Err(e) => e.to_string(),
            },
            Message::Binary(_) => FrameError::Malformed("binary frame".into()).to_string(),
            _ => return Ok(()),
        };
        let _ = socket.close(Some(tungstenite::protocol::CloseFrame {
            code: tungstenite::protocol::frame::coding::CloseCode::Policy,
            reason: "malformed frame".into(),
        }));
        let _ = socket.flush();
        Err(fatal)
    }

    fn send_pending(&mut self, socket: &mut WebSocket<Stream>) -> Result<(), String> {
        while let Ok(o) = self.out.try_recv() {
            match o {
                Out::Frame(m) => {
                    if let Err(e) = socket.send(Message::text(m.encode())) {
                        return Err(format!("send: {e}"));
                    }
                }
                Out::Close(why) => {
                    let frame = why.frame();
                    let said = frame.reason.to_string();
                    let _ = socket.close(Some(frame));
                    let _ = socket.flush();
                    return Err(said);
                }
            }
        }
        Ok(())
    }
}

/// Takes a connection out of the gate's book when dropped, however its handshake ends.
struct Leave<'a>(&'a Gate, ConnId);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.left(self.1);
    }
}

/// One connection's thread: its stream, the handshake that authenticates a host, and
/// then the host's frames until either side ends.
fn connection(tcp: TcpStream, conn: ConnId, ctx: &ConnCtx) {
    let _leave = Leave(&ctx.gate, conn);
    let peer = tcp
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let Some(stream) = open_stream(tcp, &peer, ctx) else {
        return;
    };
    let Some(host) = handshake(stream, conn, &peer, ctx) else {
        return;
    };
    serve_host(host, conn, &peer, ctx);
}

/// The connection's stream, with the handshake's timeouts, and TLS when the
/// coordinator serves it.
fn open_stream(tcp: TcpStream, peer: &str, ctx: &ConnCtx) -> Option<Stream> {
    let setup = tcp
        .set_read_timeout(Some(ctx.handshake))
        .and_then(|_| tcp.set_write_timeout(Some(ctx.handshake)))
        .and_then(|_| tcp.set_nodelay(true));
    if setup.is_err() {
        return None;
    }
    match &ctx.tls {
        None => Some(Stream::Plain(tcp)),
        Some(cfg) => match ServerConnection::new(cfg.clone()) {
            Ok(c) => Some(Stream::ServerTls(Box::new(StreamOwned::new(c, tcp)))),
            Err(e) => {
                (ctx.log)(&format!("{peer}: TLS: {e}"));
                None
            }
        },
    }
}

/// A host past the handshake: its socket, its token's name and hash, and its place
/// among the authenticated connections, held while it lives.
struct Authenticated<'a> {
    socket: WebSocket<Stream>,
    name: String,
    token: [u8; 32],
    slot: HostSlot<'a>,
}

/// The WebSocket handshake: a known bearer token and room among the hosts, within
/// the gate's deadline. `None` when refused (logged, throttled) or too late.
// tungstenite's handshake callback returns its `ErrorResponse` by value.
#[allow(clippy::result_large_err)]
fn handshake<'a>(
    stream: Stream,
    conn: ConnId,
    peer: &str,
    ctx: &'a ConnCtx,
) -> Option<Authenticated<'a>> {
    let mut who: Option<(String, [u8; 32])> = None;
    let mut slot: Option<HostSlot> = None;
    let callback = |req: &Request, resp: Response| -> Result<Response, ErrorResponse> {
        let token = req
            .headers()
            .get(http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(bearer);
        let found = token.and_then(|t| Some((ctx.tokens.find(&t)?, auth::token_hash(&t))));
        match found {
            Some((name, hash)) => {
                let held = HostSlot(&ctx.hosts);
                if ctx.hosts.fetch_add(1, Ordering::SeqCst) >= ctx.max_hosts {
                    return Err(too_many_hosts(ctx.max_hosts));
                }
                slot = Some(held);
                who = Some((name, hash));
                Ok(resp)
            }
            None => Err(unauthorized()),
        }
    };
    let socket = match tungstenite::accept_hdr_with_config(stream, callback, Some(ws::ws_config()))
    {
        Ok(s) => s,
        Err(e) => {
            ctx.refusals
                .log(&ctx.log, &format!("{peer}: handshake refused: {e}"));
            return None;
        }
    };
    let (Some((name, token)), Some(slot)) = (who, slot) else {
        return None;
    };
    // Out of the gate; unless the deadline (or a newer connection) closed it first.
    if !ctx.gate.passed(conn) {
        ctx.refusals
            .log(&ctx.log, &format!("{peer}: handshake ran out of time"));
        return None;
    }
    Some(Authenticated {
        socket,
        name,
        token,
        slot,
    })
}

/// An authenticated host: announced to the placer, pumped until either side ends, and
/// its end announced.
fn serve_host(host: Authenticated, conn: ConnId, peer: &str, ctx: &ConnCtx) {
    // `_slot` counts the host among the connected until this function returns.
    let Authenticated {
        mut socket,
        name,
        token,
        slot: _slot,
    } = host;
    let (out_tx, out_rx) = unbounded::<Out>();
    let Ok((waker, wake_rx)) = ws::waker() else {
        return;
    };
    let open = Event::Open {
        conn,
        name: name.clone(),
        token,
        out: out_tx,
        waker,
    };
    if ctx.events.send(open).is_err() {
        return;
    }
    (ctx.log)(&format!("host {name} connected from {peer}"));
    // A host may send frames a newer build knows and this one skips; each is logged,
    // but only so many a minute, so a host cannot fill the coordinator's log.
    let mut host = HostPeer {
        ctx,
        conn,
        name: &name,
        out: out_rx,
        unknown: Throttle::new(UNKNOWN_FRAME_LINES, Duration::from_secs(60)),
    };
    let why = ws::pump(&mut socket, &wake_rx, ctx.ping, &mut host);
    (ctx.log)(&format!("host {name} disconnected: {why}"));
    let _ = ctx.events.send(Event::Closed { conn });
}

fn placer(
    placement: Arc<Mutex<Placement>>,
    events: Receiver<Event>,
    stop: Receiver<()>,
    every: Duration,
    dir: Option<PathBuf>,
    tokens: Arc<dyn TokenBook>,
    log: LogFn,
) {
    let store = dir.and_then(|d| match SqliteStore::open(&d) {
        Ok(s) => Some(s),
        Err(e) => {
            log(&format!("no live view: {e}"));
            None
        }
    });
    // Before any event: what the last life placed is taken up, not placed again.
    if let Some(s) = &store {
        match s.coord_jobs() {
            Ok(rows) => {
                let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
                p.restore(&rows, now_millis());
            }
            Err(e) => log(&format!("the last life's jobs are not readable: {e}")),
        }
    }
    let mut outs: BTreeMap<ConnId, ConnOut> = BTreeMap::new();
    let ticker = tick(every);
    let mut dirty = true;
    let mut next_trim = now_millis() + crate::alloc::TRIM_EVERY_MS;
    loop {
        let now = now_millis();
        if now >= next_trim {
            next_trim = now + crate::alloc::TRIM_EVERY_MS;
            crate::alloc::trim();
        }
        let actions = select! {
            recv(stop) -> _ => break,
            recv(ticker) -> _ => {
                if dirty {
                    if let Some(s) = &store {
                        let p = placement.lock().unwrap_or_else(|p| p.into_inner());
                        if let Err(e) = write_view(s, &p, now) {
                            log(&format!("writing the live view: {e}"));
                        }
                    }
                    dirty = false;
                }
                let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
                let mut actions = cut_off_removed(&mut p, &mut outs, tokens.as_ref(), now, &log);
                actions.extend(p.tick(now));
                actions
            }
            recv(events) -> ev => {
                let Ok(ev) = ev else { break };
                dirty = true;
                let mut p = placement.lock().unwrap_or_else(|p| p.into_inner());
                match ev {
                    Event::Open { conn, name, token, out, waker } => {
                        outs.insert(conn, ConnOut { out, waker, name, token });
                        Vec::new()
                    }
                    Event::Closed { conn } => {
                        outs.remove(&conn);
                        p.disconnect(conn, now)
                    }
                    Event::Queue {
                        target,
                        jobs,
                        taken,
                        read_at,
                    } => p.snapshot(&target, jobs, &taken, read_at, now),
                    Event::Frame { conn, msg } => frame(&mut p, &outs, conn, msg, now),
                }
            }
        };
        if !actions.is_empty() {
            dirty = true;
        }
        // Intent first: a lease is in the store before its launch leaves, so a
        // coordinator killed after sending it takes it up again (`Placement::restore`)
        // instead of placing its job a second time.
        let launches = actions
            .iter()
            .any(|a| matches!(a, Action::Send(_, CoordMsg::Launch(_))));
        if launches && let Some(s) = &store {
            let p = placement.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(e) = write_view(s, &p, now) {
                log(&format!("writing the live view: {e}"));
            }
        }
        for a in actions {
            let (conn, out) = match a {
                Action::Send(c, m) => (c, Out::Frame(m)),
                Action::Close(c, CloseWhy::Replaced) => (c, Out::Close(Closing::Replaced)),
                Action::Close(c, CloseWhy::UnsupportedVersion(v)) => {
                    (c, Out::Close(Closing::Unsupported(v)))
                }
            };
            if let Some(c) = outs.get(&conn) {
                let _ = c.out.send(out);
                c.waker.wake();
            }
        }
    }
    for c in outs.values() {
        let _ = c.out.send(Out::Close(Closing::Stopping));
        c.waker.wake();
    }
    if let Some(s) = &store {
        let p = placement.lock().unwrap_or_else(|p| p.into_inner());
        let _ = s.coord_put_view(&[], &p.book_rows(now_millis()));
    }
}

/// Closes the connections whose token is no longer in the book (`coordinator host
/// rm`, or the host added again with a new token): their leases go back to waiting
/// and are placed elsewhere. A book that cannot be read cuts nobody off.
fn cut_off_removed(
    p: &mut Placement,
    outs: &mut BTreeMap<ConnId, ConnOut>,
    tokens: &dyn TokenBook,
    now: Millis,
    log: &LogFn,
) -> Vec<Action> {
    let Some(book) = tokens.hashes() else {
        return Vec::new();
    };
    let gone: Vec<ConnId> = outs
        .iter()
        .filter(|(_, c)| {
            !book
                .iter()
                .any(|(n, h)| *n == c.name && auth::constant_time_eq(h, &c.token))
        })
        .map(|(id, _)| *id)
        .collect();
    let mut actions = Vec::new();
    for id in gone {
        let Some(c) = outs.remove(&id) else { continue };
        log(&format!("host {} removed: closing its connection", c.name));
        let _ = c.out.send(Out::Close(Closing::Removed));
        c.waker.wake();
        actions.extend(p.remove_host(id, now));
    }
    actions
}

fn frame(
    p: &mut Placement,
    outs: &BTreeMap<ConnId, ConnOut>,
    conn: ConnId,
    msg: HostMsg,
    now: Millis,
) -> Vec<Action> {
    match msg {
        HostMsg::Hello(h) => {
            // The name its token was added under, not the one the host claims.
            match outs.get(&conn) {
                Some(c) => p.hello(conn, &c.name, h, now),
                None => Vec::new(),
            }
        }
        HostMsg::LaunchAck(a) => p.ack(conn, a, now),
        HostMsg::AttemptStarted(s) => p.started(conn, s, now),
        HostMsg::AttemptFinished(f) => p.finished(conn, f, now),
        HostMsg::Status(s) => p.status(conn, s, now),
    }
}

fn write_view(s: &SqliteStore, p: &Placement, now: Millis) -> crate::store::Result<()> {
    let hosts: Vec<CoordHostRow> = p
        .hosts()
        .iter()
        .map(|(c, h)| CoordHostRow {
            name: h.name.clone(),
            connected: true,
            version: Some(h.version),
            host_id: Some(h.hello.host.id.clone()),
            os: Some(h.hello.host.os.clone()),
            arch: Some(h.hello.host.arch.clone()),
            capacity: Some(h.hello.host.capacity),
            free: Some(h.free),
            draining: h.draining,
            unfit: h.unfit.iter().cloned().collect(),
            covered: h.covered.keys().cloned().collect(),
            profiles: h.hello.profiles.iter().map(|p| p.name.clone()).collect(),
            open_leases: p.outstanding(*c),
            started: h.started,
            finished: h.finished,
            refusals: h.refusals,
            last_seen_at: Some(now),
            meters: h.meters.clone(),
            ..Default::default()
        })
        .collect();
    s.coord_put_view(&hosts, &p.book_rows(now))
}
