//! The command line as data: one table of commands and their options feeds the
//! parser, `--help` and the man-page drift test. A new command is one `CommandId`
//! variant, one entry here, and one arm in `cli::execute`, whose match on the id has
//! no fallback, so a variant without its handler does not compile.

/// One option of a command (or a global one).
#[derive(Debug)]
pub struct Opt {
    /// `--name`, as typed.
    pub name: &'static str,
    /// The value's placeholder (`N`, `PATH`), or `None` for a switch.
    pub value: Option<&'static str>,
    pub help: &'static str,
}

/// Declares `CommandId` and `CommandId::ALL` from one list, so `ALL` holds every
/// variant by construction (the test that each has exactly one row relies on it).
macro_rules! command_ids {
    ($($variant:ident,)*) => {
        /// Which command a row of `COMMANDS` is: what `cli::execute` matches on.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum CommandId {
            $($variant,)*
        }

        impl CommandId {
            /// Every command, in declaration order.
            pub const ALL: &'static [CommandId] = &[$(CommandId::$variant,)*];
        }
    };
}

command_ids! {
    TargetAdd,
    TargetSet,
    TargetList,
    TargetShow,
    TargetRm,
    TargetCheck,
    ProfileAdd,
    ProfileSet,
    ProfileList,
    ProfileShow,
    ProfileRm,
    ProfilePause,
    ProfileResume,
    HostShow,
    HostSet,
    Status,
    Attempts,
    AttemptShow,
    Daemon,
    Drain,
    Demo,
    SimGithub,
    SimJobAdd,
    Top,
    CoordinatorServe,
    CoordinatorHostAdd,
    CoordinatorHostRm,
    CoordinatorStatus,
    CoordinatorHosts,
    CoordinatorLeases,
    Doctor,
    ServiceInstall,
    ServiceStatus,
    ServiceUninstall,
    RunnerInstall,
    Update,
    Completions,
}

/// One command: its words (`["profile", "add"]`), what follows them, and its options.
#[derive(Debug)]
pub struct Command {
    /// Which handler runs it.
    pub id: CommandId,
    pub path: &'static [&'static str],
    /// The synopsis after the words, e.g. `NAME KEY=VALUE... [--revision N]`.
    pub args: &'static str,
    /// How many positional arguments it takes at least, and at most (`None` = any).
    pub positionals: (usize, Option<usize>),
    pub about: &'static str,
    pub options: &'static [Opt],
}

impl Command {
    pub fn name(&self) -> String {
        self.path.join(" ")
    }

    pub fn option(&self, name: &str) -> Option<&'static Opt> {
        self.options.iter().find(|o| o.name == name)
    }
}

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

pub const GLOBAL: &[Opt] = &[
    opt(
        "--state-dir",
        "DIR",
        "State directory (env RUNNER_MANAGER_STATE_DIR; default /var/lib/runner-manager for root, else $XDG_STATE_HOME/runner-manager or ~/.local/state/runner-manager)",
    ),
    switch("--json", "Print machine-readable JSON instead of tables"),
    switch("--help", "Print help (also after any command)"),
    switch("--version", "Print the version"),
];

