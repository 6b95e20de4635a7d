//! The wire: one request sent on the agent with our headers, timeouts and body cap, and `send_external` for the services beside the REST API.

use super::{API_VERSION, Call, GitHubClient, Reply, USER_AGENT};
use crate::github::error::GhError;
use crate::github::headers::Headers;
use crate::secret::Secret;
use std::time::Duration;

/// A request to a service other than the REST API; see [`GitHubClient::send_external`].
pub(crate) struct ExternalCall<'a> {
    pub method: &'static str,
    pub url: String,
    /// The whole `Authorization` value (`Bearer ...`, `RemoteAuth ...`).
    pub authorization: &'a Secret,
    pub accept: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: Option<Vec<u8>>,
    pub retry: bool,
    /// Per-read timeout for a long poll; `None` keeps the client's.
    pub read_timeout: Option<Duration>,
    /// A held-open wait (the scale set's message long poll) rather than work: it takes
    /// no permit of the credential's `InFlight`. The service holds it silent for up to
    /// ~50 s until a message comes; counted, each listener would keep a slot for good,
    /// and a target with as many scale set profiles as `max_in_flight` could send
    /// nothing else. It costs GitHub no work while it waits.
    pub long_poll: bool,
}

impl GitHubClient {
    pub(super) fn send_once(
        &self,
        c: &Call,
        auth: &Secret,
        etag: Option<&str>,
    ) -> Result<Reply, GhError> {
        let mut b = ureq::http::Request::builder()
            .method(c.method)
            .uri(&c.url)
            .header("accept", "application/vnd.github+json")
            .header("x-github-api-version", API_VERSION)
            .header("user-agent", USER_AGENT)
            .header(
                "authorization",
                sensitive(&format!("Bearer {}", auth.expose()))?,
            );
        if let Some(tag) = etag {
            b = b.header("if-none-match", tag);
        }
        self.exchange(b, c.body.as_deref(), &c.url, None)
    }

    /// Sends `req` on the agent, with the per-read and per-call timeouts overridden
    /// when `read_timeout` is given (a body or none: the request's type differs).
    fn run<B: ureq::AsSendBody>(
        &self,
        req: ureq::http::Request<B>,
        read_timeout: Option<Duration>,
        per_call: Option<Duration>,
    ) -> Result<ureq::http::Response<ureq::Body>, ureq::Error> {
        match read_timeout {
            Some(t) => self.agent.run(
                self.agent
                    .configure_request(req)
                    .timeout_per_read(Some(t))
                    .timeout_per_call(per_call)
                    .build(),
            ),
            None => self.agent.run(req),
        }
    }

    /// Runs one built request: sends the body, maps transport errors, and reads the
    /// response under the body cap. `read_timeout` overrides the per-read timeout (a
    /// long poll holds the socket silent longer than a REST call may).
    fn exchange(
        &self,
        b: ureq::http::request::Builder,
        body: Option<&[u8]>,
        url: &str,
        read_timeout: Option<Duration>,
    ) -> Result<Reply, GhError> {
        let per_call = read_timeout.map(|t| t + self.config.call_timeout);
        let result = match body {
            Some(body) => {
                let req = b
                    .header("content-type", "application/json")
                    .body(body)
                    .map_err(|_| bad_url(url))?;
                self.run(req, read_timeout, per_call)
            }
            None => {
                let req = b.body(()).map_err(|_| bad_url(url))?;
                self.run(req, read_timeout, per_call)
            }
        };
        let resp = result.map_err(transport)?;
        let status = resp.status().as_u16();
        let headers = Headers::new(resp.headers().iter().filter_map(|(k, v)| {
            v.to_str()
                .ok()
                .map(|v| (k.as_str().to_string(), v.to_string()))
        }));
        let body = resp
            .into_body()
            .into_with_config()
            .limit(self.config.body_limit)
            .read_to_vec()
            .map_err(|e| match e {
                ureq::Error::BodyExceedsLimit(_) => GhError::TooLarge {
                    limit: self.config.body_limit,
                },
                e => transport(e),
            })?;
        Ok(Reply {
            status,
            headers,
            body,
        })
    }

    /// Sends a request to a service beside the REST API (the Actions service of the
    /// runner scale set API) through this client's transport: its agent, timeouts,
    /// body cap, and retries of transport errors and 5xx with the same interruptible
    /// backoff, and the credential's bound on requests in flight (except for a long
    /// poll). No rate-limit gate, ETag or status mapping: every status comes back for
    /// the caller to read.
    pub(crate) fn send_external(&self, c: &ExternalCall<'_>) -> Result<Reply, GhError> {
        let mut tried = 0u32;
        loop {
            tried += 1;
            let mut b = ureq::http::Request::builder()
                .method(c.method)
                .uri(&c.url)
                .header("accept", c.accept)
                .header("user-agent", USER_AGENT)
                .header("authorization", sensitive(c.authorization.expose())?);
            for (k, v) in &c.headers {
                b = b.header(*k, v.as_str());
            }
            let retryable = c.retry && self.config.retry.should_retry(tried);
            // One permit per try, given back before any backoff (see `long_poll`).
            let permit = if c.long_poll {
                None
            } else {
                Some(self.permit(false)?)
            };
            let result = self.exchange(b, c.body.as_deref(), &c.url, c.read_timeout);
            drop(permit);
            match result {
                Ok(r) if r.status >= 500 && retryable => self.backoff(tried)?,
                // Not counted in `stats.requests`: that count means REST rate-limit
                // units, and the Actions service does not charge them.
                Ok(r) => return Ok(r),
                Err(GhError::Transport { .. }) if retryable => self.backoff(tried)?,
                Err(e) => return Err(e),
            }
        }
    }
}

/// A header value marked sensitive so that it never appears in ureq's logs.
fn sensitive(value: &str) -> Result<ureq::http::HeaderValue, GhError> {
    let mut v = ureq::http::HeaderValue::from_str(value)
        .map_err(|_| GhError::Unauthorized { clock_hint: false })?;
    v.set_sensitive(true);
    Ok(v)
}

fn bad_url(url: &str) -> GhError {
    // The URL is built from api_url and validated names; it holds no secret.
    GhError::Transport {
        detail: format!("invalid request URL {url}"),
    }
}

fn transport(e: ureq::Error) -> GhError {
    let detail = match e {
        ureq::Error::Timeout(t) => format!("timed out ({t})"),
        ureq::Error::Io(io) => format!("connection error: {}", io.kind()),
        ureq::Error::HostNotFound => "host not found".into(),
        ureq::Error::ConnectionFailed => "connection failed".into(),
        ureq::Error::Protocol(p) => format!("HTTP protocol error: {p}"),
        ureq::Error::Tls(t) => format!("TLS error: {t}"),
        ureq::Error::Rustls(r) => format!("TLS error: {r}"),
        ureq::Error::TooManyRedirects => "too many redirects".into(),
        ureq::Error::BadUri(_) => "invalid request URL".into(),
        other => format!("transport error: {other}"),
    };
    GhError::Transport { detail }
}
