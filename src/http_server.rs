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

pub mod gate;

use gate::{ConnId, Gate, GateLimits};

use std::collections::HashMap;
use std::io::{self, BufRead, BufReader, Read, Write};
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

/// One parsed request.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// The path without the query string, percent-decoding not applied.
    pub path: String,
    pub query: Vec<(String, String)>,
    /// Header names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn query_param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// A complete response.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn new(status: u16) -> Response {
        Response {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }

    pub fn json(status: u16, value: &impl serde::Serialize) -> Response {
        let body = serde_json::to_vec(value).unwrap_or_else(|_| b"{}".to_vec());
        Response::new(status)
            .with_header("content-type", "application/json; charset=utf-8")
            .with_body(body)
    }

    pub fn with_header(mut self, name: &str, value: impl Into<String>) -> Response {
        self.set_header(name, value);
        self
    }

    pub fn with_body(mut self, body: Vec<u8>) -> Response {
        self.body = body;
        self
    }

    pub fn set_header(&mut self, name: &str, value: impl Into<String>) {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.headers.push((name.to_ascii_lowercase(), value.into()));
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The status line, headers and Content-Length, without the body.
    fn head_bytes(&self, content_length: usize) -> Vec<u8> {
        let mut head = format!("HTTP/1.1 {} {}\r\n", self.status, reason(self.status));
        for (k, v) in &self.headers {
            if !k.eq_ignore_ascii_case("content-length") {
                head.push_str(&format!("{k}: {v}\r\n"));
            }
        }
        head.push_str(&format!("content-length: {content_length}\r\n\r\n"));
        head.into_bytes()
    }
}

/// What the handler wants done with the connection.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A well-formed response; the connection stays open for the next request.
    Send(Response),
    /// Close the connection without a byte of response.
    Drop,
    /// Keep the connection open and never answer (until the server shuts down).
    Hang,
    /// Announce the full Content-Length, send only the first `keep` body bytes, close.
    Truncate { response: Response, keep: usize },
    /// Write these raw bytes (not HTTP) and close.
    Garbage(Vec<u8>),
}

/// Serves requests. Called on the connection's own thread; it may block (long polls, the
/// sim's latency) without holding up any other connection.
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, request: Request) -> Reply;
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

enum ReadError {
    Closed,
    TooLarge(u16),
    Bad,
}

