//! The transport: one `GitHubClient` per target and credential. Headers, timeouts, the
//! body cap, retries with backoff, rate-limit gating, the bound on requests in flight,
//! the ETag cache, App tokens.
//!
//! Here: the settings, the call loop (gate, permit, retries, what a status means) and the
//! client's state. One exchange on the wire is `wire`, the App's token `app_token`, GETs,
//! pages and the ETag cache `reads`.

mod app_token;
mod reads;
mod wire;

pub(crate) use wire::ExternalCall;

use super::auth::{Credential, InstallationToken};
use super::error::GhError;
use super::etag::EtagCache;
use super::headers::{Headers, parse_http_date};
use super::inflight::{AcquireError, InFlight, Permit};
use super::jwt::app_jwt;
use super::pagination::{MAX_PAGES, origin};
use super::ratelimit::{RateLimitSnapshot, SharedHold, limited_until};
use super::retry::{Clock, RetryPolicy, SystemClock};
use super::secondary::{self, SharedPoints};
use super::types;
use crate::domain::{Target, TargetScope};
use crate::reconcile::points::Ticket;
use crate::secret::Secret;
use crate::timefmt::Millis;
use crossbeam_channel::{Receiver, RecvTimeoutError};
use serde::de::DeserializeOwned;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

pub const API_VERSION: &str = "2022-11-28";
pub const USER_AGENT: &str = concat!("runner-manager/", env!("CARGO_PKG_VERSION"));
/// Each pooled connection's read buffer: a response's head must fit (GitHub's are a
/// few kB; ureq refuses a head over 64 kB anyway), the body streams through it.
const INPUT_BUFFER: usize = 64 * 1024;
/// Each pooled connection's write buffer: a request's head, and its body in chunks.
const OUTPUT_BUFFER: usize = 16 * 1024;

/// Transport settings. The defaults suit GitHub; tests shorten them.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    pub connect_timeout: Duration,
    /// Longest silence on a socket read before the call fails (and may be retried).
    pub read_timeout: Duration,
    /// Bound on one whole exchange, so a server trickling bytes cannot hold a pass.
    pub call_timeout: Duration,
    /// Response bodies larger than this (after decompression) are refused.
    pub body_limit: u64,
    pub retry: RetryPolicy,
    /// Pages followed by one listing before it is cut short.
    pub max_pages: usize,
    /// Longest wait for a turn among the credential's requests in flight before the
    /// call fails (transient). A permit is held for one exchange, which `call_timeout`
    /// bounds, so only a credential whose every slot hangs waits this long.
    pub permit_timeout: Duration,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(30),
            call_timeout: Duration::from_secs(60),
            body_limit: 8 * 1024 * 1024,
            retry: RetryPolicy::default(),
            max_pages: MAX_PAGES,
            permit_timeout: Duration::from_secs(60),
        }
    }
}

/// Counters for benchmarks and `status`: `requests - not_modified` is what the
/// primary rate limit was charged.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Responses received (any status).
    pub requests: u64,
    /// Of which 304 Not Modified.
    pub not_modified: u64,
    /// GETs answered with something other than a 304 on the credential's own budget
    /// (what reading costs in rate-limit units; `GET /rate_limit` is free).
    pub get_units: u64,
    /// Calls refused locally because the credential was rate limited.
    pub refused_while_limited: u64,
    /// Retries after a 5xx or a transport error.
    pub retries: u64,
    /// Installation tokens minted.
    pub tokens_minted: u64,
    /// Secondary rate limits GitHub answered (403 or 429 saying so): the goal is 0.
    pub secondary_hits: u64,
    /// Requests that waited for their endpoint's points (`reconcile::points`).
    pub paced_waits: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    /// The PAT or the App's installation token.
    Bearer,
    /// The App's own JWT (installation lookup, token minting).
    AppJwt,
}

/// Told of every response the REST API sends: the path template (`endpoint::template_of`)
/// and the status. Metrics count requests with it; it must be quick and never block.
pub type Observer = Arc<dyn Fn(&str, u16) + Send + Sync>;

