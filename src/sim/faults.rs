//! Fault injection rules: which requests (method + path pattern) misbehave, how often
//! (the next N, or with a seeded probability), and how; and the per-runner fault switches.

use serde::{Deserialize, Serialize};

use super::rng::SplitMix64;

/// What a matching request gets instead of (or on top of) its normal answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum FaultAction {
    /// This status with a `basic-error` body (500, 502, 503, 504...).
    Status { status: u16 },
    /// Close the connection without answering.
    Drop,
    /// Answer normally after this delay.
    Delay { ms: u64 },
    /// Never answer; the connection stays open until the sim shuts down.
    Hang,
    /// 401 `Bad credentials`.
    Unauthorized,
    /// 403, a secondary rate limit, with or without `retry-after` (seconds).
    Forbidden { retry_after: Option<u64> },
    /// 429, with or without `retry-after` (seconds).
    TooManyRequests { retry_after: Option<u64> },
    /// 403 with `x-ratelimit-remaining: 0` and a reset this many seconds away.
    RateLimitExhausted { reset_in_secs: u64 },
    /// 200 with a body that is not JSON.
    MalformedJson,
    /// The normal response, cut off after half its body.
    TruncatedBody,
    /// 200 with a syntactically valid JSON body of this many bytes.
    OversizedBody { bytes: usize },
    /// 409 `Already exists - A runner with the name X already exists.` (JIT endpoints).
    JitConflict,
    /// 422 `Runner "X" is still running a job` (runner DELETE).
    DeleteBusy,
    /// Serve the request normally, then delete the runner registration it named
    /// (the runner id in the path, or the runner a JIT call just created).
    VanishRegistration,
}

/// How often a rule fires.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    /// The next N matching requests.
    Times(u32),
    /// Each matching request with this probability (the sim's seeded RNG decides).
    Probability(f64),
    /// Every matching request that arrives before this time (Unix milliseconds): an
    /// incident lasts a while, however few requests meet it. Spent rules are removed.
    Until(u64),
}

impl Trigger {
    /// Whether the rule can no longer fire at `now`.
    fn spent(&self, now: u64) -> bool {
        match self {
            Trigger::Times(n) => *n == 0,
            Trigger::Until(t) => now >= *t,
            Trigger::Probability(_) => false,
        }
    }
}

/// One rule: method (None = any) and a path pattern.
///
/// Patterns: a path where `*` (or `{name}`) matches one segment and a final `**`
/// matches the rest, e.g. `/repos/*/*/actions/runs` or GitHub's own template
/// `/repos/{owner}/{repo}/actions/runners/{runner_id}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FaultRule {
    pub method: Option<String>,
    pub path: String,
    pub trigger: Trigger,
    pub action: FaultAction,
}

impl FaultRule {
    pub fn new(
        method: Option<&str>,
        path: &str,
        trigger: Trigger,
        action: FaultAction,
    ) -> FaultRule {
        FaultRule {
            method: method.map(str::to_string),
            path: path.to_string(),
            trigger,
            action,
        }
    }

    /// The next `n` requests of `method path` get `action`.
    pub fn times(method: &str, path: &str, n: u32, action: FaultAction) -> FaultRule {
        FaultRule::new(Some(method), path, Trigger::Times(n), action)
    }

    pub fn matches(&self, method: &str, path: &str) -> bool {
        self.method
            .as_deref()
            .is_none_or(|m| m.eq_ignore_ascii_case(method))
            && path_matches(&self.path, path)
    }
}

/// True when `path` fits `pattern` (see [`FaultRule`]).
pub fn path_matches(pattern: &str, path: &str) -> bool {
    let mut ps = pattern.trim_matches('/').split('/');
    let mut xs = path.trim_matches('/').split('/');
    loop {
        match (ps.next(), xs.next()) {
            (Some("**"), _) => return true,
            (None, None) => return true,
            (Some(p), Some(x))
                if p == "*" || (p.starts_with('{') && p.ends_with('}')) || p == x => {}
            _ => return false,
        }
    }
}

/// Picks the action for a request arriving at `now` (Unix ms) and consumes one use of a
/// `Times` rule; the first matching rule that fires wins. Spent rules are removed.
pub fn pick(
    rules: &mut Vec<FaultRule>,
    rng: &mut SplitMix64,
    (method, path): (&str, &str),
    now: u64,
) -> Option<FaultAction> {
    rules.retain(|r| !r.trigger.spent(now));
    let mut chosen = None;
    for (i, rule) in rules.iter_mut().enumerate() {
        if !rule.matches(method, path) {
            continue;
        }
        match &mut rule.trigger {
            Trigger::Times(n) if *n > 0 => {
                *n -= 1;
                chosen = Some((i, rule.action.clone()));
                break;
            }
            Trigger::Probability(p) if rng.chance(*p) => {
                chosen = Some((i, rule.action.clone()));
                break;
            }
            Trigger::Until(t) if now < *t => {
                chosen = Some((i, rule.action.clone()));
                break;
            }
            _ => {}
        }
    }
    rules.retain(|r| !r.trigger.spent(now));
    chosen.map(|(_, a)| a)
}

