//! Every option declared once, as a constant in the module of the command that takes
//! it (ripgrep's `flags/defs.rs`): the table's rows list them, and a handler reads one
//! through it (`inv.value(&opts::profile_add::MAX)`), so a misspelt option does not
//! compile. An option named alike in two commands with another help is another
//! constant; the name of a constant is its option's (`--no-start`: `NO_START`).

use super::Opt;

const fn opt(name: &'static str, value: &'static str, help: &'static str) -> Opt {
    Opt {
        name,
        value: Some(value),
        help,
    }
}

const fn switch(name: &'static str, help: &'static str) -> Opt {
    Opt {
        name,
        value: None,
        help,
    }
}

/// The global options: before or after any command.
pub mod global {
    use super::{Opt, opt, switch};

    pub const STATE_DIR: Opt = opt(
        "--state-dir",
        "DIR",
        "State directory (env RUNNER_MANAGER_STATE_DIR; default /var/lib/runner-manager for root, else $XDG_STATE_HOME/runner-manager or ~/.local/state/runner-manager)",
    );

    pub const JSON: Opt = switch("--json", "Print machine-readable JSON instead of tables");

    pub const HELP: Opt = switch("--help", "Print help (also after any command)");

    pub const VERSION: Opt = switch("--version", "Print the version");
}

/// `target add`.
pub mod target_add {
    use super::{Opt, opt};

    pub const REPO: Opt = opt(
        "--repo",
        "OWNER/REPO",
        "Runners register with this repository",
    );

    pub const ORG: Opt = opt("--org", "ORG", "Runners register with this organization");

    pub const API_URL: Opt = opt(
        "--api-url",
        "URL",
        "API base URL (default https://api.github.com; GHES: https://HOST/api/v3)",
    );

    pub const TOKEN_FILE: Opt = opt(
        "--token-file",
        "PATH",
        "Read the token from this file (must exist and be readable)",
    );

    pub const TOKEN_ENV: Opt = opt(
        "--token-env",
        "VAR",
        "Read the token from this environment variable of the daemon",
    );

    pub const APP_ID: Opt = opt("--app-id", "ID", "GitHub App id (with --app-key)");

    pub const APP_KEY: Opt = opt(
        "--app-key",
        "PATH",
        "GitHub App private key file (must exist and be readable)",
    );

    pub const INSTALLATION_ID: Opt = opt(
        "--installation-id",
        "ID",
        "GitHub App installation id (found when omitted)",
    );
}

/// `profile add`.
pub mod profile_add {
    use super::{Opt, opt, switch};

    pub const TARGET: Opt = opt("--target", "T", "The target its runners register with");

    pub const LABELS: Opt = opt(
        "--labels",
        "L1,L2",
        "Runner labels, comma-separated (self-hosted, OS and arch are added)",
    );

    pub const MAX: Opt = opt("--max", "N", "Live runners at most (default 1)");

    pub const MIN: Opt = opt("--min", "N", "Idle runners kept warm (default 0)");

    pub const RUNNER_DIR: Opt = opt(
        "--runner-dir",
        "DIR",
        "An unpacked actions-runner release (default STATE_DIR/runner)",
    );

    pub const GROUP: Opt = opt(
        "--group",
        "ID|NAME",
        "Runner group id or name (default: the Default group)",
    );

    pub const IDLE_TIMEOUT: Opt = opt(
        "--idle-timeout",
        "DURATION",
        "Stop an idle runner not needed for this long: seconds, or with a unit s, m, h or d (default 5m)",
    );

    pub const BOOTSTRAP_TIMEOUT: Opt = opt(
        "--bootstrap-timeout",
        "DURATION",
        "Give up on a runner not listening after this long: seconds, or with a unit s, m, h or d (default 5m)",
    );

    pub const PAUSED: Opt = switch("--paused", "Add it paused: start nothing until resumed");

    pub const MONITOR: Opt = switch("--monitor", "Monitor mode: read demand, start nothing");

    pub const NO_DEFAULT_LABELS: Opt = switch(
        "--no-default-labels",
        "Do not add self-hosted and the OS and arch labels",
    );

    pub const ALLOW_PUBLIC: Opt = switch(
        "--allow-public",
        "Allow serving a public repository (a fork's pull request runs code on this host)",
    );
}

/// `profile set`.
pub mod profile_set {
    use super::{Opt, opt};

    pub const REVISION: Opt = opt(
        "--revision",
        "N",
        "Refuse unless the profile is still at this revision (default: the revision just read)",
    );
}

/// `attempts`.
pub mod attempts {
    use super::{Opt, opt, switch};

