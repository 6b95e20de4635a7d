//! Tests of the server against real sockets: accept errors, floods of half-sent requests, deadlines, malformed heads.

use super::*;
use std::io::Read;

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
            _ => {
                Reply::Send(Response::new(200).with_body(format!("{}", request.body.len()).into()))
            }
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
