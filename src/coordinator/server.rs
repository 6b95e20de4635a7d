//! `coordinator serve`: the WebSocket server. An acceptor thread hands each
//! connection to its own thread, which authenticates the bearer token during the
//! handshake (401 before any frame is read). Until then the connection is in the
//! [`Gate`]: one deadline for the whole handshake, and caps on unauthenticated
//! connections per source and in total that never cost an authenticated host its
//! place (hosts are capped apart). An authenticated connection then pumps frames: host
//! frames go to the placer thread as events, its launches and cancels come back
//! through the connection's outbox and waker. The placer owns the pure [`Placement`],
//! one demand thread per target feeds it queue snapshots (and the owners each read
//! found, which the placer relays to the hosts whose runners they name), and it writes
//! the live view to the coordinator's store for `coordinator status|hosts|leases`.
//!
//! Here: the options, the handle, `serve` and the acceptor. One connection's life is
//! `connection`, the placer thread `placer`.

mod connection;
mod placer;
mod usage;

use connection::connection;
use placer::placer;

use super::auth::TokenBook;
use super::demand::DemandSource;
use super::gate::{Gate, GateLimits};
use super::placement::{ConnId, Placement, PlacementConfig, Taken};
use super::protocol::{CoordMsg, HostMsg};
use super::ws::{self, LogFn, Throttle, Waker};
use crate::domain::QueuedJob;
use crate::domain::job_owner::JobOwner;
use crate::timefmt::{Millis, now_millis};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, select, tick, unbounded};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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
        /// Whose job each runner took, as the read saw it (`owner_relay`).
        owners: Vec<(String, JobOwner)>,
        /// When the read began: a job held since after it stays held.
        read_at: Millis,
    },
    /// The target's credential is held until then (its reads met a `retry-after`).
    Held {
        target: String,
        until: Millis,
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
    let mut placement = Placement::new(opts.placement.clone(), targets, lease_key()?);
    for s in &sources {
        placement.set_jit_points_limit(&s.target().name, s.jit_points_limit());
    }
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
                read_demand(src.as_mut(), &ev, &stop, &log);
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

/// A demand thread's loop: reads its source's queue every interval and sends it to the
/// placer, with the credential's hold when the source met one, until stopped.
fn read_demand(
    src: &mut dyn DemandSource,
    ev: &crossbeam_channel::Sender<Event>,
    stop: &Receiver<()>,
    log: &LogFn,
) {
    loop {
        let read_at = now_millis();
        match src.queued() {
            Ok(jobs) => {
                let target = src.target().name.clone();
                let taken = src.taken();
                let owners = src.owners();
                if ev
                    .send(Event::Queue {
                        target,
                        jobs,
                        taken,
                        owners,
                        read_at,
                    })
                    .is_err()
                {
                    return;
                }
            }
            Err(e) => log(&format!("demand: {e}")),
        }
        let until = src.held_until();
        if until > now_millis() {
            let target = src.target().name.clone();
            if ev.send(Event::Held { target, until }).is_err() {
                return;
            }
        }
        select! {
            recv(stop) -> _ => return,
            default(src.interval()) => {}
        }
    }
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
                    "{peer}: closed {} to make room (at most {} per source, {} in all)",
                    crate::units::count(closed as u64, "unauthenticated connection"),
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
