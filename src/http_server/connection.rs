//! One connection's life: reading each request under the size caps and the gate's deadline, handing it to the handler, writing the reply.

use super::gate::ConnId;
use super::{
    Handler, MAX_BODY_BYTES, MAX_HEAD_BYTES, Reply, Request, Response, Shared, split_target,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(super) enum ReadError {
    Closed,
    TooLarge(u16),
    Bad,
}

/// Serves one connection; it is in the gate (admitted by the acceptor) on entry, and
/// in it again whenever it waits for its next request.
pub(super) fn serve_connection(
    stream: Arc<TcpStream>,
    handler: &dyn Handler,
    shared: &Shared,
    id: ConnId,
    source: IpAddr,
) {
    let stopper = &*shared.stopper;
    let refusal = match (stream.peer_addr(), stream.local_addr()) {
        (Ok(peer), Ok(local)) => handler.refuse(peer, local),
        _ => None,
    };
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
        if let Some(r) = refusal {
            let r = r.with_header("connection", "close");
            let mut bytes = r.head_bytes(r.body.len());
            bytes.extend_from_slice(&r.body);
            let _ = writer.write_all(&bytes);
            return;
        }
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

pub(super) fn read_request(reader: &mut impl BufRead) -> Result<Request, ReadError> {
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

pub(super) fn read_line_capped(
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
