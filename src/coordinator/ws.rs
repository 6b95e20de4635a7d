//! The WebSocket transport both sides share: a TCP stream with or without rustls,
//! bounded message and frame sizes, a waker that interrupts a wait for the socket, a
//! non-blocking drain of every message already received, and the [`pump`] that drives
//! a connection (stop check, wait, read, send, liveness at three pings, ping) for the
//! coordinator's server and the host's link alike, each a [`Peer`]. One thread per
//! connection waits in `poll(2)` on the socket and its waker, so a frame to send goes
//! out at once and no thread spins.

use super::protocol::MAX_MESSAGE;
use rustls::{ClientConnection, ServerConnection, StreamOwned};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tungstenite::protocol::WebSocketConfig;
use tungstenite::{Message, WebSocket};

/// Where log lines go (the daemon routes them to its log; the CLI to stderr).
pub type LogFn = Arc<dyn Fn(&str) + Send + Sync>;

/// Log lines as the daemon writes them (logfmt on stderr): `msg=EVENT detail="…"`.
pub fn stderr_log(event: &'static str) -> LogFn {
    Arc::new(move |line| crate::log_info!(event, detail = line))
}

/// A connection's byte stream.
pub enum Stream {
    Plain(TcpStream),
    ServerTls(Box<StreamOwned<ServerConnection, TcpStream>>),
    ClientTls(Box<StreamOwned<ClientConnection, TcpStream>>),
}

impl Stream {
    pub fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::ServerTls(s) => &s.sock,
            Stream::ClientTls(s) => &s.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.read(buf),
            Stream::ServerTls(s) => s.read(buf),
            Stream::ClientTls(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(s) => s.write(buf),
            Stream::ServerTls(s) => s.write(buf),
            Stream::ClientTls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(s) => s.flush(),
            Stream::ServerTls(s) => s.flush(),
            Stream::ClientTls(s) => s.flush(),
        }
    }
}

/// Message and frame sizes bounded to [`MAX_MESSAGE`]: a peer cannot make us buffer
/// more than that.
pub fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(MAX_MESSAGE))
        .max_frame_size(Some(MAX_MESSAGE))
}

/// Wakes a connection thread waiting in [`wait`]. Cloneable across threads.
#[derive(Debug)]
pub struct Waker(UnixStream);

impl Waker {
    pub fn wake(&self) {
        // A full pipe already means "wake up": a failed write loses nothing.
        let _ = (&self.0).write(&[1]);
    }

    pub fn try_clone(&self) -> io::Result<Waker> {
        Ok(Waker(self.0.try_clone()?))
    }
}

/// The waiting end of a [`Waker`].
#[derive(Debug)]
pub struct WakeRx(UnixStream);

impl WakeRx {
    fn drain(&self) {
        let mut buf = [0u8; 64];
        while matches!((&self.0).read(&mut buf), Ok(n) if n > 0) {}
    }
}

pub fn waker() -> io::Result<(Waker, WakeRx)> {
    let (a, b) = UnixStream::pair()?;
    a.set_nonblocking(true)?;
    b.set_nonblocking(true)?;
    Ok((Waker(a), WakeRx(b)))
}

