//! Which uid owns the other end of a TCP connection on this host, for a listener that
//! must refuse runner uids (`/metrics`): the peer's socket is a line of
//! `/proc/net/tcp` (or `tcp6`) whose local address is the peer's and whose remote
//! address is ours, and its `uid` column is the socket's owner. `SO_PEERCRED` answers
//! only on Unix sockets; this is its TCP counterpart for loopback peers (a peer on
//! another host, or in another network namespace, is not listed: `None`).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Pure: the uid of the socket in a `/proc/net/tcp{,6}` text whose local address is
/// `peer` and remote address is `ours`. Addresses are read as the kernel writes them:
/// each 32-bit word in hex, in the host's byte order, and the port in hex.
pub fn uid_in(text: &str, peer: SocketAddr, ours: SocketAddr) -> Option<u32> {
    text.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (local, remote, uid) = (f.get(1)?, f.get(2)?, f.get(7)?);
        let same = |hex: &str, want: SocketAddr| parse_addr(hex).is_some_and(|a| same_end(a, want));
        (same(local, peer) && same(remote, ours))
            .then(|| uid.parse().ok())
            .flatten()
    })
}

/// An address the kernel wrote as `ADDR:PORT` (8 or 32 hex digits, then 4).
fn parse_addr(hex: &str) -> Option<SocketAddr> {
    let (addr, port) = hex.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| {
        addr.get(i * 8..i * 8 + 8)
            .and_then(|w| u32::from_str_radix(w, 16).ok())
            .map(u32::to_ne_bytes)
    };
    let ip = match addr.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut b = [0u8; 16];
            for i in 0..4 {
                b[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(b))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// The same end, an IPv4 address and its IPv4-mapped IPv6 form alike.
fn same_end(a: SocketAddr, b: SocketAddr) -> bool {
    let canon = |ip: IpAddr| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(IpAddr::V6(v6), IpAddr::V4),
        v4 => v4,
    };
    a.port() == b.port() && canon(a.ip()) == canon(b.ip())
}

/// The uid owning the peer's end of our connection from `peer` to `ours`, from
/// `/proc/net/tcp` and `/proc/net/tcp6`; `None` when neither lists it.
pub fn peer_uid(peer: SocketAddr, ours: SocketAddr) -> Option<u32> {
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().find_map(|f| {
        std::fs::read_to_string(f)
            .ok()
            .and_then(|t| uid_in(&t, peer, ours))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex4(ip: Ipv4Addr) -> String {
        format!("{:08X}", u32::from_ne_bytes(ip.octets()))
    }

    #[test]
    fn finds_the_peers_socket_and_its_owner() {
        let lo = Ipv4Addr::LOCALHOST;
        let ours: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        let peer: SocketAddr = "127.0.0.1:51000".parse().unwrap();
        let text = format!(
            "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
             0: {l}:2382 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 100 1 0\n\
             1: {l}:2382 {l}:C738 01 00000000:00000000 00:00000000 00000000     0        0 101 1 0\n\
             2: {l}:C738 {l}:2382 01 00000000:00000000 00:00000000 00000000 61000        0 102 1 0\n\
             3: {l}:C739 {l}:2382 01 00000000:00000000 00:00000000 00000000  1000        0 103 1 0\n",
            l = hex4(lo)
        );
        assert_eq!(uid_in(&text, peer, ours), Some(61_000));
        let other: SocketAddr = "127.0.0.1:51001".parse().unwrap();
        assert_eq!(uid_in(&text, other, ours), Some(1_000));
        // Our own end (local = ours) is never taken for the peer's.
        assert_eq!(uid_in(&text, ours, peer), Some(0));
        let absent: SocketAddr = "127.0.0.1:51002".parse().unwrap();
        assert_eq!(uid_in(&text, absent, ours), None);
        assert_eq!(uid_in("header only\n", peer, ours), None);
        assert_eq!(uid_in("h\n0: zz:1 yy:2 01 0 0 0 5\n", peer, ours), None);
    }

    #[test]
    fn reads_ipv6_and_mapped_ipv4() {
        let words = |ip: Ipv6Addr| -> String {
            ip.octets()
                .chunks(4)
                .map(|c| format!("{:08X}", u32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect()
        };
        let one = words(Ipv6Addr::LOCALHOST);
        let mapped = words(Ipv4Addr::LOCALHOST.to_ipv6_mapped());
        let text = format!(
            "header\n\
             0: {one}:C738 {one}:2382 01 0:0 00:0 0 62000 0 1\n\
             1: {mapped}:C739 {mapped}:2382 01 0:0 00:0 0 62001 0 1\n"
        );
        let ours6: SocketAddr = "[::1]:9090".parse().unwrap();
        assert_eq!(
            uid_in(&text, "[::1]:51000".parse().unwrap(), ours6),
            Some(62_000)
        );
        let ours4: SocketAddr = "127.0.0.1:9090".parse().unwrap();
        assert_eq!(
            uid_in(&text, "127.0.0.1:51001".parse().unwrap(), ours4),
            Some(62_001)
        );
    }

    #[test]
    fn a_real_loopback_connection_is_ours() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, peer) = l.accept().unwrap();
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert_eq!(peer_uid(peer, s.local_addr().unwrap()), Some(me));
        drop(c);
    }
}