/// One logical request, maybe sent several times.
pub(crate) struct Call {
    pub method: &'static str,
    /// Absolute URL, on the API's origin.
    pub url: String,
    pub body: Option<Vec<u8>>,
    pub auth: Auth,
    /// Retry 5xx and transport errors. Off for a POST whose repeat would collide.
    pub retry: bool,
    /// Send `If-None-Match` and keep the ETag.
    pub conditional: bool,
    /// `GET /rate_limit` is free and answers while limited.
    pub ignore_limit: bool,
}

impl Call {
    pub fn get(url: String) -> Call {
        Call {
            method: "GET",
            url,
            body: None,
            auth: Auth::Bearer,
            retry: true,
            conditional: true,
            ignore_limit: false,
        }
    }

    pub fn post(url: String, body: Vec<u8>) -> Call {
        Call {
            method: "POST",
            body: Some(body),
            conditional: false,
            ..Call::get(url)
        }
    }

    pub fn delete(url: String) -> Call {
        Call {
            method: "DELETE",
            conditional: false,
            ..Call::get(url)
        }
    }
}

/// A response the caller can use: a 2xx, or a 304 answered from the cache (as 200).
#[derive(Debug)]
pub(crate) struct Reply {
    pub status: u16,
    pub headers: Headers,
    pub body: Vec<u8>,
}

/// One sending of a call: an answer, or a transport failure the call may retry.
enum Exchange {
    Answered { reply: Reply, message: String },
    Lost(GhError),
}

/// What the call does after an answer.
enum Step {
    Done(Result<Reply, GhError>),
    /// A 5xx the retry policy allows: back off and send again.
    Retry,
    /// A 401 to an App's installation token: mint a new one and send again, once.
    Refresh,
}

#[derive(Default)]
struct State {
    rate: RateLimitSnapshot,
    /// Header-less rate limits in a row, for the exponential wait.
    strikes: u32,
    etags: EtagCache,
    last_date: Option<Millis>,
    /// When GitHub says the token expires (`github-authentication-token-expiration`).
    token_expires: Option<Millis>,
    stats: ClientStats,
    installation_id: Option<u64>,
}

/// The GitHub REST client of one target. `Send + Sync`: methods take `&self`, state is
/// behind locks never held across a request (except the token lock, held while one
/// token is minted so concurrent callers share it).
pub struct GitHubClient {
    agent: ureq::Agent,
    base: String,
    origin: String,
    pub(crate) scope: TargetScope,
    credential: Credential,
    config: ClientConfig,
    clock: Arc<dyn Clock>,
    shutdown: Option<Receiver<()>>,
    observer: Option<Observer>,
    /// The credential's hold, shared with its other clients.
    shared_hold: Option<SharedHold>,
    /// The credential's bound on requests in flight, shared with its other clients
    /// (a client of its own until `with_in_flight`).
    in_flight: InFlight,
    /// The credential's secondary-limit points, shared with its other clients (a book
    /// of its own until `with_points`).
    points: SharedPoints,
    state: Mutex<State>,
    token: Mutex<Option<InstallationToken>>,
    pub(crate) hooks: Option<super::hooks::SharedBook>,
}

