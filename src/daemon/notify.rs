//! systemd readiness and watchdog (`Type=notify`): a datagram to `$NOTIFY_SOCKET`.
//! A few lines of our own instead of a crate, as ntpd-rs does.

use std::os::unix::net::UnixDatagram;

/// Sends one `sd_notify` state string (`READY=1`, `WATCHDOG=1`, `STOPPING=1`,
/// `STATUS=...`). Does nothing when not started by systemd. Abstract sockets (`@...`)
/// are supported.
pub fn notify(state: &str) -> bool {
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return false;
    };
    let Ok(sock) = UnixDatagram::unbound() else {
        return false;
    };
    let bytes = path.as_encoded_bytes();
    if let Some(name) = bytes.strip_prefix(b"@") {
        use std::os::linux::net::SocketAddrExt;
        match std::os::unix::net::SocketAddr::from_abstract_name(name) {
            Ok(addr) => sock.send_to_addr(state.as_bytes(), &addr).is_ok(),
            Err(_) => false,
        }
    } else {
        sock.send_to(state.as_bytes(), &path).is_ok()
    }
}

/// The watchdog interval systemd asks for (`WATCHDOG_USEC`), halved as sd_notify(3)
/// advises, when this process is the one it watches.
pub fn watchdog_interval() -> Option<std::time::Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| std::time::Duration::from_micros(usec / 2))
}