/// Serves one connection; it is in the gate (admitted by the acceptor) on entry, and
/// in it again whenever it waits for its next request.
fn serve_connection(
    stream: Arc<TcpStream>,
    handler: &dyn Handler,
    shared: &Shared,
    id: ConnId,
    source: IpAddr,
) {
    let stopper = &*shared.stopper;
    let mut writer: &TcpStream = &stream;
    let mut reader = BufReader::new(&*stream);
    let mut first = true;
    loop {
        if !first {
            // Kept alive: back through the gate for the next request, with a fresh
            // deadline that is also the idle timeout.
            let Ok(for_gate) = stream.try_clone() else {
                return;
            };
            shared.gate.admit(id, source, for_gate, Instant::now());
        }
        first = false;
        let read = read_request(&mut reader);
        // Out of the gate before answering; `false` if it was closed meanwhile (out of
        // time, or room made for another), and then nothing more is said on it.
        if !shared.gate.passed(id) {
            return;
        }
        let request = match read {
            Ok(r) => r,
            Err(ReadError::Closed) => return,
            Err(ReadError::TooLarge(status)) => {
                let r = Response::new(status).with_header("connection", "close");
                let _ = writer.write_all(&r.head_bytes(0));
                return;
            }
            Err(ReadError::Bad) => {
                let r = Response::new(400).with_header("connection", "close");
                let _ = writer.write_all(&r.head_bytes(0));
                return;
            }
        };
        let close = request
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        match handler.handle(request) {
            Reply::Send(mut response) => {
                if close {
                    response.set_header("connection", "close");
                }
                let mut bytes = response.head_bytes(response.body.len());
                bytes.extend_from_slice(&response.body);
                if writer.write_all(&bytes).is_err() || close {
                    return;
                }
            }
            Reply::Drop => {
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            Reply::Hang => {
                while !stopper.wait(Duration::from_secs(3600)) {}
                return;
            }
            Reply::Truncate { response, keep } => {
                let mut bytes = response.head_bytes(response.body.len());
                bytes.extend_from_slice(&response.body[..keep.min(response.body.len())]);
                let _ = writer.write_all(&bytes);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
            Reply::Garbage(bytes) => {
                let _ = writer.write_all(&bytes);
                let _ = writer.shutdown(Shutdown::Both);
                return;
            }
        }
    }
}

fn read_request(reader: &mut impl BufRead) -> Result<Request, ReadError> {
    let mut head_len = 0usize;
    let mut line = String::new();
    // Tolerate blank lines before a request line, as RFC 9112 allows.
    loop {
        line.clear();
        let n = read_line_capped(reader, &mut line, &mut head_len)?;
        if n == 0 {
            return Err(ReadError::Closed);
        }
        if !line.trim().is_empty() {
            break;
        }
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad);
    };
    if !version.starts_with("HTTP/1.") {
        return Err(ReadError::Bad);
    }
    let (method, target) = (method.to_string(), target.to_string());
    let mut headers = Vec::new();
    loop {
        line.clear();
        if read_line_capped(reader, &mut line, &mut head_len)? == 0 {
            return Err(ReadError::Closed);
        }
        let l = line.trim_end_matches(['\r', '\n']);
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').ok_or(ReadError::Bad)?;
        headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
    }
    // Two lengths (even equal ones) mean two parsers may frame the body differently:
    // refused, as RFC 9112 lets a server and as proxies expect.
    let mut lengths = headers.iter().filter(|(k, _)| k == "content-length");
    let len = match (lengths.next(), lengths.next()) {
        (Some(_), Some(_)) => return Err(ReadError::Bad),
        (Some((_, v)), None) => v.parse::<usize>().map_err(|_| ReadError::Bad)?,
        (None, _) => 0,
    };
    if headers
        .iter()
        .any(|(k, v)| k == "transfer-encoding" && !v.eq_ignore_ascii_case("identity"))
    {
        // Chunked request bodies are not needed by any client of the sim or the metrics.
        return Err(ReadError::TooLarge(411));
    }
    if len > MAX_BODY_BYTES {
        return Err(ReadError::TooLarge(413));
    }
    let mut body = vec![0u8; len];
    reader
        .read_exact(&mut body)
        .map_err(|_| ReadError::Closed)?;
    let (path, query) = split_target(&target);
    Ok(Request {
        method,
        path,
        query,
        headers,
        body,
    })
}

fn read_line_capped(
    reader: &mut impl BufRead,
    line: &mut String,
    used: &mut usize,
) -> Result<usize, ReadError> {
    let mut buf = Vec::new();
    let limit = (MAX_HEAD_BYTES - *used) as u64 + 1;
    let n = reader
        .by_ref()
        .take(limit)
        .read_until(b'\n', &mut buf)
        .map_err(|_| ReadError::Closed)?;
    *used += n;
    if *used > MAX_HEAD_BYTES {
        return Err(ReadError::TooLarge(431));
    }
    line.push_str(&String::from_utf8_lossy(&buf));
    Ok(n)
}

/// Splits `/a/b?x=1&y=2` into the path and decoded query pairs.
pub fn split_target(target: &str) -> (String, Vec<(String, String)>) {
    let (path, q) = target.split_once('?').unwrap_or((target, ""));
    let query = q
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (percent_decode(k), percent_decode(v))
        })
        .collect();
    (path.to_string(), query)
}

pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).unwrap_or("zz");
                match u8::from_str_radix(hex, 16) {
                    Ok(v) => {
                        out.push(v);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Percent-encodes a query value (unreserved characters pass through).
pub fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|c| match c {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (c as char).to_string()
            }
            _ => format!("%{c:02X}"),
        })
        .collect()
}

/// An RFC 9110 `Date` header value, e.g. `Mon, 30 Nov 2026 10:00:00 GMT`.
pub fn http_date(ms: crate::timefmt::Millis) -> String {
    let iso = crate::timefmt::format_rfc3339(ms);
    let days = ms.div_euclid(1000).div_euclid(86_400);
    // 1970-01-01 was a Thursday.
    let wd = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][days.rem_euclid(7) as usize];
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month: usize = iso[5..7].parse().unwrap_or(1);
    format!(
        "{wd}, {} {} {} {} GMT",
        &iso[8..10],
        months[month - 1],
        &iso[0..4],
        &iso[11..19]
    )
}