    pub const PROFILE: Opt = opt("--profile", "P", "Only this profile's attempts");

    pub const ACTIVE: Opt = switch("--active", "Only attempts whose runner may be alive");

    pub const LIMIT: Opt = opt("--limit", "N", "At most N attempts (default 50; 0 = all)");
}

/// `usage` and `coordinator usage`.
pub mod usage {
    use super::{Opt, opt, switch};

    pub const SINCE: Opt = opt(
        "--since",
        "WHEN",
        "First day: a date YYYY-MM-DD or a time ago such as 30d (default 30d: the last 30 days)",
    );

    pub const UNTIL: Opt = opt(
        "--until",
        "WHEN",
        "Last day, as --since (default today, UTC)",
    );

    pub const BY: Opt = opt(
        "--by",
        "KEYS",
        "Group by repo, workflow, job, profile, day (and host, on a coordinator), comma-separated (default repo)",
    );

    pub const TOP: Opt = opt(
        "--top",
        "N",
        "The N biggest groups by runner time; the rest summed as other",
    );

    pub const CSV: Opt = switch("--csv", "Print CSV (for a spreadsheet) instead of a table");
}

/// `apply`.
pub mod apply {
    use super::{Opt, switch};

    pub const DRY_RUN: Opt = switch(
        "--dry-run",
        "Print what would change (+ added, ~ changed with old → new, - removed), write nothing: after a hand edit, the drift from the file",
    );

    pub const PRUNE: Opt = switch(
        "--prune",
        "Remove the targets and profiles the file does not name (a profile with live runners is refused, and so the whole file: pause it and let them finish, or drain)",
    );
}

/// `daemon`.
pub mod daemon {
    use super::{Opt, opt, switch};

    pub const ONCE: Opt = switch(
        "--once",
        "One pass per target, then exit (runners started keep running; exit 1 if a target's pass failed)",
    );

    pub const CONFIG: Opt = opt(
        "--config",
        "FILE",
        "Follow a description file (as apply takes it): applied at start, on SIGHUP and when it changes; a file refused is logged and the store stays as it was",
    );

    pub const METRICS_LISTEN: Opt = opt(
        "--metrics-listen",
        "ADDR",
        "Serve /metrics and /healthz on this loopback address (e.g. 127.0.0.1:9464)",
    );

    pub const LOG_LEVEL: Opt = opt(
        "--log-level",
        "LEVEL",
        "error, warn, info (default) or debug",
    );

    pub const DRAIN_TIMEOUT: Opt = opt(
        "--drain-timeout",
        "DURATION",
        "On SIGTERM, how long to wait for idle runners to be deregistered (default 30s)",
    );

    pub const FALLBACK_GRACE: Opt = opt(
        "--fallback-grace",
        "DURATION",
        "How long the coordinator link may be down before this host reads its own demand again (default 30s)",
    );

    pub const FITNESS_EVERY: Opt = opt(
        "--fitness-every",
        "DURATION",
        "How often the host's required checks (doctor's) are read again, besides at start and after every edit (default 5m)",
    );

    pub const RUNNER_CHECK: Opt = opt(
        "--runner-check",
        "DURATION",
        "How often to check for a new actions-runner release for the managed installs (default 6h; 0 never)",
    );

    pub const UPKEEP_EVERY: Opt = opt(
        "--upkeep-every",
        "DURATION",
        "How often ended attempts past the host's retention, their logs and unused caches are pruned (default 1h, and at start)",
    );

    pub const RELEASE_CGROUPS: Opt = switch(
        "--release-cgroups",
        "Run no daemon: turn off the controllers of the stopped daemon's delegated cgroup so systemd can start the next one there (the unit's ExecStopPost; live runners keep running, their limits written again by the next daemon)",
    );
}

/// `drain`.
pub mod drain {
    use super::{Opt, switch};

    pub const WAIT: Opt = switch("--wait", "Wait until no runner of this host is alive");

    pub const CANCEL: Opt = switch("--cancel", "Undo a drain: start runners again");
}

/// `demo`.
pub mod demo {
    use super::{Opt, opt, switch};

    pub const JOBS: Opt = opt("--jobs", "N", "How many jobs to queue (default 12)");

    pub const KEEP: Opt = switch("--keep", "Keep the demo's state directory afterwards");

    pub const HEADLESS: Opt = switch(
        "--headless",
        "Print progress instead of opening top (also without a terminal)",
    );

    pub const FAR: Opt = switch(
        "--far",
        "GitHub 120 ms away (500 ms more per JIT config) and a runner install of a real release's size",
    );
}

