//! The messages: a parsed request, a response, what a handler replies (well-formed or a fault), and status texts and dates.

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
    pub(super) fn head_bytes(&self, content_length: usize) -> Vec<u8> {
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
