//! The metrics listener: `GET /metrics` (Prometheus text) and `GET /healthz` on a
//! loopback address only, on the crate's small HTTP/1.1 server (`http_server::Server`,
//! which the simulated GitHub serves on too) rather than a second one. Jobs run on
//! this host too: a connection from a runner uid (whose socket `runner::peer` finds
//! in `/proc/net/tcp`) is refused with 403, so no job reads the other repositories'
//! names and usage the metrics carry.

use super::Metrics;
use crate::domain::UidRange;
use crate::http_server::{Handler, Reply, Request, Response, Server, Stopper};
use crossbeam_channel::Receiver;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

struct MetricsHandler {
    registry: Arc<Metrics>,
}

/// Pure: whether a connection whose peer socket belongs to `peer_uid` is refused while
/// `closed_to` (the runner uids in effect) is set: a runner uid's always, and one
/// whose owner cannot be found (gone already, or not on this host's loopback) too.
pub fn refused(peer_uid: Option<u32>, closed_to: Option<UidRange>) -> bool {
    match (closed_to, peer_uid) {
        (None, _) => false,
        (Some(_), None) => true,
        (Some(range), Some(u)) => range.contains(u),
    }
}

impl Handler for MetricsHandler {
    fn refuse(&self, peer: SocketAddr, local: SocketAddr) -> Option<Response> {
        let closed_to = self.registry.closed_to()?;
        let uid = crate::runner::peer::peer_uid(peer, local);
        refused(uid, Some(closed_to)).then(|| {
            Response::new(403)
                .with_header("content-type", "text/plain; charset=utf-8")
                .with_body(
                    b"forbidden: runner uids may not read the metrics (see docs/security.md)\n"
                        .to_vec(),
                )
        })
    }

    fn handle(&self, req: Request) -> Reply {
        let text = |status: u16, body: String| {
            Response::new(status)
                .with_header("content-type", "text/plain; version=0.0.4; charset=utf-8")
                .with_body(body.into_bytes())
        };
        if req.method != "GET" {
            return Reply::Send(
                text(405, "only GET is served here\n".into()).with_header("allow", "GET"),
            );
        }
        Reply::Send(match req.path.as_str() {
            "/metrics" => text(200, self.registry.render()),
            "/healthz" if self.registry.is_fresh() => text(200, "ok\n".into()),
            "/healthz" => text(
                503,
                "stale: the daemon's last pass is not recent; see its log\n".into(),
            ),
            _ => text(404, "not found: try /metrics or /healthz\n".into()),
        })
    }
}

/// Serves until `shutdown` receives a message or is disconnected; the returned thread
/// ends after the listener and every connection are closed.
pub fn serve(
    listen: SocketAddr,
    registry: Arc<Metrics>,
    shutdown: Receiver<()>,
) -> io::Result<JoinHandle<()>> {
    serve_on(listen, registry, shutdown).map(|(_, t)| t)
}

/// [`serve`], also returning the bound address (port 0 picks a free one).
pub fn serve_on(
    listen: SocketAddr,
    registry: Arc<Metrics>,
    shutdown: Receiver<()>,
) -> io::Result<(SocketAddr, JoinHandle<()>)> {
    if !listen.ip().is_loopback() {
        // The metrics carry no secrets but have no authentication either, and nothing
        // beyond this host needs them without a proxy the operator chooses.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "--metrics-listen {listen} is not a loopback address: use 127.0.0.1:PORT or [::1]:PORT and put a proxy in front if others must scrape it"
            ),
        ));
    }
    let handler = Arc::new(MetricsHandler { registry });
    let mut server = Server::start(listen, handler, Arc::new(Stopper::default()))
        .map_err(|e| io::Error::new(e.kind(), format!("metrics listener on {listen}: {e}")))?;
    let addr = server.addr();
    let thread = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            // Returns on a message or when every sender is gone: both mean stop.
            let _ = shutdown.recv();
            server.shutdown();
        })?;
    Ok((addr, thread))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runner_uids_and_unknown_peers_are_refused_while_uids_are_in_effect() {
        let r = UidRange {
            start: 61_000,
            end: 61_007,
        };
        assert!(refused(Some(61_000), Some(r)));
        assert!(refused(Some(61_007), Some(r)));
        assert!(!refused(Some(60_999), Some(r)), "below the range");
        assert!(
            !refused(Some(0), Some(r)),
            "root (Prometheus, the operator)"
        );
        assert!(!refused(Some(112), Some(r)), "a prometheus user");
        assert!(refused(None, Some(r)), "an owner that cannot be found");
        assert!(
            !refused(Some(61_000), None),
            "no runner uids: nothing refused"
        );
        assert!(!refused(None, None));
    }
}