/// `sim github`.
pub mod sim_github {
    use super::{Opt, opt};

    pub const LISTEN: Opt = opt(
        "--listen",
        "ADDR",
        "Address to listen on (default 127.0.0.1:0; the URL is printed)",
    );

    pub const SEED: Opt = opt(
        "--seed",
        "N",
        "Seed of the fault injector's and the jitter's random numbers",
    );

    pub const RATE_LIMIT: Opt = opt(
        "--rate-limit",
        "N",
        "Primary rate limit per credential per hour",
    );

    pub const LATENCY: Opt = opt(
        "--latency",
        "DURATION",
        "Round trip every request spends, e.g. 120ms (default 0: loopback)",
    );

    pub const JIT_LATENCY: Opt = opt(
        "--jit-latency",
        "DURATION",
        "What making a JIT config adds to its round trip, e.g. 500ms",
    );

    pub const JITTER: Opt = opt(
        "--jitter",
        "PERCENT",
        "Each delay drawn within this much either side, e.g. 20% (seeded by --seed)",
    );

    pub const SECONDARY_LIMITS: Opt = opt(
        "--secondary-limits",
        "on|off",
        "GitHub's secondary rate limits: 100 requests in flight per credential, 900 \
                 points a minute per endpoint, 403 with retry-after: 60 over either (default on)",
    );

    pub const ORG: Opt = opt("--org", "LOGIN", "Create this organization (repeatable)");

    pub const REPO: Opt = opt(
        "--repo",
        "OWNER/REPO[:public]",
        "Create this repository (repeatable)",
    );

    pub const PAT_FILE: Opt = opt(
        "--pat-file",
        "PATH",
        "Accept the token in this file (repeatable)",
    );

    pub const WEBHOOK: Opt = opt(
        "--webhook",
        "URL",
        "Deliver signed workflow_job webhooks to this http:// URL (with --webhook-secret-file)",
    );

    pub const WEBHOOK_SECRET_FILE: Opt = opt(
        "--webhook-secret-file",
        "PATH",
        "The webhook's secret, read from this file",
    );
}

/// `sim job add`.
pub mod sim_job_add {
    use super::{Opt, opt};

    pub const URL: Opt = opt(
        "--url",
        "URL",
        "The simulated GitHub, as `sim github` printed it (http://127.0.0.1:PORT)",
    );

    pub const REPO: Opt = opt(
        "--repo",
        "OWNER/REPO",
        "The repository the jobs run in (one `sim github --repo` made)",
    );

    pub const LABELS: Opt = opt(
        "--labels",
        "L1,L2",
        "The labels each job's runs-on asks for, e.g. self-hosted,linux",
    );

    pub const COUNT: Opt = opt("--count", "N", "How many jobs (default 1, at most 1000)");

    pub const DURATION: Opt = opt(
        "--duration",
        "DURATION",
        "How long each job runs on the runner that takes it: 30s, 2m (default 5s)",
    );

    pub const NAME: Opt = opt(
        "--name",
        "PREFIX",
        "Job names: PREFIX-1, PREFIX-2, ... (default job)",
    );

    pub const SCRIPT: Opt = opt(
        "--script",
        "CMD",
        "Each job runs CMD with /bin/sh -c on the runner, in place of --duration",
    );
}

/// `coordinator serve`.
pub mod coordinator_serve {
    use super::{Opt, opt, switch};

    pub const LISTEN: Opt = opt(
        "--listen",
        "ADDR",
        "Listen on IP:PORT (port 0 picks one; the URL is printed)",
    );

    pub const TLS_CERT: Opt = opt(
        "--tls-cert",
        "PATH",
        "PEM certificate chain: serve wss:// (with --tls-key)",
    );

    pub const TLS_KEY: Opt = opt("--tls-key", "PATH", "PEM private key of --tls-cert");

    pub const INSECURE: Opt = switch(
        "--insecure",
        "Serve plain ws:// on an address other than loopback (warned at every start)",
    );

    pub const LEASE_TTL: Opt = opt(
        "--lease-ttl",
        "DURATION",
        "A launch's time to live (default 2m)",
    );

    pub const SCALESET: Opt = opt(
        "--scaleset",
        "TARGET=NAME",
        "Read TARGET's demand from scale set NAME (hold its session; repeatable)",
    );
}

/// `coordinator hosts`.
pub mod coordinator_hosts {
    use super::{Opt, opt};