/// Waits until the socket is readable, the waker was woken, or `timeout` passed.
/// Returns whether the socket is readable (or closed).
pub fn wait(sock: &TcpStream, wake: &WakeRx, timeout: Duration) -> io::Result<bool> {
    let mut fds = [
        libc::pollfd {
            fd: sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: wake.0.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `fds` is a valid array of two pollfd for the duration of the call.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    if fds[1].revents != 0 {
        wake.drain();
    }
    Ok(fds[0].revents != 0)
}

fn would_block(e: &tungstenite::Error) -> bool {
    matches!(e, tungstenite::Error::Io(io) if io.kind() == io::ErrorKind::WouldBlock
        || io.kind() == io::ErrorKind::TimedOut)
}

/// Reads every message already received (TLS and WebSocket buffers included)
/// without blocking, handing each to `each`. `Err` means the connection is over.
pub fn read_available(
    ws: &mut WebSocket<Stream>,
    mut each: impl FnMut(Message),
) -> Result<(), tungstenite::Error> {
    ws.get_ref().tcp().set_nonblocking(true)?;
    let r = loop {
        match ws.read() {
            Ok(m) => each(m),
            Err(e) if would_block(&e) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    ws.get_ref().tcp().set_nonblocking(false)?;
    r?;
    // A pong queued while reading may not have gone out on the non-blocking socket.
    match ws.flush() {
        Err(e) if !would_block(&e) => Err(e),
        _ => Ok(()),
    }
}

/// One side of a connection, as [`pump`] drives it. Each method that ends the
/// connection returns why, in words for the log, having sent whatever close frame
/// that side owes its peer.
pub trait Peer {
    /// Checked before every wait: `Some(why)` when this side is stopping.
    fn stop(&mut self, socket: &mut WebSocket<Stream>) -> Option<String>;
    /// One message received (pings, pongs and close frames included), in order.
    fn receive(&mut self, socket: &mut WebSocket<Stream>, m: Message) -> Result<(), String>;
    /// After each read: send what waits to go out.
    fn send_pending(&mut self, socket: &mut WebSocket<Stream>) -> Result<(), String>;
}

/// Drives one connection until it ends, and returns why. Each round: the peer's stop
/// check; a wait for the socket or the waker, at most until the next ping is due;
/// every message already received, each to `peer.receive`; the peer's pending
/// frames; then liveness: nothing received for three `ping` intervals ends the
/// connection (`no answer to pings`), and a ping goes out every `ping`.
pub fn pump(
    socket: &mut WebSocket<Stream>,
    wake: &WakeRx,
    ping: Duration,
    peer: &mut dyn Peer,
) -> String {
    let mut last_rx = Instant::now();
    let mut last_ping = Instant::now();
    loop {
        if let Some(why) = peer.stop(socket) {
            return why;
        }
        let timeout = ping.saturating_sub(last_ping.elapsed());
        if let Err(e) = wait(socket.get_ref().tcp(), wake, timeout) {
            return format!("poll: {e}");
        }
        let mut frames = Vec::new();
        let r = read_available(socket, |m| {
            last_rx = Instant::now();
            frames.push(m);
        });
        for m in frames {
            if let Err(why) = peer.receive(socket, m) {
                return why;
            }
        }
        if let Err(e) = r {
            return e.to_string();
        }
        if let Err(why) = peer.send_pending(socket) {
            return why;
        }
        if last_rx.elapsed() > ping * 3 {
            return "no answer to pings".into();
        }
        if last_ping.elapsed() >= ping {
            last_ping = Instant::now();
            if let Err(e) = socket.send(Message::Ping(Default::default())) {
                return format!("ping: {e}");
            }
        }
    }
}

/// Log lines a peer can cause, bounded: at most `burst` lines per `window`; the rest
/// are counted and reported in one line when a later window lets a line through. A
/// misbehaving client (or host) cannot fill the log.
pub struct Throttle {
    burst: u32,
    window: std::time::Duration,
    state: std::sync::Mutex<ThrottleState>,
}

struct ThrottleState {
    since: std::time::Instant,
    shown: u32,
    dropped: u64,
}

impl Throttle {
    pub fn new(burst: u32, window: Duration) -> Throttle {
        Throttle {
            burst,
            window,
            state: std::sync::Mutex::new(ThrottleState {
                since: std::time::Instant::now(),
                shown: 0,
                dropped: 0,
            }),
        }
    }

    /// Logs `line` unless this window's lines are spent. Returns whether it did.
    pub fn log(&self, log: &LogFn, line: &str) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.since.elapsed() >= self.window {
            s.since = std::time::Instant::now();
            s.shown = 0;
        }
        if s.shown >= self.burst {
            s.dropped += 1;
            return false;
        }
        s.shown += 1;
        if s.dropped > 0 {
            log(&format!("({} similar lines not logged)", s.dropped));
            s.dropped = 0;
        }
        log(line);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;
    use std::thread;

    /// Echoes each text frame back from `send_pending`, and stops once it got "bye".
    #[derive(Default)]
    struct Echo {
        got: Vec<String>,
        pending: Vec<String>,
    }

    impl Peer for Echo {
        fn stop(&mut self, socket: &mut WebSocket<Stream>) -> Option<String> {
            if !self.got.iter().any(|t| t == "bye") {
                return None;
            }
            let _ = socket.close(None);
            let _ = socket.flush();
            Some("said bye".into())
        }

        fn receive(&mut self, _: &mut WebSocket<Stream>, m: Message) -> Result<(), String> {
            if let Message::Text(t) = m {
                self.got.push(t.to_string());
                self.pending.push(t.to_string());
            }
            Ok(())
        }

        fn send_pending(&mut self, socket: &mut WebSocket<Stream>) -> Result<(), String> {
            for t in self.pending.drain(..) {
                socket
                    .send(Message::text(format!("echo {t}")))
                    .map_err(|e| format!("send: {e}"))?;
            }
            Ok(())
        }
    }

    /// A deadline for what should come at once, so a broken pump fails the test
    /// instead of hanging it.
    const DEADLINE: Duration = Duration::from_secs(30);

    /// Runs `pump` with an `Echo` on the accepted side of a loopback connection;
    /// returns the client's socket and where the pump's end (its reason and the
    /// frames it got) arrives.
    fn serve(
        ping: Duration,
    ) -> (
        WebSocket<TcpStream>,
        crossbeam_channel::Receiver<(String, Vec<String>)>,
    ) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (done, ended) = crossbeam_channel::bounded(1);
        thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let mut socket =
                tungstenite::accept_with_config(Stream::Plain(tcp), Some(ws_config())).unwrap();
            let (_waker, wake) = waker().unwrap();
            let mut echo = Echo::default();
            let why = pump(&mut socket, &wake, ping, &mut echo);
            let _ = done.send((why, echo.got));
        });
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(DEADLINE)).unwrap();
        let (client, _) = tungstenite::client(format!("ws://{addr}/"), tcp).unwrap();
        (client, ended)
    }

    fn next_text(client: &mut WebSocket<TcpStream>) -> Option<String> {
        loop {
            match client.read() {
                Ok(Message::Text(t)) => return Some(t.to_string()),
                Ok(Message::Close(_)) | Err(_) => return None,
                Ok(_) => {}
            }
        }
    }

    #[test]
    fn the_pump_hands_over_each_frame_sends_what_waits_and_stops_when_its_peer_says() {
        let (mut client, server) = serve(Duration::from_secs(600));
        client.send(Message::text("a")).unwrap();
        assert_eq!(next_text(&mut client).as_deref(), Some("echo a"));
        client.send(Message::text("bye")).unwrap();
        assert_eq!(next_text(&mut client).as_deref(), Some("echo bye"));
        assert_eq!(
            next_text(&mut client),
            None,
            "the peer's close frame follows"
        );
        let (why, got) = server.recv_timeout(DEADLINE).expect("the pump ended");
        assert_eq!(why, "said bye");
        assert_eq!(got, ["a", "bye"]);
    }

    #[test]
    fn a_peer_that_answers_no_ping_is_given_up() {
        // The client never reads, so it never answers the pings with pongs.
        let (client, server) = serve(Duration::from_millis(20));
        let (why, got) = server.recv_timeout(DEADLINE).expect("the pump gave up");
        assert_eq!(why, "no answer to pings");
        assert!(got.is_empty());
        drop(client);
    }
}
