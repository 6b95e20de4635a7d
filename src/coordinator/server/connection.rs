//! One host connection: the TLS and WebSocket handshake that authenticates it, then the pump of its frames to the placer and of the placer's launches back.

use super::{Closing, ConnCtx, Event, Out, UNKNOWN_FRAME_LINES};
use crate::coordinator::auth::{self, bearer};
use crate::coordinator::gate::Gate;
use crate::coordinator::placement::ConnId;
use crate::coordinator::protocol::{FrameError, HostMsg};
use crate::coordinator::ws::{self, Stream, Throttle};
use crossbeam_channel::{Receiver, unbounded};
use rustls::{ServerConnection, StreamOwned};
use std::net::TcpStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tungstenite::handshake::server::{ErrorResponse, Request, Response};
use tungstenite::http;
use tungstenite::{Message, WebSocket};

pub(super) fn unauthorized() -> ErrorResponse {
    let mut r = http::Response::new(Some(
        "unauthorized: give Authorization: Bearer <host token>".to_string(),
    ));
    *r.status_mut() = http::StatusCode::UNAUTHORIZED;
    r
}

pub(super) fn too_many_hosts(max: usize) -> ErrorResponse {
    let mut r = http::Response::new(Some(format!("too many hosts: {max} already connected")));
    *r.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
    r
}

/// Counts an authenticated connection while it lives.
pub(super) struct HostSlot<'a>(&'a AtomicUsize);

impl Drop for HostSlot<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// An authenticated host's connection, as the pump drives it: its frames go to the
/// placer as events, and the placer's frames and close come back through `out`.
pub(super) struct HostPeer<'a> {
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
pub(super) struct Leave<'a>(&'a Gate, ConnId);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.left(self.1);
    }
}

/// One connection's thread: its stream, the handshake that authenticates a host, and
/// then the host's frames until either side ends.
pub(super) fn connection(tcp: TcpStream, conn: ConnId, ctx: &ConnCtx) {
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
pub(super) fn open_stream(tcp: TcpStream, peer: &str, ctx: &ConnCtx) -> Option<Stream> {
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
pub(super) struct Authenticated<'a> {
    socket: WebSocket<Stream>,
    name: String,
    token: [u8; 32],
    slot: HostSlot<'a>,
}

/// The WebSocket handshake: a known bearer token and room among the hosts, within
/// the gate's deadline. `None` when refused (logged, throttled) or too late.
// tungstenite's handshake callback returns its `ErrorResponse` by value.
#[allow(clippy::result_large_err)]
pub(super) fn handshake<'a>(
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
pub(super) fn serve_host(host: Authenticated, conn: ConnId, peer: &str, ctx: &ConnCtx) {
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