pub const COMMANDS: &[Command] = &[
    Command {
        id: CommandId::TargetAdd,
        path: &["target", "add"],
        args: "NAME (--repo OWNER/REPO | --org ORG) [--api-url URL] (--token-file PATH | --token-env VAR | --app-id ID --app-key PATH [--installation-id ID])",
        positionals: (1, Some(1)),
        about: "Add a target: a repository or organization that runners register with",
        options: &[
            opt(
                "--repo",
                "OWNER/REPO",
                "Runners register with this repository",
            ),
            opt("--org", "ORG", "Runners register with this organization"),
            opt(
                "--api-url",
                "URL",
                "API base URL (default https://api.github.com; GHES: https://HOST/api/v3)",
            ),
            opt(
                "--token-file",
                "PATH",
                "Read the token from this file (must exist and be readable)",
            ),
            opt(
                "--token-env",
                "VAR",
                "Read the token from this environment variable of the daemon",
            ),
            opt("--app-id", "ID", "GitHub App id (with --app-key)"),
            opt(
                "--app-key",
                "PATH",
                "GitHub App private key file (must exist and be readable)",
            ),
            opt(
                "--installation-id",
                "ID",
                "GitHub App installation id (found when omitted)",
            ),
        ],
    },
    Command {
        id: CommandId::TargetSet,
        path: &["target", "set"],
        args: "NAME KEY=VALUE...",
        positionals: (2, None),
        about: "Change a target: api_url, poll_interval, max_in_flight, token_file, token_env, app_id, app_key, installation_id, repos",
        options: &[],
    },
    Command {
        id: CommandId::TargetList,
        path: &["target", "list"],
        args: "",
        positionals: (0, Some(0)),
        about: "List targets",
        options: &[],
    },
    Command {
        id: CommandId::TargetShow,
        path: &["target", "show"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Show one target (credentials by reference only)",
        options: &[],
    },
    Command {
        id: CommandId::TargetRm,
        path: &["target", "rm"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Remove a target (refused while profiles use it)",
        options: &[],
    },
    Command {
        id: CommandId::TargetCheck,
        path: &["target", "check"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Prove a target works: credentials, permission to manage runners, visibility, runner group, rate limit",
        options: &[],
    },
    Command {
        id: CommandId::ProfileAdd,
        path: &["profile", "add"],
        args: "NAME --target T --labels L1,L2 [--max N] [--min N] [--runner-dir DIR] [--group ID|NAME] [--idle-timeout DURATION] [--bootstrap-timeout DURATION] [--paused] [--monitor] [--no-default-labels] [--allow-public]",
        positionals: (1, Some(1)),
        about: "Add a pool profile: one kind of runner for one target",
        options: &[
            opt("--target", "T", "The target its runners register with"),
            opt(
                "--labels",
                "L1,L2",
                "Runner labels, comma-separated (self-hosted, OS and arch are added)",
            ),
            opt("--max", "N", "Live runners at most (default 1)"),
            opt("--min", "N", "Idle runners kept warm (default 0)"),
            opt(
                "--runner-dir",
                "DIR",
                "An unpacked actions-runner release (default STATE_DIR/runner)",
            ),
            opt(
                "--group",
                "ID|NAME",
                "Runner group id or name (default: the Default group)",
            ),
            opt(
                "--idle-timeout",
                "DURATION",
                "Stop an idle runner not needed for this long: seconds, or with a unit s, m, h or d (default 5m)",
            ),
            opt(
                "--bootstrap-timeout",
                "DURATION",
                "Give up on a runner not listening after this long: seconds, or with a unit s, m, h or d (default 5m)",
            ),
            switch("--paused", "Add it paused: start nothing until resumed"),
            switch("--monitor", "Monitor mode: read demand, start nothing"),
            switch(
                "--no-default-labels",
                "Do not add self-hosted and the OS and arch labels",
            ),
            switch(
                "--allow-public",
                "Allow serving a public repository (a fork's pull request runs code on this host)",
            ),
        ],
    },
    Command {
        id: CommandId::ProfileSet,
        path: &["profile", "set"],
        args: "NAME KEY=VALUE... [--revision N]",
        positionals: (2, None),
        about: "Change a profile: target, labels, default_labels, min, max, runner_dir, runner_group, idle_timeout, bootstrap_timeout, job_timeout (durations: seconds, or with a unit s, m, h or d), mode, active, allow_public, run_as, demand, memory_max, cpu_max, pids_max, limits (required, the default: no runner starts while the host cannot enforce a limit the profile sets; best-effort: start anyway, and doctor warns), env.NAME (a variable for its runners, over the host's; empty removes it; shown by profile show, so never a secret), tools (programs its jobs need on the runner's PATH; doctor checks them and the daemon starts none of its runners while one is missing), execution (native, the default, or oci: each runner in a rootless Podman container), image (the oci image, pinned by digest: REF@sha256:<64 hex>), disk_max (the most an oci container may write; needs a disk quota), caches (on|off|default: dependency caches kept per target; default is on for a repository target, off for an organization's), workspace (disposable|persistent: keep _work between a repository target's jobs, never with allow_public)",
        options: &[opt(
            "--revision",
            "N",
            "Refuse unless the profile is still at this revision (default: the revision just read)",
        )],
    },
    Command {
        id: CommandId::ProfileList,
        path: &["profile", "list"],
        args: "",
        positionals: (0, Some(0)),
        about: "List profiles",
        options: &[],
    },
    Command {
        id: CommandId::ProfileShow,
        path: &["profile", "show"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Show one profile with its revision",
        options: &[],
    },
    Command {
        id: CommandId::ProfileRm,
        path: &["profile", "rm"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Remove a profile (refused while it has live attempts)",
        options: &[],
    },
    Command {
        id: CommandId::ProfilePause,
        path: &["profile", "pause"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Pause a profile: start no new runners; running ones finish",
        options: &[],
    },
    Command {
        id: CommandId::ProfileResume,
        path: &["profile", "resume"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Resume a paused profile",
        options: &[],
    },
    Command {
        id: CommandId::HostShow,
        path: &["host", "show"],
        args: "",
        positionals: (0, Some(0)),
        about: "Show this host: id, name, OS, arch, capacity, coordinator",
        options: &[],
    },
    Command {
        id: CommandId::HostSet,
        path: &["host", "set"],
        args: "KEY=VALUE...",
        positionals: (1, None),
        about: "Change this host: capacity, coordinator, coordinator_token_file, coordinator_ca_file, coordinator_insecure, isolation, runner_uids, env.NAME (a variable for every runner unless its profile sets it; empty removes it; shown by host show, so never a secret), runtime_root (where runner roots, caches and kept workspaces live; empty is the state directory), cache_cap (the most the dependency caches hold, least recently used pruned first), webhook_listen and webhook_secret_file (where workflow_job webhooks are taken and the secret that signs them; both or neither)",
        options: &[],
    },
    Command {
        id: CommandId::Status,
        path: &["status"],
        args: "",
        positionals: (0, Some(0)),
        about: "What the store knows now: host, daemon, targets, profiles",
        options: &[],
    },
    Command {
        id: CommandId::Attempts,
        path: &["attempts"],
        args: "[--profile P] [--active] [--limit N]",
        positionals: (0, Some(0)),
        about: "List attempts, newest first",
        options: &[
            opt("--profile", "P", "Only this profile's attempts"),
            switch("--active", "Only attempts whose runner may be alive"),
            opt("--limit", "N", "At most N attempts (default 50; 0 = all)"),
        ],
    },
    Command {
        id: CommandId::AttemptShow,
        path: &["attempt", "show"],
        args: "ID",
        positionals: (1, Some(1)),
        about: "Show one attempt with its timeline",
        options: &[],
    },
    Command {
        id: CommandId::Daemon,
        path: &["daemon"],
        args: "[--once] [--metrics-listen ADDR] [--log-level LEVEL] [--drain-timeout DURATION] [--fallback-grace DURATION] [--fitness-every DURATION] [--runner-check DURATION] [--upkeep-every DURATION] [--release-cgroups]",
        positionals: (0, Some(0)),
        about: "Run the daemon: start one ephemeral runner per queued job, watch it, clean up",
        options: &[
            switch(
                "--once",
                "One pass per target, then exit (runners started keep running; exit 1 if a target's pass failed)",
            ),
            opt(
                "--metrics-listen",
                "ADDR",
                "Serve /metrics and /healthz on this loopback address (e.g. 127.0.0.1:9464)",
            ),
            opt(
                "--log-level",
                "LEVEL",
                "error, warn, info (default) or debug",
            ),
            opt(
                "--drain-timeout",
                "DURATION",
                "On SIGTERM, how long to wait for idle runners to be deregistered (default 30s)",
            ),
            opt(
                "--fallback-grace",
                "DURATION",
                "How long the coordinator link may be down before this host reads its own demand again (default 30s)",
            ),
            opt(
                "--fitness-every",
                "DURATION",
                "How often the host's required checks (doctor's) are read again, besides at start and after every edit (default 5m)",
            ),
            opt(
                "--runner-check",
                "DURATION",
                "How often to check for a new actions-runner release for the managed installs (default 6h; 0 never)",
            ),
            opt(
                "--upkeep-every",
                "DURATION",
                "How often ended attempts past the host's retention, their logs and unused caches are pruned (default 1h, and at start)",
            ),
            switch(
                "--release-cgroups",
                "Run no daemon: turn off the controllers of the stopped daemon's delegated cgroup so systemd can start the next one there (the unit's ExecStopPost; live runners keep running, their limits written again by the next daemon)",
            ),
        ],
    },
    Command {
        id: CommandId::Drain,
        path: &["drain"],
        args: "[--wait] [--cancel]",
        positionals: (0, Some(0)),
        about: "Stop starting runners on this host; idle ones are deregistered, busy ones finish",
        options: &[
            switch("--wait", "Wait until no runner of this host is alive"),
            switch("--cancel", "Undo a drain: start runners again"),
        ],
    },
    Command {
        id: CommandId::Demo,
        path: &["demo"],
        args: "[--jobs N] [--keep] [--headless] [--far]",
        positionals: (0, Some(0)),
        about: "Run the real daemon against the simulated GitHub and show what happens",
        options: &[
            opt("--jobs", "N", "How many jobs to queue (default 12)"),
            switch("--keep", "Keep the demo's state directory afterwards"),
            switch(
                "--headless",
                "Print progress instead of opening top (also without a terminal)",
            ),
            switch(
                "--far",
                "GitHub 120 ms away (500 ms more per JIT config) and a runner install of a real release's size",
            ),
        ],
    },
    Command {
        id: CommandId::SimGithub,
        path: &["sim", "github"],
        args: "[--listen ADDR] [--seed N] [--rate-limit N] [--latency DURATION] [--jit-latency DURATION] [--jitter PERCENT] [--org LOGIN]... [--repo OWNER/REPO[:public]]... [--pat-file PATH]... [--webhook URL --webhook-secret-file PATH]",
        positionals: (0, Some(0)),
        about: "Serve the simulated GitHub (for tests, benchmarks and trying things out)",
        options: &[
            opt(
                "--listen",
                "ADDR",
                "Address to listen on (default 127.0.0.1:0; the URL is printed)",
            ),
            opt(
                "--seed",
                "N",
                "Seed of the fault injector's and the jitter's random numbers",
            ),
            opt(
                "--rate-limit",
                "N",
                "Primary rate limit per credential per hour",
            ),
            opt(
                "--latency",
                "DURATION",
                "Round trip every request spends, e.g. 120ms (default 0: loopback)",
            ),
            opt(
                "--jit-latency",
                "DURATION",
                "What making a JIT config adds to its round trip, e.g. 500ms",
            ),
            opt(
                "--jitter",
                "PERCENT",
                "Each delay drawn within this much either side, e.g. 20% (seeded by --seed)",
            ),
            opt("--org", "LOGIN", "Create this organization (repeatable)"),
            opt(
                "--repo",
                "OWNER/REPO[:public]",
                "Create this repository (repeatable)",
            ),
            opt(
                "--pat-file",
                "PATH",
                "Accept the token in this file (repeatable)",
            ),
            opt(
                "--webhook",
                "URL",
                "Deliver signed workflow_job webhooks to this http:// URL (with --webhook-secret-file)",
            ),
            opt(
                "--webhook-secret-file",
                "PATH",
                "The webhook's secret, read from this file",
            ),
        ],
    },
    Command {
        id: CommandId::SimJobAdd,
        path: &["sim", "job", "add"],
        args: "--url URL --repo OWNER/REPO --labels L1,L2 [--count N] [--duration DURATION] [--name PREFIX] [--script CMD]",
        positionals: (0, Some(0)),
        about: "Queue jobs on a running simulated GitHub (`sim github` prints its URL)",
        options: &[
            opt(
                "--url",
                "URL",
                "The simulated GitHub, as `sim github` printed it (http://127.0.0.1:PORT)",
            ),
            opt(
                "--repo",
                "OWNER/REPO",
                "The repository the jobs run in (one `sim github --repo` made)",
            ),
            opt(
                "--labels",
                "L1,L2",
                "The labels each job's runs-on asks for, e.g. self-hosted,linux",
            ),
            opt("--count", "N", "How many jobs (default 1, at most 1000)"),
            opt(
                "--duration",
                "DURATION",
                "How long each job runs on the runner that takes it: 30s, 2m (default 5s)",
            ),
            opt(
                "--name",
                "PREFIX",
                "Job names: PREFIX-1, PREFIX-2, ... (default job)",
            ),
            opt(
                "--script",
                "CMD",
                "Each job runs CMD with /bin/sh -c on the runner, in place of --duration",
            ),
        ],
    },
    Command {
        id: CommandId::Top,
        path: &["top"],
        args: "",
        positionals: (0, Some(0)),
        about: "Live terminal UI: host, profiles, attempts, logs, pictures, GitHub runners, activity, settings (? for keys)",
        options: &[],
    },
    Command {
        id: CommandId::CoordinatorServe,
        path: &["coordinator", "serve"],
        args: "--listen ADDR [--tls-cert PATH --tls-key PATH | --insecure] [--lease-ttl DURATION] [--scaleset TARGET=NAME]...",
        positionals: (0, Some(0)),
        about: "Serve a pool: read its targets' queues once and place each job on one host",
        options: &[
            opt(
                "--listen",
                "ADDR",
                "Listen on IP:PORT (port 0 picks one; the URL is printed)",
            ),
            opt(
                "--tls-cert",
                "PATH",
                "PEM certificate chain: serve wss:// (with --tls-key)",
            ),
            opt("--tls-key", "PATH", "PEM private key of --tls-cert"),
            switch(
                "--insecure",
                "Serve plain ws:// on an address other than loopback (warned at every start)",
            ),
            opt(
                "--lease-ttl",
                "DURATION",
                "A launch's time to live (default 2m)",
            ),
            opt(
                "--scaleset",
                "TARGET=NAME",
                "Read TARGET's demand from scale set NAME (hold its session; repeatable)",
            ),
        ],
    },
    Command {
        id: CommandId::CoordinatorHostAdd,
        path: &["coordinator", "host", "add"],
        args: "NAME [--token-out FILE]",
        positionals: (1, Some(1)),
        about: "Allow a host to join the pool; prints its token once (only a hash is kept)",
        options: &[opt(
            "--token-out",
            "FILE",
            "Write the token to FILE (created, mode 0600; must not exist) instead of stdout",
        )],
    },
    Command {
        id: CommandId::CoordinatorHostRm,
        path: &["coordinator", "host", "rm"],
        args: "NAME",
        positionals: (1, Some(1)),
        about: "Remove a host from the pool: its token stops working and its connection is closed",
        options: &[],
    },
    Command {
        id: CommandId::CoordinatorStatus,
        path: &["coordinator", "status"],
        args: "",
        positionals: (0, Some(0)),
        about: "The coordinator: where it serves, its hosts, targets and jobs by phase",
        options: &[],
    },
    Command {
        id: CommandId::CoordinatorHosts,
        path: &["coordinator", "hosts"],
        args: "",
        positionals: (0, Some(0)),
        about: "The pool's hosts and what each last reported",
        options: &[],
    },
    Command {
        id: CommandId::CoordinatorLeases,
        path: &["coordinator", "leases"],
        args: "",
        positionals: (0, Some(0)),
        about: "The jobs the coordinator tracks, with their lease, host and phase",
        options: &[],
    },
    Command {
        id: CommandId::Doctor,
        path: &["doctor"],
        args: "",
        positionals: (0, Some(0)),
        about: "Check this host: store, runner installs, disk, clock, credentials, systemd unit",
        options: &[],
    },
    Command {
        id: CommandId::ServiceInstall,
        path: &["service", "install"],
        args: "[--user] [--no-start] [--unit-dir DIR]",
        positionals: (0, Some(0)),
        about: "Install the daemon as a systemd unit for this binary and state directory, enable and start it",
        options: &[
            switch(
                "--user",
                "A unit of your user manager (~/.config/systemd/user) instead of a system unit",
            ),
            switch("--no-start", "Enable the unit but do not start it"),
            opt(
                "--unit-dir",
                "DIR",
                "Write the unit in this existing directory (default /etc/systemd/system, or the user's with --user)",
            ),
        ],
    },
    Command {
        id: CommandId::ServiceStatus,
        path: &["service", "status"],
        args: "[--user] [--unit-dir DIR]",
        positionals: (0, Some(0)),
        about: "The unit: installed and ours, its binary stale, enabled and active; each target's last report and credential",
        options: &[
            switch("--user", "Look at the user unit"),
            opt("--unit-dir", "DIR", "Look for the unit in this directory"),
        ],
    },
    Command {
        id: CommandId::ServiceUninstall,
        path: &["service", "uninstall"],
        args: "[--user] [--unit-dir DIR]",
        positionals: (0, Some(0)),
        about: "Stop, disable and remove the unit 'service install' wrote (never another)",
        options: &[
            switch("--user", "Remove the user unit"),
            opt("--unit-dir", "DIR", "Remove the unit from this directory"),
        ],
    },
    Command {
        id: CommandId::RunnerInstall,
        path: &["runner", "install"],
        args: "[--version V] [--dir DIR] [--target T]",
        positionals: (0, Some(0)),
        about: "Download, verify and unpack the actions-runner release for this OS and arch",
        options: &[
            opt(
                "--version",
                "V",
                "Runner version (default: the newest the downloads API offers)",
            ),
            opt(
                "--dir",
                "DIR",
                "Install here (default STATE_DIR/runner); another version there is replaced",
            ),
            opt(
                "--target",
                "T",
                "Ask this target's downloads API (default: the only target)",
            ),
        ],
    },
    Command {
        id: CommandId::Update,
        path: &["update"],
        args: "[--check | --force]",
        positionals: (0, Some(0)),
        about: "Replace this binary with the newest release from release_source, verified against its SHA256SUMS, and hand the daemon over to it",
        options: &[
            switch(
                "--check",
                "Only report this version and the newest; change nothing",
            ),
            switch(
                "--force",
                "Install the newest release even when it is this version or older",
            ),
        ],
    },
    Command {
        id: CommandId::Completions,
        path: &["completions"],
        args: "bash|zsh|fish",
        positionals: (1, Some(1)),
        about: "Print a shell completion script",
        options: &[],
    },
];

/// The command these words name, if any.
pub fn find(words: &[String]) -> Option<&'static Command> {
    COMMANDS
        .iter()
        .find(|c| c.path.len() == words.len() && c.path.iter().zip(words).all(|(a, b)| a == b))
}

/// True when the words are the start of some command's path (e.g. `profile`).
pub fn is_prefix(words: &[String]) -> bool {
    COMMANDS
        .iter()
        .any(|c| c.path.len() > words.len() && c.path.iter().zip(words).all(|(a, b)| a == b))
}

/// The command the user most likely meant by `words`, whose last word is not one we
/// know there: the known word at that place nearest in spelling (`stats` → `status`,
/// `profile lst` → `profile list`), or one it begins (`prof` → `profile`).
pub fn suggest(words: &[String]) -> Option<String> {
    let (last, head) = words.split_last()?;
    let mut candidates: Vec<&str> = COMMANDS
        .iter()
        .filter(|c| c.path.len() > head.len() && c.path.iter().zip(head).all(|(a, b)| a == b))
        .map(|c| c.path[head.len()])
        .collect();
    candidates.dedup();
    let limit = (last.chars().count() / 3).max(1);
    let best = candidates
        .iter()
        .map(|c| (edit_distance(last, c), *c))
        .filter(|(d, c)| *d <= limit || (last.len() >= 3 && c.starts_with(last.as_str())))
        .min()?;
    let mut out: Vec<&str> = head.iter().map(String::as_str).collect();
    out.push(best.1);
    Some(out.join(" "))
}

/// Levenshtein distance, by characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = if ca == *cb {
                prev
            } else {
                1 + prev.min(row[j]).min(cur)
            };
            prev = cur;
        }
    }
    row[b.len()]
}

fn options_block(out: &mut String, title: &str, opts: &[Opt]) {
    if opts.is_empty() {
        return;
    }
    out.push_str(&format!("\n{title}:\n"));
    let head = |o: &Opt| match o.value {
        Some(v) => format!("{} {v}", o.name),
        None => o.name.to_string(),
    };
    let w = opts.iter().map(|o| head(o).len()).max().unwrap_or(0);
    for o in opts {
        out.push_str(&format!("  {:w$}  {}\n", head(o), o.help));
    }
}

const USAGE_PREFIX: &str = "runner-manager [--state-dir DIR] [--json]";

/// Help for the whole program, or for the commands under a prefix (`profile`): a
/// group's help lists only that group's commands, without the program's banner and
/// global options.
pub fn help_overview(prefix: &[String]) -> String {
    if !prefix.is_empty() && is_prefix(prefix) {
        return help_group(prefix);
    }
    let mut out = format!(
        "runner-manager {}: autoscaler for ephemeral GitHub Actions self-hosted runners\n\n\
         Usage: {USAGE_PREFIX} COMMAND\n\nCommands:\n",
        env!("CARGO_PKG_VERSION")
    );
    let cmds: Vec<&Command> = COMMANDS
        .iter()
        .filter(|c| c.path.iter().zip(prefix).all(|(a, b)| a == b) && c.path.len() > prefix.len())
        .collect();
    let w = cmds.iter().map(|c| c.name().len()).max().unwrap_or(0);
    for c in cmds {
        out.push_str(&format!("  {:w$}  {}\n", c.name(), c.about));
    }
    options_block(&mut out, "Global options", GLOBAL);
    out.push_str("\nRun 'runner-manager COMMAND --help' for a command's options.\n");
    out
}

/// The commands under a prefix (`profile`), one line each.
fn help_group(prefix: &[String]) -> String {
    let group = prefix.join(" ");
    let cmds: Vec<&Command> = COMMANDS
        .iter()
        .filter(|c| c.path.len() > prefix.len() && c.path.iter().zip(prefix).all(|(a, b)| a == b))
        .collect();
    let w = cmds.iter().map(|c| c.name().len()).max().unwrap_or(0);
    let mut out = format!("Usage: {USAGE_PREFIX} {group} COMMAND\n\nCommands:\n");
    for c in cmds {
        out.push_str(&format!("  {:w$}  {}\n", c.name(), c.about));
    }
    out.push_str(&format!(
        "\nRun 'runner-manager {group} COMMAND --help' for a command's options, \
         'runner-manager --help' for every command.\n"
    ));
    out
}

/// Help for one command.
pub fn help_command(c: &Command) -> String {
    let usage = format!("{USAGE_PREFIX} {} {}", c.name(), c.args);
    let mut out = format!("{}\n\nUsage: {}\n", c.about, usage.trim_end());
    options_block(&mut out, "Options", c.options);
    options_block(&mut out, "Global options", GLOBAL);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    /// Adding a variant without its row, or giving two rows one id, fails here.
    #[test]
    fn every_command_id_has_exactly_one_row() {
        for id in CommandId::ALL {
            let rows: Vec<String> = COMMANDS
                .iter()
                .filter(|c| c.id == *id)
                .map(Command::name)
                .collect();
            assert_eq!(rows.len(), 1, "{id:?} is the id of rows {rows:?}");
        }
        assert_eq!(COMMANDS.len(), CommandId::ALL.len());
    }

    #[test]
    fn a_typo_gets_the_nearest_command() {
        for (typed, meant) in [
            ("stats", Some("status")),
            ("statsu", Some("status")),
            ("prof", Some("profile")),
            ("profile lst", Some("profile list")),
            ("profile resum", Some("profile resume")),
            ("targte", Some("target")),
            ("frobnicate", None),
            ("x", None),
        ] {
            assert_eq!(suggest(&words(typed)).as_deref(), meant, "{typed}");
        }
        assert_eq!(edit_distance("stats", "status"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
    }
}
