//! `ScaleSetClient`: the runner scale set API's operations on the Actions service,
//! through the REST client's transport (`GitHubClient::send_external`). Registration
//! token → admin connection (renewed before its JWT expires, and once after a 401);
//! runner groups, scale sets, message sessions, the long poll, acks, job acquisition,
//! JIT configs for scale set runners, runner lookup and removal. Each exchange but the
//! long poll takes a permit of the REST client's `InFlight`, which the daemon shares
//! among every client of the credential, so job acquisition and JIT configs count
//! toward the target's `max_in_flight` like its REST calls.

use super::admin::{AdminConnection, config_url, registration_url, with_api_version};
use super::error::{Exception, ScaleSetError};
use super::message::{ScaleSetMessage, Statistics, parse_json, parse_message};
use super::types;
use crate::domain::parse_runner_name;
use crate::github::GitHubClient;
use crate::github::client::{ExternalCall, Reply};
use crate::github::pagination::with_query;
use crate::secret::Secret;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

const SERVICE_ACCEPT: &str = "application/json; api-version=6.0-preview";
const SCALE_SETS: &str = "_apis/runtime/runnerscalesets";
const AGENTS: &str = "_apis/distributedtask/pools/0/agents";

/// What a scale set should be: the fields we own on GitHub's side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSetSpec {
    /// Also the label jobs use in `runs-on` to reach the scale set.
    pub name: String,
    pub runner_group_id: i64,
    pub labels: Vec<String>,
    pub disable_update: bool,
}

impl ScaleSetSpec {
    /// The one spec for a scale set named `name` in `runner_group_id`: the name is
    /// also its only label, and its runners never update themselves. The hosts'
    /// `demand=scaleset` profile and the coordinator's `--scaleset` both make theirs
    /// here, so the two cannot disagree.
    pub fn named(name: &str, runner_group_id: i64) -> ScaleSetSpec {
        ScaleSetSpec {
            name: name.to_string(),
            runner_group_id,
            labels: vec![name.to_string()],
            disable_update: true,
        }
    }
}

/// A scale set as the service reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSet {
    pub id: i64,
    pub name: String,
    pub runner_group_id: i64,
    pub labels: Vec<String>,
    pub disable_update: bool,
    pub statistics: Option<Statistics>,
}

impl ScaleSet {
    /// Whether the service's copy already matches `spec` (labels compared as sets,
    /// ignoring case, as GitHub compares labels).
    pub fn matches(&self, spec: &ScaleSetSpec) -> bool {
        self.name == spec.name
            && self.runner_group_id == spec.runner_group_id
            && self.disable_update == spec.disable_update
            && crate::domain::labels::same_set(&self.labels, &spec.labels)
    }
}

impl From<types::ScaleSet> for ScaleSet {
    fn from(s: types::ScaleSet) -> ScaleSet {
        ScaleSet {
            id: s.id,
            name: s.name,
            runner_group_id: s.runner_group_id,
            labels: s.labels.into_iter().map(|l| l.name).collect(),
            disable_update: s.runner_setting.disable_update,
            statistics: s.statistics.map(Statistics::from),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerGroup {
    pub id: i64,
    pub name: String,
}

/// A message session: the queue URL and the queue token (a secret).
#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub queue_url: String,
    pub queue_token: Secret,
    pub statistics: Option<Statistics>,
}

/// A runner registered in a scale set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleSetRunner {
    pub id: i64,
    pub name: String,
    pub scale_set_id: i64,
}

/// The outcome of removing a runner: 404 is what the caller wanted too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Removed {
    Removed,
    AlreadyGone,
}

/// The scale set client of one target. `Send + Sync`; methods take `&self`.
pub struct ScaleSetClient {
    gh: Arc<GitHubClient>,
    config_url: String,
    registration_url: String,
    admin: Mutex<Option<AdminConnection>>,
    /// Longest silence allowed on a long poll's socket (the service holds ~50 s).
    long_poll_read_timeout: Duration,
}

impl std::fmt::Debug for ScaleSetClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScaleSetClient")
            .field("config_url", &self.config_url)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The error a non-2xx service answer means, with the exception it names.
