//! Shared fixtures: a sim with a repository and a PAT, clients on it, temp dirs, and
//! polling a condition with a deadline (never a sleep).

use crossbeam_channel::Sender;
use runner_manager::domain::{CredentialRef, Target, TargetScope};
use runner_manager::github::{
    ClientConfig, Credential, GitHubClient, InFlight, RetryPolicy, SystemClock,
};
use runner_manager::scaleset::{ListenerConfig, ScaleSetClient, ScaleSetSpec};
use runner_manager::secret::Secret;
use runner_manager::sim::{SimConfig, SimGitHub, SimHandle};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

pub const PAT: &str = "ghp_scalesetTESTtoken";
pub const REPO: &str = "octo/app";
pub const HOST_ID: &str = "0123456789abcdef";
pub const DEADLINE: Duration = Duration::from_secs(20);

pub struct Env {
    pub sim: SimHandle,
    pub client: Arc<ScaleSetClient>,
    /// Dropping it interrupts the client's waits.
    pub _shutdown: Sender<()>,
}

pub fn target(url: &str) -> Target {
    Target {
        name: "t".into(),
        scope: TargetScope::Repo {
            owner: "octo".into(),
            repo: "app".into(),
        },
        api_url: url.into(),
        credential: CredentialRef::TokenEnv {
            var: "GH_TOKEN".into(),
        },
        poll_interval_secs: 5,
        repos: vec![],
        max_in_flight: 8,
        secondary_limit: Some(900),
    }
}

/// A sim whose long poll holds `hold_ms`, and a scale set client on it.
pub fn env(hold_ms: u64) -> Env {
    let sim = SimGitHub::start(SimConfig::default()).unwrap();
    sim.add_repo(REPO, true);
    sim.add_pat(PAT);
    sim.scaleset_config(|c| c.hold_ms = hold_ms);
    let client = new_client(&sim);
    Env {
        sim,
        client: client.0,
        _shutdown: client.1,
    }
}

pub fn new_client(sim: &SimHandle) -> (Arc<ScaleSetClient>, Sender<()>) {
    new_client_in(sim, InFlight::default())
}

/// A scale set client whose requests take their permits from `limiter`.
pub fn new_client_in(sim: &SimHandle, limiter: InFlight) -> (Arc<ScaleSetClient>, Sender<()>) {
    let (tx, rx) = crossbeam_channel::bounded(1);
    let config = ClientConfig {
        connect_timeout: Duration::from_secs(2),
        read_timeout: Duration::from_secs(5),
        call_timeout: Duration::from_secs(10),
        retry: RetryPolicy {
            tries: 3,
            base: Duration::from_millis(2),
            cap: Duration::from_millis(10),
        },
        ..ClientConfig::default()
    };
    let gh = GitHubClient::with_config(
        &target(sim.url()),
        Credential::Token(Secret::new(PAT)),
        config,
        Arc::new(SystemClock::default()),
    )
    .with_shutdown(rx)
    .with_in_flight(limiter);
    (Arc::new(ScaleSetClient::new(Arc::new(gh))), tx)
}

pub fn spec(name: &str) -> ScaleSetSpec {
    ScaleSetSpec {
        name: name.into(),
        runner_group_id: 1,
        labels: vec![name.into()],
        disable_update: true,
    }
}

/// A listener config with millisecond backoffs.
pub fn listener_config(name: &str) -> ListenerConfig {
    let mut c = ListenerConfig::new("t", "runner-manager@test", spec(name), 5);
    c.backoff = RetryPolicy {
        tries: u32::MAX,
        base: Duration::from_millis(20),
        cap: Duration::from_millis(100),
    };
    c
}

#[path = "../common/poll.rs"]
mod poll;
pub use poll::wait_for;

pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let p = std::env::temp_dir().join(format!("rm-scaleset-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