impl std::fmt::Debug for GitHubClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GitHubClient")
            .field("base", &self.base)
            .field("scope", &self.scope)
            .field("credential", &self.credential)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not wedge the client; the state stays usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl GitHubClient {
    pub fn new(target: &Target, credential: Credential) -> GitHubClient {
        GitHubClient::with_config(
            target,
            credential,
            ClientConfig::default(),
            Arc::new(SystemClock::default()),
        )
    }

    pub fn with_config(
        target: &Target,
        credential: Credential,
        config: ClientConfig,
        clock: Arc<dyn Clock>,
    ) -> GitHubClient {
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(USER_AGENT)
            .accept("application/vnd.github+json")
            .timeout_connect(Some(config.connect_timeout))
            .timeout_per_read(Some(config.read_timeout))
            .timeout_per_call(Some(config.call_timeout))
            // GitHub redirects renamed repositories; ureq drops Authorization on a
            // redirect to another host by default.
            .max_redirects(3)
            // A pooled connection keeps both buffers, touched whole, as long as it
            // lives: ureq's 128 kB each were a quarter of an idle target's memory
            // (issue 32). GitHub's response heads are a few kB and bodies stream
            // through; our requests are smaller still.
            .input_buffer_size(INPUT_BUFFER)
            .output_buffer_size(OUTPUT_BUFFER)
            .build()
            .new_agent();
        let base = target.api_url.trim_end_matches('/').to_string();
        GitHubClient {
            agent,
            origin: origin(&base).unwrap_or_default(),
            base,
            scope: target.scope.clone(),
            credential,
            config,
            clock,
            shutdown: None,
            observer: None,
            shared_hold: None,
            in_flight: InFlight::default(),
            points: SharedPoints::default(),
            state: Mutex::new(State::default()),
            token: Mutex::new(None),
            hooks: None,
        }
    }

    /// Shares the rate-limit hold with the other clients of the same credential: each
    /// refuses to send while any of them is held.
    pub fn with_shared_hold(mut self, hold: SharedHold) -> GitHubClient {
        self.shared_hold = Some(hold);
        self
    }

    /// Shares the bound on requests in flight with the other clients of the same
    /// credential (the loop's, its workers', the scale set clients'): each HTTP
    /// exchange of any of them takes one of `limiter`'s permits. Without it, a client
    /// has a limiter of its own with the default limit.
    pub fn with_in_flight(mut self, limiter: InFlight) -> GitHubClient {
        self.in_flight = limiter;
        self
    }

    /// Shares the book of secondary-limit points with the other clients of the same
    /// credential: each REST request is charged to its route before it is sent.
    pub fn with_points(mut self, points: SharedPoints) -> GitHubClient {
        self.points = points;
        self
    }

    /// The credential's book of secondary-limit points.
    pub fn points(&self) -> &SharedPoints {
        &self.points
    }

    /// The limiter this client's requests take their permits from (its `usage()` for
    /// metrics and benchmarks).
    pub fn in_flight(&self) -> &InFlight {
        &self.in_flight
    }

    /// Backoff waits, and waits for a permit, end early (with
    /// [`GhError::Interrupted`]) when this channel receives or disconnects.
    pub fn with_shutdown(mut self, shutdown: Receiver<()>) -> GitHubClient {
        self.shutdown = Some(shutdown);
        self
    }

    /// Every response of the REST API (not the scale set service) is reported to
    /// `observer`, retried ones included, before it is interpreted.
    pub fn with_observer(mut self, observer: Observer) -> GitHubClient {
        self.observer = Some(observer);
        self
    }

    /// Journals the ETag cache's changes for [`GitHubClient::take_etag_changes`], for
    /// an owner that keeps the cache (the daemon's store). Without it nothing is
    /// journaled, since nothing would take it.
    pub fn with_etag_journal(self) -> GitHubClient {
        lock(&self.state).etags.keep_journal();
        self
    }

    pub fn base_url(&self) -> &str {
        &self.base
    }

    pub fn scope(&self) -> &TargetScope {
        &self.scope
    }

    pub(crate) fn now(&self) -> Millis {
        self.clock.now()
    }

    pub(crate) fn credential(&self) -> &Credential {
        &self.credential
    }

    /// Sends nothing before `until`: a hold that outlived the previous client (a
    /// `retry-after` or a rate-limit reset recorded before a daemon restart).
    pub fn hold_until(&self, until: Millis) {
        let mut st = lock(&self.state);
        if st.rate.limited_until.is_none_or(|u| u < until) {
            st.rate.limited_until = Some(until);
        }
        if let Some(h) = &self.shared_hold {
            h.raise(until);
        }
    }

    /// The rate-limit headers of the last response, and any local hold.
    pub fn rate_limit_snapshot(&self) -> RateLimitSnapshot {
        lock(&self.state).rate.clone()
    }

    pub fn stats(&self) -> ClientStats {
        lock(&self.state).stats
    }

    /// The server's `Date` of the last response, for a clock-skew check.
    pub fn last_date(&self) -> Option<Millis> {
        lock(&self.state).last_date
    }

    /// When GitHub last said the token expires, if it did (a PAT with an expiry).
    pub fn token_expires_at(&self) -> Option<Millis> {
        lock(&self.state).token_expires
    }

    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Sends a call: gates on the rate limit, authenticates, retries, caches.
    pub(crate) fn call(&self, c: &Call) -> Result<Reply, GhError> {
        let mut tried = 0u32;
        let mut refreshed = false;
        loop {
            tried += 1;
            let (reply, message) = match self.try_once(c)? {
                Exchange::Answered { reply, message } => (reply, message),
                Exchange::Lost(e) => {
                    if c.retry && self.config.retry.should_retry(tried) {
                        self.backoff(tried)?;
                        continue;
                    }
                    return Err(e);
                }
            };
            match self.answer(c, reply, message, tried, refreshed) {
                Step::Done(result) => return result,
                Step::Retry => self.backoff(tried)?,
                Step::Refresh => {
                    // The installation token may have been revoked early: mint a new
                    // one, once.
                    refreshed = true;
                    *lock(&self.token) = None;
                    tried -= 1;
                }
            }
        }
    }

    /// One sending of `c`: the gate, the credential, a permit, the request, and the
    /// answer recorded (statistics, rate limit, hold). The permit is given back when
    /// this returns: after a transport error, before any backoff's sleep; after an
    /// answer, only once a rate limit it carries was raised, since the next in line
    /// checks the hold after taking this permit.
    fn try_once(&self, c: &Call) -> Result<Exchange, GhError> {
        let now = self.now();
        if !c.ignore_limit {
            self.gate(now)?;
        }
        // Before the permit: minting a token is a request of its own, which takes
        // its own permit (holding one here could wait on itself at a limit of 1).
        let auth = self.authorization(c.auth, now)?;
        // Charged before the permit (a charge counts until its answer, so waiting for
        // a permit only counts it longer), settled when this returns.
        let _charge = Charged {
            client: self,
            ticket: self.charge(c)?,
        };
        let jit = c.method == "POST" && self.endpoint(c).ends_with("/generate-jitconfig");
        let _permit = self.permit(jit)?;
        // A hold raised while this call waited for its turn (another request met a
        // `retry-after`) stops it here: nothing is sent after a hold, even by a
        // request that was already queued when it came.
        if !c.ignore_limit {
            self.gate(self.now())?;
        }
        let etag = if c.conditional {
            lock(&self.state).etags.etag(&c.url).map(str::to_string)
        } else {
            None
        };
        let reply = match self.send_once(c, &auth, etag.as_deref()) {
            Ok(r) => r,
            Err(e @ GhError::Transport { .. }) => return Ok(Exchange::Lost(e)),
            Err(e) => return Err(e),
        };
        if let Some(observe) = &self.observer {
            let path = c.url.strip_prefix(&self.base).unwrap_or("");
            observe(super::endpoint::template_of(path), reply.status);
        }
        let message = error_message(reply.status, &reply.body);
        self.record(c, &reply, &message)?;
        Ok(Exchange::Answered { reply, message })
    }

    /// The `Authorization` secret a call of this kind carries.
    fn authorization(&self, auth: Auth, now: Millis) -> Result<Secret, GhError> {
        match auth {
            Auth::Bearer => self.bearer(),
            Auth::AppJwt => match &self.credential {
                Credential::App { app_id, key, .. } => Ok(app_jwt(key, *app_id, now)),
                Credential::Token(_) => Err(GhError::Unauthorized { clock_hint: false }),
            },
        }
    }

    /// Records an answer in the client's state: statistics, the server's date, the
    /// rate-limit headers, and any hold it carries (raised for the credential's other
    /// clients too). A 403 or 429 that limits the credential fails the call.
    fn record(&self, c: &Call, reply: &Reply, message: &str) -> Result<(), GhError> {
        let mut st = lock(&self.state);
        st.stats.requests += 1;
        if reply.status == 304 {
            st.stats.not_modified += 1;
        } else if c.method == "GET" && c.auth == Auth::Bearer && !c.ignore_limit {
            st.stats.get_units += 1;
        }
        if let Some(d) = reply.headers.get("date").and_then(parse_http_date) {
            st.last_date = Some(d);
        }
        // The JWT has its own budget; this snapshot is the installation's or the PAT's.
        if c.auth == Auth::Bearer {
            st.rate.update(&reply.headers);
            // GitHub's count of the credential's requests, every host's: this host's
            // share of it (a 304 or a refusal is not counted).
            if let (Some(used), Some(reset)) = (
                reply.headers.get_u64("x-ratelimit-used"),
                reply.headers.get_u64("x-ratelimit-reset"),
            ) {
                let counted = !matches!(reply.status, 304 | 403 | 429);
                self.points
                    .book()
                    .observe_used(used, reset as Millis * 1000, counted, self.now());
            }
            if let Some(at) = reply
                .headers
                .get("github-authentication-token-expiration")
                .and_then(super::headers::parse_token_expiration)
            {
                st.token_expires = Some(at);
            }
        }
        let strikes = st.strikes;
        // A `retry-after` counts from when the answer came, not from when the request
        // left: a slow answer must not shorten the wait.
        let answered = self.now();
        match limited_until(reply.status, &reply.headers, message, answered, strikes) {
            Some(until) => {
                if secondary::is_secondary(reply.status, &reply.headers, message) {
                    st.stats.secondary_hits += 1;
                    self.points.book().hit(self.endpoint(c), until);
                }
                st.rate.limited_until = Some(until);
                if let Some(h) = &self.shared_hold {
                    h.raise(until);
                }
                if matches!(reply.status, 403 | 429) {
                    st.strikes = strikes.saturating_add(1);
                    return Err(GhError::RateLimited { until });
                }
            }
            None if reply.status < 400 => {
                st.strikes = 0;
                st.rate.limited_until = None;
            }
            None => {}
        }
        Ok(())
    }

    /// What an answer means for the call: a reply, an error, or another try.
    fn answer(&self, c: &Call, reply: Reply, message: String, tried: u32, refreshed: bool) -> Step {
        let result = match reply.status {
            200..=299 => {
                if c.conditional {
                    self.keep_etag(&c.url, &reply);
                }
                Ok(reply)
            }
            304 => self.cached_reply(&c.url),
            401 => {
                let app = matches!(self.credential, Credential::App { .. });
                if app && c.auth == Auth::Bearer && !refreshed {
                    return Step::Refresh;
                }
                Err(GhError::Unauthorized {
                    clock_hint: c.auth == Auth::AppJwt,
                })
            }
            403 => Err(GhError::Forbidden { message }),
            404 => Err(GhError::NotFound),
            409 => Err(GhError::Conflict { message }),
            410 => Err(GhError::Gone),
            422 => Err(GhError::Unprocessable { message }),
            s @ 500..=599 => {
                if c.retry && self.config.retry.should_retry(tried) {
                    return Step::Retry;
                }
                Err(GhError::Server { status: s })
            }
            s => Err(GhError::Unexpected { status: s }),
        };
        Step::Done(result)
    }

    /// Refuses to send while the credential is held (this client's hold or the one
    /// its credential's clients share).
    fn gate(&self, now: Millis) -> Result<(), GhError> {
        let mut st = lock(&self.state);
        let shared = self.shared_hold.as_ref().map(SharedHold::until);
        if let Some(until) = st.rate.limited_until.max(shared).filter(|u| *u > now) {
            st.stats.refused_while_limited += 1;
            return Err(GhError::RateLimited { until });
        }
        Ok(())
    }

    /// The route `c` is charged to.
    fn endpoint(&self, c: &Call) -> &'static str {
        super::endpoint::template_of(c.url.strip_prefix(&self.base).unwrap_or(""))
    }

    /// Charges `c`'s points to its route, waiting (interruptibly, and never past a
    /// hold raised meanwhile) until they fit; `None` for a call that is never held.
    fn charge(&self, c: &Call) -> Result<Option<Ticket>, GhError> {
        if c.ignore_limit {
            return Ok(None);
        }
        let endpoint = self.endpoint(c);
        // A clock that does not move (a test's) must not wait forever.
        for _ in 0..MAX_PACED_WAITS {
            let now = self.now();
            let until = match self.points.book().admit(endpoint, c.method, now) {
                Ok(t) => return Ok(Some(t)),
                Err(until) => until,
            };
            lock(&self.state).stats.paced_waits += 1;
            self.wait(Duration::from_millis(
                (until - now).clamp(1, PACED_SLICE_MS) as u64,
            ))?;
            self.gate(self.now())?;
        }
        Err(GhError::Transport {
            detail: format!("{endpoint}: GitHub's per-minute points for it stayed spent"),
        })
    }

    /// This request's turn among the credential's requests in flight: waits in line,
    /// ends early on shutdown, and gives up after `permit_timeout`. One that `yields` (a
    /// runner's REST JIT config) lets the other requests waiting go first: a burst's starts (half a second each,
    /// and paced by GitHub's points) must not hold up the queue reads and the cleanups
    /// (issue 37: a 300-run burst's first read took 5.4 s sharing the slots with 174
    /// JIT configs).
    fn permit(&self, yields: bool) -> Result<Permit, GhError> {
        let deadline = Instant::now() + self.config.permit_timeout;
        let shutdown = self.shutdown.as_ref();
        if yields {
            self.in_flight.acquire_yielding(shutdown, deadline)
        } else {
            self.in_flight.acquire(shutdown, deadline)
        }
        .map_err(|e| match e {
            AcquireError::Interrupted => GhError::Interrupted,
            AcquireError::TimedOut => GhError::Transport {
                detail: format!(
                    "no request slot came free within {} s; all {} of this credential's \
                         requests in flight are still waiting for answers",
                    self.config.permit_timeout.as_secs(),
                    self.in_flight.limit()
                ),
            },
        })
    }

    fn backoff(&self, tried: u32) -> Result<(), GhError> {
        lock(&self.state).stats.retries += 1;
        let d = self.config.retry.delay(tried - 1, self.clock.jitter());
        self.wait(d)
    }

    /// Waits, interruptibly when a shutdown channel is set; never a bare sleep.
    fn wait(&self, d: Duration) -> Result<(), GhError> {
        let rx = match &self.shutdown {
            Some(rx) => rx.clone(),
            None => crossbeam_channel::never(),
        };
        match rx.recv_timeout(d) {
            Err(RecvTimeoutError::Timeout) => Ok(()),
            _ => Err(GhError::Interrupted),
        }
    }

    /// Waits like a retry backoff: interruptible by the shutdown channel, never a bare
    /// sleep. For callers with their own retry decisions (a scale set session conflict).
    pub(crate) fn wait_interruptibly(&self, d: Duration) -> Result<(), GhError> {
        self.wait(d)
    }

    /// A number in [0, 1) from the client's clock, for callers' own jittered waits.
    pub(crate) fn jitter(&self) -> f64 {
        self.clock.jitter()
    }
}

