//! A small HTTP/1.1 server on `std::net`: keep-alive, Content-Length bodies, size limits,
//! and raw replies (drop, hang, truncate, garbage) so fault injection controls the socket.
//! The simulated GitHub (`sim`) and the daemon's metrics listener (`metrics::serve`) both
//! serve on it; it knows neither.
//!
//! Our own instead of a crate because a fault injector must be able to misbehave at the
//! byte level, which well-behaved server crates are built to prevent.
//!
//! Slow and silent clients go through the [`gate`] the coordinator uses for its
//! handshakes: a connection waiting for or reading a request (the first, or the next
//! one on a kept-alive connection) has [`REQUEST_DEADLINE`] from its accept or its last
//! response, counted from outside its thread; waiting connections are capped per
//! source and in total, and a newcomer is never turned away: room is made from the
//! source that holds the most. So a flood of half-sent requests cannot keep a
//! well-formed one from being answered.
//!
//! Here: the limits, the [`Server`] (its acceptor and its stop) and the [`Handler`] it
//! serves with. The messages are `message`, one connection's life `connection`, request
//! targets `url`.

mod connection;
pub mod gate;
mod message;
mod url;

pub use message::{Reply, Request, Response, http_date, reason};
pub use url::{percent_decode, percent_encode, split_target};

use connection::serve_connection;
use gate::{ConnId, Gate, GateLimits};

use std::collections::HashMap;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Largest request head (request line and headers) accepted.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Largest request body accepted.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Connections served at once; beyond this a connection gets 503 and is closed. Only
/// connections past the gate (a request being handled) can fill it: waiting ones are
/// capped lower, by [`MAX_WAITING`].
pub const MAX_CONNECTIONS: usize = 512;
/// Connections waiting for or reading a request at once, from every source.
pub const MAX_WAITING: usize = 256;
/// Connections waiting for or reading a request at once from one source address.
pub const MAX_WAITING_PER_SOURCE: usize = 128;
/// The wait for a request and the reading of its head and body must end within this,
/// counted from the accept or from the end of the previous response (so it is also the
/// keep-alive idle timeout).
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(10);

/// The gate's limits a [`Server`] runs with unless told otherwise.
pub fn default_limits() -> GateLimits {
    GateLimits {
        max_unauthenticated: MAX_WAITING,
        max_per_source: MAX_WAITING_PER_SOURCE,
        handshake: REQUEST_DEADLINE,
    }
}

/// Serves requests. Called on the connection's own thread; it may block (long polls, the
/// sim's latency) without holding up any other connection.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Reply;

    /// Asked once per connection, on its own thread, before its first request is
    /// read: `Some(response)` refuses the connection, answering every request on it
    /// with `response` and closing it. `peer` is the client's address, `local` ours.
    fn refuse(&self, peer: std::net::SocketAddr, local: std::net::SocketAddr) -> Option<Response> {
        let _ = (peer, local);
        None
    }
}

/// A shutdown flag that blocked handlers (hangs, long polls) can wait on.
#[derive(Default)]
pub struct Stopper {
    stopped: Mutex<bool>,
    cond: Condvar,
}

impl Stopper {
    pub fn stop(&self) {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cond.notify_all();
    }

    pub fn is_stopped(&self) -> bool {
        *self.stopped.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits up to `timeout`; true when the server is stopping.
    pub fn wait(&self, timeout: Duration) -> bool {
        let guard = self.stopped.lock().unwrap_or_else(|e| e.into_inner());
        let (guard, _) = self
            .cond
            .wait_timeout_while(guard, timeout, |s| !*s)
            .unwrap_or_else(|e| e.into_inner());
        *guard
    }
}

struct Shared {
    stopper: Arc<Stopper>,
    gate: Gate,
    /// Every connection, shared with its thread, to shut it down at the server's stop.
    open: Mutex<HashMap<u64, Arc<TcpStream>>>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    next_conn: AtomicU64,
    closing: AtomicBool,
}

/// A running server. `shutdown` (or drop) closes every connection and joins every thread.
pub struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    listener: Option<JoinHandle<()>>,
    reaper: Option<JoinHandle<()>>,
}

impl Server {
    /// Binds `addr` and serves with `handler` on a listener thread plus one thread per
    /// connection (at most [`MAX_CONNECTIONS`]), with [`default_limits`].
    pub fn start(
        addr: SocketAddr,
        handler: Arc<dyn Handler>,
        stopper: Arc<Stopper>,
    ) -> io::Result<Server> {
        Server::start_with(addr, handler, stopper, default_limits())
    }