/// A misbehaviour of one simulated runner process, carried in its JIT config.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunnerFault {
    /// Print an error and exit 1 before connecting.
    CrashAtStart,
    /// Never connect and never print `Listening for Jobs`.
    HangBeforeListening,
    /// Exit 1 after finishing a job (instead of 0).
    ExitNonZeroAfterJob,
    /// Ignore SIGTERM (only SIGKILL stops it).
    IgnoreSigterm,
    /// Leave a `Runner.Worker` process running after the job, as a leaked child would.
    LeaveBackgroundProcess,
    /// `A session for this runner already exists.` and exit 5.
    SessionConflict,
    /// The version is deprecated: exit 7.
    Deprecated,
}

/// Which runners get a fault: by name prefix (None = all), the next N or by chance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunnerFaultRule {
    pub name_prefix: Option<String>,
    pub trigger: Trigger,
    pub fault: RunnerFault,
}

/// The faults for a runner named `name` whose JIT config is being generated.
pub fn pick_runner_faults(
    rules: &mut Vec<RunnerFaultRule>,
    rng: &mut SplitMix64,
    name: &str,
) -> Vec<RunnerFault> {
    let now = crate::timefmt::now_millis() as u64;
    let mut out = Vec::new();
    for rule in rules.iter_mut() {
        if rule
            .name_prefix
            .as_deref()
            .is_some_and(|p| !name.starts_with(p))
        {
            continue;
        }
        let fire = match &mut rule.trigger {
            Trigger::Times(n) if *n > 0 => {
                *n -= 1;
                true
            }
            Trigger::Probability(p) => rng.chance(*p),
            Trigger::Until(t) => now < *t,
            _ => false,
        };
        if fire && !out.contains(&rule.fault) {
            out.push(rule.fault);
        }
    }
    rules.retain(|r| !r.trigger.spent(now));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(path_matches(
            "/repos/*/*/actions/runs",
            "/repos/o/r/actions/runs"
        ));
        assert!(path_matches(
            "/repos/{owner}/{repo}/actions/runners/{id}",
            "/repos/o/r/actions/runners/5"
        ));
        assert!(!path_matches(
            "/repos/*/*/actions/runs",
            "/repos/o/r/actions/runs/5/jobs"
        ));
        assert!(path_matches("/repos/**", "/repos/o/r/actions/runs/5/jobs"));
        assert!(!path_matches("/orgs/*", "/repos/o"));
    }

    #[test]
    fn until_rules_fire_until_their_time_then_go() {
        let mut rng = SplitMix64::new(1);
        let status = FaultAction::Status { status: 503 };
        let mut rules = vec![FaultRule::new(
            None,
            "/repos/**",
            Trigger::Until(1_000),
            status.clone(),
        )];
        for at in [0, 10, 999] {
            let got = pick(&mut rules, &mut rng, ("GET", "/repos/o/r/actions/runs"), at);
            assert_eq!(got, Some(status.clone()), "at {at}");
        }
        assert_eq!(
            pick(&mut rules, &mut rng, ("GET", "/rate_limit"), 999),
            None
        );
        assert_eq!(
            pick(
                &mut rules,
                &mut rng,
                ("GET", "/repos/o/r/actions/runs"),
                1_000
            ),
            None
        );
        assert!(rules.is_empty(), "a spent window is removed");
    }

    #[test]
    fn times_rules_are_spent_then_removed() {
        let mut rng = SplitMix64::new(1);
        let mut rules = vec![FaultRule::times("GET", "/rate_limit", 2, FaultAction::Drop)];
        assert_eq!(pick(&mut rules, &mut rng, ("POST", "/rate_limit"), 0), None);
        assert_eq!(
            pick(&mut rules, &mut rng, ("GET", "/rate_limit"), 0),
            Some(FaultAction::Drop)
        );
        assert_eq!(
            pick(&mut rules, &mut rng, ("GET", "/rate_limit"), 0),
            Some(FaultAction::Drop)
        );
        assert_eq!(pick(&mut rules, &mut rng, ("GET", "/rate_limit"), 0), None);
        assert!(rules.is_empty());
        let mut r = vec![RunnerFaultRule {
            name_prefix: Some("a-".into()),
            trigger: Trigger::Times(1),
            fault: RunnerFault::CrashAtStart,
        }];
        assert!(pick_runner_faults(&mut r, &mut rng, "b-1").is_empty());
        assert_eq!(
            pick_runner_faults(&mut r, &mut rng, "a-1"),
            vec![RunnerFault::CrashAtStart]
        );
        assert!(pick_runner_faults(&mut r, &mut rng, "a-2").is_empty());
    }
}