pub fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        413 => "Content Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lasting_accept_error_backs_off_and_a_reset_client_does_not() {
        let check = |kind: io::ErrorKind, failed: u32, want: Option<u64>| {
            let got = accept_backoff(&io::Error::from(kind), failed);
            assert_eq!(
                got,
                want.map(Duration::from_millis),
                "{kind:?} after {failed}"
            );
        };
        check(io::ErrorKind::ConnectionAborted, 5, None);
        check(io::ErrorKind::Interrupted, 5, None);
        // EMFILE: too many open files.
        let emfile = |failed| accept_backoff(&io::Error::from_raw_os_error(libc::EMFILE), failed);
        assert_eq!(emfile(1), Some(Duration::from_millis(10)));
        assert_eq!(emfile(2), Some(Duration::from_millis(20)));
        assert_eq!(emfile(7), Some(Duration::from_millis(640)));
        assert_eq!(emfile(8), Some(Duration::from_secs(1)));
        assert_eq!(emfile(u32::MAX), Some(Duration::from_secs(1)));
        check(io::ErrorKind::OutOfMemory, 1, Some(10));
    }

    struct Health;
    impl Handler for Health {
        fn handle(&self, request: Request) -> Reply {
            match request.path.as_str() {
                "/healthz" => Reply::Send(Response::new(200).with_body(b"ok".to_vec())),
                _ => Reply::Send(
                    Response::new(200).with_body(format!("{}", request.body.len()).into()),
                ),
            }
        }
    }

    fn serve(limits: GateLimits) -> Server {
        let addr: SocketAddr = "127.0.0.1:0".parse().expect("addr");
        Server::start_with(addr, Arc::new(Health), Arc::default(), limits).expect("start")
    }

    /// The flood needs 3 descriptors a connection between both ends (1 here, 2 in the
    /// server), past the usual 1024.
    fn raise_fd_limit(want: libc::rlim_t) {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: plain syscalls on a local struct.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
                lim.rlim_cur = want.min(lim.rlim_max);
                libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            }
        }
    }

    /// A TCP connection to `to` from the loopback address `from` (a distinct source).
    fn connect_from(from: Ipv4Addr, to: SocketAddr) -> TcpStream {
        use std::os::fd::FromRawFd;
        let sa = |ip: Ipv4Addr, port: u16| libc::sockaddr_in {
            sin_family: libc::AF_INET as libc::sa_family_t,
            sin_port: port.to_be(),
            sin_addr: libc::in_addr {
                s_addr: u32::from(ip).to_be(),
            },
            sin_zero: [0; 8],
        };
        let SocketAddr::V4(to) = to else {
            panic!("IPv4 only")
        };
        let len = std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t;
        // SAFETY: a fresh socket, bound and connected with valid sockaddr_in values;
        // the descriptor is owned by the TcpStream from here on.
        unsafe {
            let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
            let stream = TcpStream::from_raw_fd(fd);
            let local = sa(from, 0);
            let r = libc::bind(fd, (&local as *const libc::sockaddr_in).cast(), len);
            assert_eq!(r, 0, "bind {from}: {}", io::Error::last_os_error());
            let remote = sa(*to.ip(), to.port());
            let r = libc::connect(fd, (&remote as *const libc::sockaddr_in).cast(), len);
            assert_eq!(r, 0, "connect: {}", io::Error::last_os_error());
            stream
        }
    }

    /// Sends `request` and reads the reply until the server closes or `within` passes.
    fn exchange(stream: &mut TcpStream, request: &[u8], within: Duration) -> String {
        stream.write_all(request).expect("send");
        let deadline = Instant::now() + within;
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline {
            let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
            match stream.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&got);
                    if let Some(end) = text.find("\r\n\r\n") {
                        let len = text[..end]
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length: "))
                            .and_then(|v| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        if got.len() >= end + 4 + len {
                            break;
                        }
                    }
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => break,
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    }

    /// Waits (bounded by `within`) until the server closes `stream`, writing one byte
    /// every 50 ms as a slow-loris client does; returns how long that took, or None.
    fn closed_within(stream: &mut TcpStream, within: Duration) -> Option<Duration> {
        let start = Instant::now();
        let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
        let mut buf = [0u8; 512];
        while start.elapsed() < within {
            if stream.write_all(b"x").is_err() {
                return Some(start.elapsed());
            }
            match stream.read(&mut buf) {
                Ok(0) => return Some(start.elapsed()),
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => return Some(start.elapsed()),
            }
        }
        None
    }

    #[test]
    fn a_flood_of_half_sent_requests_never_starves_a_well_formed_one() {
        raise_fd_limit(8192);
        let server = serve(default_limits());
        let addr = server.addr();
        let flood_from = Ipv4Addr::new(127, 0, 0, 1);
        let started = Instant::now();
        let mut flood: Vec<TcpStream> = (0..515)
            .map(|_| {
                let mut s = connect_from(flood_from, addr);
                s.write_all(b"POST / HTTP/1.1\r\n").expect("flood send");
                s
            })
            .collect();
        // A second source floods too: the cap per source keeps either from all slots.
        flood.extend((0..200).map(|_| {
            let mut s = connect_from(Ipv4Addr::new(127, 0, 0, 2), addr);
            s.write_all(b"POST / HTTP/1.1\r\n").expect("flood send");
            s
        }));
        println!("flood of {} opened in {:?}", flood.len(), started.elapsed());
        let get = b"GET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
        // From a third source, from the flooding source itself, and once more after.
        for from in [
            Ipv4Addr::new(127, 0, 0, 3),
            flood_from,
            Ipv4Addr::new(127, 0, 0, 2),
        ] {
            let t = Instant::now();
            let mut good = connect_from(from, addr);
            let reply = exchange(&mut good, get, Duration::from_secs(5));
            let took = t.elapsed();
            println!("GET /healthz from {from} under the flood: {took:?}");
            assert!(
                reply.starts_with("HTTP/1.1 200") && reply.ends_with("ok"),
                "from {from}: {reply:?}"
            );
            assert!(took < Duration::from_secs(5), "{took:?}");
            let _ = good.shutdown(Shutdown::Both);
        }
        // A signed-webhook-sized POST with a body, from the flooding source.
        let t = Instant::now();
        let mut post = connect_from(flood_from, addr);
        let body = "{\"action\":\"queued\"}";
        let req = format!(
            "POST /hooks HTTP/1.1\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        let reply = exchange(&mut post, req.as_bytes(), Duration::from_secs(5));
        println!("POST under the flood: {:?}", t.elapsed());
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
        assert!(
            server.waiting() <= MAX_WAITING,
            "{} waiting",
            server.waiting()
        );
        for s in &flood {
            let _ = s.shutdown(Shutdown::Both);
        }
        drop(flood);
        drop(server);
    }

    #[test]
    fn a_slow_request_and_an_idle_keep_alive_are_closed_at_the_deadline() {
        let deadline = Duration::from_millis(400);
        let mut server = serve(GateLimits {
            handshake: deadline,
            ..default_limits()
        });
        let addr = server.addr();
        // Slow loris: a head that never ends, one byte every 50 ms.
        let mut slow = TcpStream::connect(addr).expect("connect");
        slow.write_all(b"POST / HTTP/1.1\r\nx-slow: ")
            .expect("send");
        let took = closed_within(&mut slow, Duration::from_secs(10));
        println!("slow loris closed after {took:?} (deadline {deadline:?})");
        let took = took.expect("the slow client was never closed");
        assert!(took >= deadline / 2, "closed too early: {took:?}");
        // Kept alive, then silent: closed after the same deadline.
        let mut idle = TcpStream::connect(addr).expect("connect");
        let reply = exchange(
            &mut idle,
            b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n",
            Duration::from_secs(5),
        );
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply:?}");
        let _ = idle.set_read_timeout(Some(Duration::from_millis(50)));
        let start = Instant::now();
        let mut buf = [0u8; 64];
        let mut closed = None;
        while start.elapsed() < Duration::from_secs(10) {
            match idle.read(&mut buf) {
                Ok(0) => {
                    closed = Some(start.elapsed());
                    break;
                }
                Ok(n) => panic!("unexpected bytes: {:?}", &buf[..n]),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                Err(_) => {
                    closed = Some(start.elapsed());
                    break;
                }
            }
        }
        println!("idle keep-alive closed after {closed:?}");
        assert!(closed.is_some(), "the idle connection was never closed");
        assert_eq!(server.waiting(), 0);
        server.shutdown();
    }

    #[test]
    fn two_content_lengths_are_refused_with_400() {
        let mut server = serve(default_limits());
        let addr = server.addr();
        for req in [
            &b"POST /hooks HTTP/1.1\r\ncontent-length: 2\r\ncontent-length: 5\r\n\r\nhello"[..],
            b"POST /hooks HTTP/1.1\r\nContent-Length: 5\r\ncontent-length: 5\r\n\r\nhello",
            b"POST /hooks HTTP/1.1\r\ncontent-length: 5, 5\r\n\r\nhello",
        ] {
            let mut s = TcpStream::connect(addr).expect("connect");
            let reply = exchange(&mut s, req, Duration::from_secs(5));
            assert!(reply.starts_with("HTTP/1.1 400"), "{reply:?}");
        }
        // One length still works.
        let mut s = TcpStream::connect(addr).expect("connect");
        let reply = exchange(
            &mut s,
            b"POST /hooks HTTP/1.1\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
            Duration::from_secs(5),
        );
        assert!(
            reply.starts_with("HTTP/1.1 200") && reply.ends_with('5'),
            "{reply:?}"
        );
        server.shutdown();
    }

    #[test]
    fn dates_and_targets() {
        assert_eq!(
            http_date(1_796_032_800_000),
            "Mon, 30 Nov 2026 10:00:00 GMT"
        );
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        let (p, q) = split_target("/a/b?name=x%20y&page=2&z");
        assert_eq!(p, "/a/b");
        assert_eq!(
            q,
            vec![
                ("name".into(), "x y".into()),
                ("page".into(), "2".into()),
                ("z".into(), "".into())
            ]
        );
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_encode("a b/c"), "a%20b%2Fc");
    }
}