    /// [`Server::start`] with the gate's limits given.
    pub fn start_with(
        addr: SocketAddr,
        handler: Arc<dyn Handler>,
        stopper: Arc<Stopper>,
        limits: GateLimits,
    ) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let shared = Arc::new(Shared {
            stopper,
            gate: Gate::new(limits),
            open: Mutex::new(HashMap::new()),
            threads: Mutex::new(Vec::new()),
            next_conn: AtomicU64::new(0),
            closing: AtomicBool::new(false),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name("http-listen".into())
            .spawn(move || accept_loop(listener, handler, s))?;
        let s = shared.clone();
        let every =
            (limits.handshake / 10).clamp(Duration::from_millis(10), Duration::from_millis(500));
        let reaper = std::thread::Builder::new()
            .name("http-gate".into())
            .spawn(move || {
                while !s.stopper.wait(every) {
                    s.gate.expire(Instant::now());
                }
            });
        let mut server = Server {
            addr,
            shared,
            listener: Some(thread),
            reaper: None,
        };
        // On a failed spawn, `server` drops here and stops the listener.
        server.reaper = Some(reaper?);
        Ok(server)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections waiting for or reading a request now.
    pub fn waiting(&self) -> usize {
        self.shared.gate.pending()
    }

    pub fn shutdown(&mut self) {
        let Some(listener) = self.listener.take() else {
            return;
        };
        self.shared.closing.store(true, Ordering::SeqCst);
        self.shared.stopper.stop();
        // Wake the blocking accept() with a connection of our own.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        let _ = listener.join();
        if let Some(reaper) = self.reaper.take() {
            let _ = reaper.join();
        }
        for (_, s) in self
            .shared
            .open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
        let threads: Vec<_> = self
            .shared
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..)
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// How long to wait before accepting again after `failed` accept errors in a row, or
/// None to go on at once. A connection its client reset before it was accepted
/// (ECONNABORTED) or a signal (EINTR) says nothing about the next one; anything else
/// (EMFILE or ENFILE with the descriptors used up, ENOBUFS, ENOMEM) fails again at
/// once while it lasts, with the pending connection still queued: retrying at once
/// would spin a core, so the wait doubles from 10 ms to 1 s.
fn accept_backoff(e: &io::Error, failed: u32) -> Option<Duration> {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted | io::ErrorKind::Interrupted
    ) {
        return None;
    }
    Some(
        Duration::from_millis(10u64 << failed.saturating_sub(1).min(7)).min(Duration::from_secs(1)),
    )
}

fn accept_loop(listener: TcpListener, handler: Arc<dyn Handler>, shared: Arc<Shared>) {
    let mut failed = 0u32;
    for stream in listener.incoming() {
        if shared.closing.load(Ordering::SeqCst) {
            break;
        }
        let stream = match stream {
            Ok(s) => {
                failed = 0;
                s
            }
            Err(e) => {
                failed = failed.saturating_add(1);
                if let Some(wait) = accept_backoff(&e, failed)
                    && shared.stopper.wait(wait)
                {
                    break;
                }
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let id: ConnId = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        let source = stream
            .peer_addr()
            .map(|a| a.ip())
            .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        let stream = {
            let mut open = shared.open.lock().unwrap_or_else(|e| e.into_inner());
            if open.len() >= MAX_CONNECTIONS {
                drop(open);
                let mut s = stream;
                let _ = s.write_all(&Response::new(503).head_bytes(0));
                continue;
            }
            // Without its clone the connection could not be held to its deadline:
            // refuse it. Two descriptors a connection in all, so 256 waiting fit in
            // the usual limit of 1024.
            let Ok(for_gate) = stream.try_clone() else {
                continue;
            };
            let stream = Arc::new(stream);
            open.insert(id, stream.clone());
            // Never turned away: room is made from the source holding the most.
            shared.gate.admit(id, source, for_gate, Instant::now());
            stream
        };
        let (h, s) = (handler.clone(), shared.clone());
        let spawned = std::thread::Builder::new()
            .name("http-conn".into())
            .spawn(move || {
                serve_connection(stream, &*h, &s, id, source);
                s.gate.left(id);
                s.open.lock().unwrap_or_else(|e| e.into_inner()).remove(&id);
            });
        match spawned {
            Ok(t) => {
                let mut threads = shared.threads.lock().unwrap_or_else(|e| e.into_inner());
                // Reap finished connection threads so the list stays small on long runs.
                threads.retain(|t| !t.is_finished());
                threads.push(t);
            }
            Err(_) => {
                // No thread to serve it: close it and forget it.
                shared.gate.left(id);
                if let Some(s) = shared
                    .open
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .remove(&id)
                {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests;