fn service_error(reply: &Reply) -> ScaleSetError {
    let body: Option<types::ErrorBody> = parse_json(&reply.body).ok();
    let (exception, message) = match body {
        Some(b) => {
            let name = b.type_name.or(b.type_key).unwrap_or_default();
            let message = b.message.unwrap_or_default();
            let exception = match Exception::from_text(&name) {
                Exception::Other => Exception::from_text(&message),
                e => e,
            };
            (exception, message)
        }
        None => (Exception::Other, String::new()),
    };
    let mut message: String = message
        .chars()
        .filter(|c| !crate::printable::is_hazard(*c))
        .take(200)
        .collect();
    if message.is_empty() {
        message = "no message".into();
    }
    ScaleSetError::Service {
        status: reply.status,
        exception,
        message,
    }
}

fn ok_or_error(reply: Reply) -> Result<Reply, ScaleSetError> {
    if (200..300).contains(&reply.status) {
        Ok(reply)
    } else {
        Err(service_error(&reply))
    }
}

/// `url` with `/{segment}` appended to its path (before any query).
fn append_path(url: &str, segment: &str) -> String {
    match url.split_once('?') {
        Some((path, query)) => format!("{}/{segment}?{query}", path.trim_end_matches('/')),
        None => format!("{}/{segment}", url.trim_end_matches('/')),
    }
}

impl ScaleSetClient {
    pub fn new(gh: Arc<GitHubClient>) -> ScaleSetClient {
        let config_url = config_url(gh.base_url(), gh.scope());
        let registration_url = registration_url(gh.base_url());
        ScaleSetClient {
            gh,
            config_url,
            registration_url,
            admin: Mutex::new(None),
            long_poll_read_timeout: Duration::from_secs(70),
        }
    }

    /// The REST client underneath (its shutdown channel interrupts waits here too).
    pub fn github(&self) -> &GitHubClient {
        &self.gh
    }

    /// The target's web URL sent to `runner-registration`.
    pub fn config_url(&self) -> &str {
        &self.config_url
    }

    /// The admin connection: cached, renewed when its JWT expires within a minute.
    pub fn admin(&self) -> Result<AdminConnection, ScaleSetError> {
        let mut slot = lock(&self.admin);
        let now = self.gh.now();
        if let Some(c) = slot.as_ref().filter(|c| !c.needs_renewal(now)) {
            return Ok(c.clone());
        }
        let conn = self.register()?;
        *slot = Some(conn.clone());
        Ok(conn)
    }

    fn register(&self) -> Result<AdminConnection, ScaleSetError> {
        let token = self.gh.registration_token(self.gh.scope())?;
        let auth = Secret::new(format!("RemoteAuth {}", token.expose()));
        let body = serde_json::to_vec(&types::RegistrationRequest {
            url: &self.config_url,
            runner_event: "register",
        })
        .expect("strings serialize");
        let reply = self.gh.send_external(&ExternalCall {
            method: "POST",
            url: self.registration_url.clone(),
            authorization: &auth,
            accept: "application/json",
            headers: Vec::new(),
            body: Some(body),
            retry: true,
            read_timeout: None,
            long_poll: false,
        })?;
        if !(200..300).contains(&reply.status) {
            let ScaleSetError::Service {
                status, message, ..
            } = service_error(&reply)
            else {
                unreachable!("service_error builds Service")
            };
            return Err(ScaleSetError::Registration { status, message });
        }
        let r: types::RegistrationResponse = parse_json(&reply.body)?;
        Ok(AdminConnection::new(&r.url, Secret::new(r.token)))
    }

    /// One Actions service call with the admin token; a 401 renews the token once.
    fn service(
        &self,
        method: &'static str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Reply, ScaleSetError> {
        let mut renewed = false;
        loop {
            let admin = self.admin()?;
            let auth = Secret::new(format!("Bearer {}", admin.token.expose()));
            let reply = self.gh.send_external(&ExternalCall {
                method,
                url: admin.endpoint(path),
                authorization: &auth,
                accept: SERVICE_ACCEPT,
                headers: Vec::new(),
                body: body.clone(),
                // A repeated POST could create twice (a session, a runner): only
                // idempotent methods are retried.
                retry: method != "POST",
                read_timeout: None,
                long_poll: false,
            })?;
            if reply.status == 401 && !renewed {
                renewed = true;
                *lock(&self.admin) = None;
                continue;
            }
            return ok_or_error(reply);
        }
    }

    fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
        serde_json::to_vec(v).expect("plain structs serialize")
    }

    /// The runner group with this name (`None` when there is none).
    pub fn runner_group_by_name(&self, name: &str) -> Result<Option<RunnerGroup>, ScaleSetError> {
        let path = with_query("_apis/runtime/runnergroups/", "groupName", name);
        let list: types::List<types::RunnerGroup> =
            parse_json(&self.service("GET", &path, None)?.body)?;
        Ok(list
            .value
            .into_iter()
            .find(|g| g.name.eq_ignore_ascii_case(name))
            .map(|g| RunnerGroup {
                id: g.id,
                name: g.name,
            }))
    }

    /// The scale set with this name in this runner group, if any.
    pub fn scale_set_by_name(
        &self,
        runner_group_id: i64,
        name: &str,
    ) -> Result<Option<ScaleSet>, ScaleSetError> {
        let path = with_query(
            &format!("{SCALE_SETS}?runnerGroupId={runner_group_id}"),
            "name",
            name,
        );
        let list: types::List<types::ScaleSet> =
            parse_json(&self.service("GET", &path, None)?.body)?;
        Ok(list
            .value
            .into_iter()
            .find(|s| s.name == name)
            .map(ScaleSet::from))
    }

    /// The scale set with this id; `None` on 404.
    pub fn scale_set(&self, id: i64) -> Result<Option<ScaleSet>, ScaleSetError> {
        match self.service("GET", &format!("{SCALE_SETS}/{id}"), None) {
            Ok(r) => Ok(Some(parse_json::<types::ScaleSet>(&r.body)?.into())),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn spec_body(spec: &ScaleSetSpec) -> Vec<u8> {
        Self::json(&types::ScaleSet {
            id: 0,
            name: spec.name.clone(),
            runner_group_id: spec.runner_group_id,
            runner_group_name: None,
            labels: spec
                .labels
                .iter()
                .map(|l| types::Label {
                    kind: "System".into(),
                    name: l.clone(),
                })
                .collect(),
            runner_setting: types::RunnerSetting {
                ephemeral: true,
                is_elastic: true,
                disable_update: spec.disable_update,
            },
            statistics: None,
        })
    }

    pub fn create_scale_set(&self, spec: &ScaleSetSpec) -> Result<ScaleSet, ScaleSetError> {
        let r = self.service("POST", SCALE_SETS, Some(Self::spec_body(spec)))?;
        Ok(parse_json::<types::ScaleSet>(&r.body)?.into())
    }

    pub fn update_scale_set(
        &self,
        id: i64,
        spec: &ScaleSetSpec,
    ) -> Result<ScaleSet, ScaleSetError> {
        let r = self.service(
            "PATCH",
            &format!("{SCALE_SETS}/{id}"),
            Some(Self::spec_body(spec)),
        )?;
        Ok(parse_json::<types::ScaleSet>(&r.body)?.into())
    }

    /// Deletes a scale set; 404 counts as done.
    pub fn delete_scale_set(&self, id: i64) -> Result<Removed, ScaleSetError> {
        match self.service("DELETE", &format!("{SCALE_SETS}/{id}"), None) {
            Ok(_) => Ok(Removed::Removed),
            Err(e) if e.is_not_found() => Ok(Removed::AlreadyGone),
            Err(e) => Err(e),
        }
    }

    /// Gets the scale set by name, creating it when missing and updating it when it
    /// differs from `spec`.
    pub fn ensure_scale_set(&self, spec: &ScaleSetSpec) -> Result<ScaleSet, ScaleSetError> {
        match self.scale_set_by_name(spec.runner_group_id, &spec.name)? {
            Some(s) if s.matches(spec) => Ok(s),
            Some(s) => self.update_scale_set(s.id, spec),
            None => self.create_scale_set(spec),
        }
    }

    fn session_from(s: types::Session) -> Session {
        Session {
            id: s.session_id,
            queue_url: s.message_queue_url,
            queue_token: Secret::new(s.message_queue_access_token),
            statistics: s.statistics.map(Statistics::from),
        }
    }

    /// Opens the scale set's message session. 409 (`SessionConflict`) while another
    /// holds it; 404 (`ScaleSetNotFound`) when the scale set is gone.
    pub fn create_session(&self, scale_set_id: i64, owner: &str) -> Result<Session, ScaleSetError> {
        let body = Self::json(&types::SessionRequest { owner_name: owner });
        let r = self.service(
            "POST",
            &format!("{SCALE_SETS}/{scale_set_id}/sessions"),
            Some(body),
        )?;
        Ok(Self::session_from(parse_json(&r.body)?))
    }

    /// Renews the session's queue token; 404 means the session is gone.
    pub fn refresh_session(
        &self,
        scale_set_id: i64,
        session_id: &str,
    ) -> Result<Session, ScaleSetError> {
        let r = self.service(
            "PATCH",
            &format!("{SCALE_SETS}/{scale_set_id}/sessions/{session_id}"),
            // An empty body, so the PATCH carries `Content-Length: 0`.
            Some(Vec::new()),
        )?;
        Ok(Self::session_from(parse_json(&r.body)?))
    }

    /// Ends the session so another holder may open one; 404 counts as done.
    pub fn delete_session(&self, scale_set_id: i64, session_id: &str) -> Result<(), ScaleSetError> {
        match self.service(
            "DELETE",
            &format!("{SCALE_SETS}/{scale_set_id}/sessions/{session_id}"),
            None,
        ) {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The long poll: the next message after `last_message_id`, or `None` when the
    /// service answered 202 (nothing within its hold). A 401 means the queue token
    /// expired; the caller refreshes the session (the listener does).
    pub fn get_message(
        &self,
        session: &Session,
        last_message_id: i64,
        max_capacity: u32,
    ) -> Result<Option<ScaleSetMessage>, ScaleSetError> {
        let mut url = session.queue_url.clone();
        if last_message_id > 0 {
            url = with_query(&url, "lastMessageId", &last_message_id.to_string());
        }
        let auth = Secret::new(format!("Bearer {}", session.queue_token.expose()));
        let reply = self.gh.send_external(&ExternalCall {
            method: "GET",
            url: with_api_version(&url),
            authorization: &auth,
            accept: SERVICE_ACCEPT,
            headers: vec![("x-scalesetmaxcapacity", max_capacity.to_string())],
            body: None,
            retry: true,
            read_timeout: Some(self.long_poll_read_timeout),
            // Held open by the service until a message comes: a wait, not work, so it
            // takes no slot of the credential's requests in flight (see `long_poll`).
            long_poll: true,
        })?;
        match reply.status {
            202 => Ok(None),
            200 => Ok(Some(parse_message(&reply.body)?)),
            _ => Err(service_error(&reply)),
        }
    }

    /// Acknowledges a message so it is not delivered again.
    pub fn delete_message(&self, session: &Session, message_id: i64) -> Result<(), ScaleSetError> {
        let auth = Secret::new(format!("Bearer {}", session.queue_token.expose()));
        let reply = self.gh.send_external(&ExternalCall {
            method: "DELETE",
            url: with_api_version(&append_path(&session.queue_url, &message_id.to_string())),
            authorization: &auth,
            accept: SERVICE_ACCEPT,
            headers: Vec::new(),
            body: None,
            retry: true,
            read_timeout: None,
            long_poll: false,
        })?;
        match reply.status {
            200..=299 | 404 => Ok(()),
            _ => Err(service_error(&reply)),
        }
    }

    /// Acquires offered jobs (`JobAvailable`) by runner request id; returns the ids
    /// the service granted. Uses the session's queue token.
    pub fn acquire_jobs(
        &self,
        scale_set_id: i64,
        session: &Session,
        request_ids: &[i64],
    ) -> Result<Vec<i64>, ScaleSetError> {
        let admin = self.admin()?;
        let auth = Secret::new(format!("Bearer {}", session.queue_token.expose()));
        let reply = self.gh.send_external(&ExternalCall {
            method: "POST",
            url: admin.endpoint(&format!("{SCALE_SETS}/{scale_set_id}/acquirejobs")),
            authorization: &auth,
            accept: SERVICE_ACCEPT,
            headers: Vec::new(),
            body: Some(Self::json(&request_ids)),
            // Acquiring twice is harmless: the service grants each id once.
            retry: true,
            read_timeout: None,
            long_poll: false,
        })?;
        let reply = ok_or_error(reply)?;
        let list: types::List<i64> = parse_json(&reply.body)?;
        Ok(list.value)
    }

    /// Registers a runner in the scale set and returns its encoded JIT config.
    /// Sent once: a repeat of a completed POST collides (`AgentExists`).
    pub fn generate_jit_config(
        &self,
        scale_set_id: i64,
        name: &str,
        work_folder: &str,
    ) -> Result<(ScaleSetRunner, Secret), ScaleSetError> {
        let body = Self::json(&types::JitRequest { name, work_folder });
        let r = self.service(
            "POST",
            &format!("{SCALE_SETS}/{scale_set_id}/generatejitconfig"),
            Some(body),
        )?;
        let parsed: types::JitResponse = parse_json(&r.body)?;
        Ok((
            ScaleSetRunner {
                id: parsed.runner.id,
                name: parsed.runner.name,
                scale_set_id: parsed.runner.runner_scale_set_id,
            },
            Secret::new(parsed.encoded_jit_config),
        ))
    }

    /// [`generate_jit_config`](Self::generate_jit_config), and when the name is
    /// taken: looks the runner up, removes it if it is ours (its name parses with
    /// `host_id`), and tries once more. A foreign runner's name is never removed.
    pub fn generate_jit_config_replacing_ours(
        &self,
        scale_set_id: i64,
        host_id: &str,
        name: &str,
        work_folder: &str,
    ) -> Result<(ScaleSetRunner, Secret), ScaleSetError> {
        match self.generate_jit_config(scale_set_id, name, work_folder) {
            Err(e) if e.exception() == Some(&Exception::AgentExists) => {
                if parse_runner_name(host_id, name).is_none() {
                    return Err(e);
                }
                if let Some(old) = self.runner_by_name(name)? {
                    self.remove_runner(old.id)?;
                }
                self.generate_jit_config(scale_set_id, name, work_folder)
            }
            other => other,
        }
    }

    /// A runner by its exact name.
    pub fn runner_by_name(&self, name: &str) -> Result<Option<ScaleSetRunner>, ScaleSetError> {
        let path = with_query(AGENTS, "agentName", name);
        let list: types::List<types::RunnerReference> =
            parse_json(&self.service("GET", &path, None)?.body)?;
        Ok(list
            .value
            .into_iter()
            .find(|r| r.name == name)
            .map(|r| ScaleSetRunner {
                id: r.id,
                name: r.name,
                scale_set_id: r.runner_scale_set_id,
            }))
    }

    /// Removes a runner registration; 404 counts as done.
    pub fn remove_runner(&self, id: i64) -> Result<Removed, ScaleSetError> {
        match self.service("DELETE", &format!("{AGENTS}/{id}"), None) {
            Ok(_) => Ok(Removed::Removed),
            Err(e) if e.is_not_found() => Ok(Removed::AlreadyGone),
            Err(e) => Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        assert_eq!(
            append_path("http://h/q?sessionId=a", "5"),
            "http://h/q/5?sessionId=a"
        );
        assert_eq!(append_path("http://h/q/", "5"), "http://h/q/5");
        assert_eq!(with_query("p?x=1", "name", "a b/c"), "p?x=1&name=a%20b%2Fc");
        assert_eq!(with_query("p", "n", "ok"), "p?n=ok");
    }

    #[test]
    fn spec_matching_ignores_label_order_and_case() {
        let s = ScaleSet {
            id: 1,
            name: "n".into(),
            runner_group_id: 1,
            labels: vec!["A".into(), "b".into()],
            disable_update: true,
            statistics: None,
        };
        let mut spec = ScaleSetSpec {
            name: "n".into(),
            runner_group_id: 1,
            labels: vec!["b".into(), "a".into()],
            disable_update: true,
        };
        assert!(s.matches(&spec));
        spec.disable_update = false;
        assert!(!s.matches(&spec));
    }
}