    pub const SORT: Opt = opt(
        "--sort",
        "FIELD",
        "Order by name (default), state, version, free, leases, started, refusals or seen (counts largest first)",
    );
    pub const FILTER: Opt = opt(
        "--filter",
        "TEXT",
        "Only hosts with every word of TEXT in their name, state (up, down, draining), version, profiles or last refusal",
    );
}

/// `coordinator leases`.
pub mod coordinator_leases {
    use super::{Opt, opt};

    pub const SORT: Opt = opt(
        "--sort",
        "FIELD",
        "Order by queued (default, oldest first), job, target, phase, host or expires",
    );
    pub const FILTER: Opt = opt(
        "--filter",
        "TEXT",
        "Only jobs with every word of TEXT in their key, target, repository, name, phase, host, profile, lease, runner or labels",
    );
}

/// `coordinator host add`.
pub mod coordinator_host_add {
    use super::{Opt, opt};

    pub const TOKEN_OUT: Opt = opt(
        "--token-out",
        "FILE",
        "Write the token to FILE (created, mode 0600; must not exist) instead of stdout",
    );
}

/// `service install`.
pub mod service_install {
    use super::{Opt, opt, switch};

    pub const USER: Opt = switch(
        "--user",
        "A unit of your user manager (~/.config/systemd/user) instead of a system unit",
    );

    pub const NO_START: Opt = switch("--no-start", "Enable the unit but do not start it");

    pub const UNIT_DIR: Opt = opt(
        "--unit-dir",
        "DIR",
        "Write the unit in this existing directory (default /etc/systemd/system, or the user's with --user)",
    );

    pub const FORCE: Opt = switch(
        "--force",
        "Install even when the state directory holds no store yet, or over our unit when it runs on another state directory",
    );
}

/// `service status`.
pub mod service_status {
    use super::{Opt, opt, switch};

    pub const USER: Opt = switch("--user", "Look at the user unit");

    pub const UNIT_DIR: Opt = opt("--unit-dir", "DIR", "Look for the unit in this directory");
}

/// `service uninstall`.
pub mod service_uninstall {
    use super::{Opt, opt, switch};

    pub const USER: Opt = switch("--user", "Remove the user unit");

    pub const UNIT_DIR: Opt = opt("--unit-dir", "DIR", "Remove the unit from this directory");
}

/// `runner install`.
pub mod runner_install {
    use super::{Opt, opt};

    pub const VERSION: Opt = opt(
        "--version",
        "V",
        "Runner version (default: the newest the downloads API offers)",
    );

    pub const DIR: Opt = opt(
        "--dir",
        "DIR",
        "Install here (default STATE_DIR/runner); another version there is replaced",
    );

    pub const TARGET: Opt = opt(
        "--target",
        "T",
        "Ask this target's downloads API (default: the only target)",
    );
}

/// `update`.
pub mod update {
    use super::{Opt, switch};

    pub const CHECK: Opt = switch(
        "--check",
        "Only report this version and the newest; change nothing",
    );

    pub const FORCE: Opt = switch(
        "--force",
        "Install the newest release even when it is this version or older",
    );
}

#[cfg(test)]
mod tests {
    use crate::cli::spec::{COMMANDS, GLOBAL};

    /// Each constant is named after its option (`NO_START` is `--no-start`) and sits in
    /// the module of the command whose row lists it (`global`: the global options), so
    /// `opts::sim_job_add::REPO` is the `--repo` of `sim job add`.
    #[test]
    fn each_constant_is_named_after_its_option_in_its_commands_module() {
        let source = include_str!("opts.rs")
            .split("#[cfg(test)]")
            .next()
            .unwrap();
        let mut seen = 0;
        for module in source.split("\npub mod ").skip(1) {
            let (name, body) = module.split_once(" {").unwrap();
            let listed: Vec<&str> = match name {
                "global" => GLOBAL.iter().map(|o| o.name).collect(),
                _ => COMMANDS
                    .iter()
                    .filter(|c| c.path.join("_") == name)
                    .flat_map(|c| c.options.iter().map(|o| o.name))
                    .collect(),
            };
            for decl in body.split("pub const ").skip(1) {
                let (ident, rest) = decl.split_once(": Opt = ").unwrap();
                let option = rest.split('"').nth(1).unwrap();
                let spelt = option
                    .trim_start_matches("--")
                    .to_uppercase()
                    .replace('-', "_");
                assert_eq!(ident, spelt, "{name}::{ident} declares {option}");
                assert!(
                    listed.contains(&option),
                    "{name}::{ident}: no row of a command '{}' lists {option}",
                    name.replace('_', " ")
                );
                seen += 1;
            }
        }
        assert!(seen > 80, "the scan found only {seen} constants");
    }
}