/// Settles a request's points when the request is done with, however it ended.
struct Charged<'a> {
    client: &'a GitHubClient,
    ticket: Option<Ticket>,
}

impl Drop for Charged<'_> {
    fn drop(&mut self) {
        if let Some(t) = &self.ticket {
            self.client.points.book().settle(t, self.client.now());
        }
    }
}

/// The longest one wait for an endpoint's points lasts before the hold and the book
/// are looked at again, and how many such waits a request makes at most.
const PACED_SLICE_MS: Millis = 5_000;
const MAX_PACED_WAITS: u32 = 40;

pub(crate) fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, GhError> {
    serde_json::from_slice(body).map_err(|e| GhError::Malformed {
        detail: json_error_detail(&e),
    })
}

/// What a JSON parse error says in our errors: only its category and position, since
/// serde's own message can quote a value (and a value can be a secret).
pub(crate) fn json_error_detail(e: &serde_json::Error) -> String {
    format!(
        "{} JSON at line {} column {}",
        match e.classify() {
            serde_json::error::Category::Eof => "truncated",
            serde_json::error::Category::Syntax => "invalid",
            serde_json::error::Category::Data => "unexpected",
            serde_json::error::Category::Io => "unreadable",
        },
        e.line(),
        e.column()
    )
}

/// GitHub's `message` of an error body, shortened, for error text.
fn error_message(status: u16, body: &[u8]) -> String {
    if status < 400 {
        return String::new();
    }
    let msg = serde_json::from_slice::<types::ErrorBody>(body)
        .ok()
        .and_then(|b| b.message)
        .unwrap_or_else(|| "no message".to_string());
    let mut msg: String = msg
        .chars()
        .filter(|c| !crate::printable::is_hazard(*c))
        .take(200)
        .collect();
    if msg.is_empty() {
        msg = "no message".into();
    }
    msg
}
