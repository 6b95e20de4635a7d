//! Shared fixtures of the GitHub client tests: a fixed clock, targets and clients.

use runner_manager::domain::{CredentialRef, Target, TargetScope};
use runner_manager::github::{ClientConfig, Clock, Credential, GitHubClient, RetryPolicy};
use runner_manager::secret::Secret;
use runner_manager::timefmt::Millis;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

pub const TOKEN: &str = "ghp_TESTSECRETtoken0123456789";
pub const T0: Millis = 1_800_000_000_000;

/// A wall clock the test moves by hand; jitter fixed at the middle.
pub struct TestClock(AtomicI64);

impl TestClock {
    pub fn advance(&self, ms: Millis) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn now(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
    fn jitter(&self) -> f64 {
        0.5
    }
}

/// An empty runner list, GitHub's shape.
pub const RUNNERS: &str = r#"{"total_count":0,"runners":[]}"#;

/// The repository `octo/app` every test's target covers.
pub fn scope() -> TargetScope {
    TargetScope::Repo {
        owner: "octo".into(),
        repo: "app".into(),
    }
}

pub fn repo_target(api_url: &str) -> Target {
    Target {
        name: "t".into(),
        scope: scope(),
        api_url: api_url.into(),
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    }
}

pub fn org_target(api_url: &str) -> Target {
    Target {
        scope: TargetScope::Org { org: "acme".into() },
        ..repo_target(api_url)
    }
}

/// Short timeouts and tiny backoffs so fault tests take milliseconds.
pub fn test_config() -> ClientConfig {
    ClientConfig {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_millis(300),
        call_timeout: Duration::from_secs(5),
        body_limit: 64 * 1024,
        retry: RetryPolicy {
            tries: 3,
            base: Duration::from_millis(2),
            cap: Duration::from_millis(10),
        },
        max_pages: 100,
        permit_timeout: Duration::from_secs(5),
    }
}

pub fn client_for(target: &Target, cred: Credential) -> (GitHubClient, Arc<TestClock>) {
    client_with(target, cred, test_config())
}

pub fn client_with(
    target: &Target,
    cred: Credential,
    config: ClientConfig,
) -> (GitHubClient, Arc<TestClock>) {
    let clock = Arc::new(TestClock(AtomicI64::new(T0)));
    let c = GitHubClient::with_config(target, cred, config, clock.clone());
    (c, clock)
}

pub fn pat_cred() -> Credential {
    Credential::Token(Secret::new(TOKEN))
}

pub fn pat_client(url: &str) -> (GitHubClient, Arc<TestClock>) {
    client_for(&repo_target(url), pat_cred())
}

/// A fixture's path. Key files (`*.pem`) come as a private copy (0600): a checkout
/// leaves them 0644, and the daemon refuses a key others can read.
pub fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/github/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    if !name.ends_with(".pem") {
        return path;
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("rm-fixtures-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join(name);
    // Tests run in parallel and share the copy: each writes its own, then renames it
    // into place, so a reader never sees one half-written (a copy in place truncates
    // the file another test is loading).
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::SeqCst);
    let fresh = dir.join(format!("{name}.{n}.tmp"));
    std::fs::copy(&path, &fresh).unwrap();
    std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::rename(&fresh, &copy).unwrap();
    copy.display().to_string()
}

pub fn runner_json(id: i64, name: &str) -> String {
    format!(
        r#"{{"id":{id},"name":"{name}","os":"linux","status":"online","busy":false,"ephemeral":true,"runner_group_id":1,"labels":[{{"id":1,"name":"self-hosted","type":"read-only"}},{{"id":2,"name":"gpu","type":"custom"}}]}}"#
    )
}
