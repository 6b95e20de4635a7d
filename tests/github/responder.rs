//! A scripted HTTP/1.1 responder on 127.0.0.1 for the GitHub client's fault tests:
//! each connection gets the next canned action, and every request is recorded.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// What the responder does with one connection, after reading its request.
pub enum Action {
    /// Write these bytes and close.
    Raw(Vec<u8>),
    /// Close without answering (the client sees the connection drop).
    Close,
    /// Keep the connection open and silent until the responder is dropped.
    Hang,
    /// Run the hook (after the request is read), then write these bytes and close:
    /// what happens "while the server thinks", such as a test clock moving on.
    RawAfter(Box<dyn Fn() + Send>, Vec<u8>),
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// Path and query, as sent.
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

pub struct Responder {
    pub port: u16,
    script: Arc<Mutex<VecDeque<Action>>>,
    log: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Responder {
    pub fn start(script: Vec<Action>) -> Responder {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, l, st) = (script.clone(), log.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name("responder".into())
            .spawn(move || {
                let mut hung: Vec<TcpStream> = Vec::new();
                for conn in listener.incoming() {
                    if st.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(mut conn) = conn else { continue };
                    let Some(req) = read_request(&mut conn) else {
                        continue;
                    };
                    l.lock().unwrap().push(req);
                    let action = s.lock().unwrap().pop_front();
                    match action {
                        Some(Action::Raw(bytes)) => {
                            let _ = conn.write_all(&bytes);
                            let _ = conn.flush();
                            let _ = conn.shutdown(Shutdown::Both);
                        }
                        Some(Action::RawAfter(hook, bytes)) => {
                            hook();
                            let _ = conn.write_all(&bytes);
                            let _ = conn.flush();
                            let _ = conn.shutdown(Shutdown::Both);
                        }
                        Some(Action::Close) => {
                            let _ = conn.shutdown(Shutdown::Both);
                        }
                        Some(Action::Hang) => hung.push(conn),
                        None => {
                            let _ = conn.write_all(&reply(
                                500,
                                &[],
                                "{\"message\":\"responder script exhausted\"}",
                            ));
                        }
                    }
                }
                drop(hung);
            })
            .unwrap();
        Responder {
            port,
            script,
            log,
            stop,
            thread: Some(thread),
        }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn push(&self, a: Action) {
        self.script.lock().unwrap().push_back(a);
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.log.lock().unwrap().clone()
    }

    pub fn count(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_request(conn: &mut TcpStream) -> Option<Recorded> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let path = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = conn.read(&mut chunk).ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Recorded {
        method,
        path,
        headers,
        body,
    })
}

/// A whole response with `content-length` and `connection: close`.
pub fn reply(status: u16, headers: &[(&str, &str)], body: &str) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} X\r\n");
    for (k, v) in headers {
        out.push_str(&format!("{k}: {v}\r\n"));
    }
    out.push_str(&format!(
        "content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    ));
    out.into_bytes()
}

pub fn ok(status: u16, headers: &[(&str, &str)], body: &str) -> Action {
    Action::Raw(reply(status, headers, body))
}

pub fn json(body: &str) -> Action {
    ok(200, &[], body)
}

pub fn status(s: u16, message: &str) -> Action {
    ok(
        s,
        &[],
        &serde_json::json!({ "message": message }).to_string(),
    )
}

/// Headers that promise `declared` bytes, then only `sent` of the body, then a close.
pub fn truncated(declared: usize, sent: &str) -> Action {
    Action::Raw(
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n{sent}"
        )
        .into_bytes(),
    )
}
