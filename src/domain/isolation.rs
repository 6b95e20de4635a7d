//! Containment settings and the pure decision of which containment is in effect: the
//! host's `isolation` and `runner_uids`, a profile's `memory_max`, `cpu_max` and
//! `pids_max`, and [`effective`], which turns them and what the daemon can do into
//! the mode the daemon runs runners in and the words `status` and `doctor` show.

use super::validate::Invalid;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The host's `isolation` setting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// Per-attempt uids when `runner_uids` is set (and then required: a host that set a
    /// range never silently runs jobs as the daemon); none otherwise.
    #[default]
    Auto,
    /// Per-attempt uids, required: no runner starts without them.
    Uids,
    /// Runners run as the daemon's user (or a profile's `run_as`): nothing contains a
    /// job but what that user cannot do. For laptops and the demo.
    None,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Auto => "auto",
            Isolation::Uids => "uids",
            Isolation::None => "none",
        }
    }

    pub fn parse(arg: &str, value: &str) -> Result<Isolation, Invalid> {
        match value {
            "auto" => Ok(Isolation::Auto),
            "uids" => Ok(Isolation::Uids),
            "none" => Ok(Isolation::None),
            _ => Err(Invalid::new(
                arg,
                format!("expected auto, uids or none (got {value:?})"),
            )),
        }
    }
}

/// A profile's `limits` setting: what happens when the host cannot enforce one of the
/// profile's `memory_max`, `cpu_max` or `pids_max` (no controller delegated to the
/// daemon, a v1 host without that hierarchy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LimitsMode {
    /// The default: a limit that is not in effect stops the profile's starts, and
    /// `doctor` fails. A limit someone set is a promise, never a hope.
    #[default]
    Required,
    /// Start anyway; `doctor` and `status` warn which limits do not apply.
    BestEffort,
}

impl LimitsMode {
    pub fn as_str(self) -> &'static str {
        match self {
            LimitsMode::Required => "required",
            LimitsMode::BestEffort => "best-effort",
        }
    }

    pub fn parse(arg: &str, value: &str) -> Result<LimitsMode, Invalid> {
        match value {
            "required" => Ok(LimitsMode::Required),
            "best-effort" => Ok(LimitsMode::BestEffort),
            _ => Err(Invalid::new(
                arg,
                format!("expected required or best-effort (got {value:?})"),
            )),
        }
    }

    /// As stored; an unknown word (a newer build's) reads as the safe default.
    pub fn from_stored(value: &str) -> LimitsMode {
        LimitsMode::parse("limits", value).unwrap_or_default()
    }
}

/// The most ids a range may hold: a sub-uid-sized block, far more than runners per host.
const MAX_RANGE_LEN: u32 = 65536;

/// An inclusive range of uids the host sets aside for runners (`runner_uids=START-END`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UidRange {
    pub start: u32,
    pub end: u32,
}

impl UidRange {
    /// [`UidRange::parse`] for a named argument: the refusal names it (exit code 2).
    pub fn parse_arg(arg: &str, value: &str) -> Result<UidRange, Invalid> {
        UidRange::parse(value).map_err(|why| Invalid::new(arg, why))
    }

    /// Parses `START-END`; refuses 0 (root) in the range, `START > END`, ranges of more
    /// than 65536 ids, and anything that is not two decimal numbers.
    pub fn parse(s: &str) -> Result<UidRange, String> {
        let Some((a, b)) = s.split_once('-') else {
            return Err(format!(
                "{s:?} is not a uid range: write START-END, e.g. 61000-61999"
            ));
        };
        let num = |part: &str| -> Result<u32, String> {
            if part.is_empty() || !part.bytes().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "{s:?}: {part:?} is not a uid (a decimal number; write START-END)"
                ));
            }
            part.parse()
                .map_err(|_| format!("{s:?}: {part} is too large for a uid"))
        };
        let (start, end) = (num(a)?, num(b)?);
        if start == 0 {
            return Err(format!(
                "{s:?}: uid 0 is root and cannot run a job; start the range above the system users"
            ));
        }
        if start > end {
            return Err(format!("{s:?}: the range starts after it ends"));
        }
        let r = UidRange { start, end };
        if r.len() > MAX_RANGE_LEN {
            return Err(format!(
                "{s:?}: {} ids is more than the {MAX_RANGE_LEN} a range may hold",
                u64::from(end) - u64::from(start) + 1
            ));
        }
        Ok(r)
    }

    /// How many uids the range holds (0 if built with `start > end`).
    pub fn len(&self) -> u32 {
        if self.start > self.end {
            0
        } else {
            (self.end - self.start).saturating_add(1)
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, uid: u32) -> bool {
        self.start <= uid && uid <= self.end
    }

    pub fn iter(&self) -> std::ops::RangeInclusive<u32> {
        self.start..=self.end
    }
}

impl fmt::Display for UidRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.start, self.end)
    }
}

impl FromStr for UidRange {
    type Err = String;
    fn from_str(s: &str) -> Result<UidRange, String> {
        UidRange::parse(s)
    }
}

/// The containment runners start with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InEffect {
    /// Each attempt under its own uid from the range.
    Uids(UidRange),
    /// Runners run as the daemon's user (or a profile's `run_as`); `why` says so.
    None { why: String },
    /// Isolation is required but cannot be had: no runner starts. `why` names the fix.
    Refused { why: String },
}

impl InEffect {
    /// One word for tables and metrics: `uids`, `none` or `refused`.
    pub fn word(&self) -> &'static str {
        match self {
            InEffect::Uids(_) => "uids",
            InEffect::None { .. } => "none",
            InEffect::Refused { .. } => "refused",
        }
    }

    /// The line `status`, `doctor` and the daemon's start line print.
    pub fn describe(&self) -> String {
        match self {
            InEffect::Uids(r) => format!("uids: each runner under its own uid from {r}"),
            InEffect::None { why } => format!("none: {why}"),
            InEffect::Refused { why } => format!("refused, no runner starts: {why}"),
        }
    }
}

/// What to do when jobs run uncontained (`InEffect::None`), said once beside the
/// reason, which says only what is: from `isolation=none` and from an unset range
/// alike (the package reserves a range of runner users).
pub const CONTAIN_HINT: &str = "to give each job its own uid, create runner users \
     (packaging/install.sh --runner-users START-END) and set host isolation=auto \
     runner_uids=START-END";

/// What the daemon can do, as read from the running process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Powers {
    /// It holds every capability a per-attempt identity needs (see
    /// `runner::caps::NEEDED`).
    pub can_switch_users: bool,
    /// Its own uid (for the message).
    pub uid: u32,
}

/// Which containment is in effect: the setting, the range and what the daemon can do.
/// `auto` with a range set behaves as `uids` (a host that set a range meant it, so it
/// fails closed rather than run jobs as the daemon); `auto` without one is `none`.
pub fn effective(setting: Isolation, range: Option<UidRange>, powers: Powers) -> InEffect {
    let runs_as = if powers.uid == 0 {
        "root".to_string()
    } else {
        format!("the daemon's own user (uid {})", powers.uid)
    };
    match (setting, range) {
        (Isolation::None, _) => InEffect::None {
            why: format!("isolation=none: jobs run as {runs_as} and can reach what it can"),
        },
        (Isolation::Auto, None) => InEffect::None {
            why: format!("runner_uids is not set: jobs run as {runs_as} and can reach what it can"),
        },
        (Isolation::Uids, None) => InEffect::Refused {
            why: "isolation=uids needs host runner_uids=START-END".into(),
        },
        (Isolation::Uids | Isolation::Auto, Some(r)) => {
            if powers.can_switch_users {
                InEffect::Uids(r)
            } else {
                InEffect::Refused {
                    why: format!(
                        "runner_uids={r} is set but the daemon (uid {}) cannot switch users: \
                         run it as root (the packaged unit does) or set isolation=none",
                        powers.uid
                    ),
                }
            }
        }
    }
}

/// Parses a byte size: a number with an optional `K`, `M`, `G` or `T` (powers of 1024,
/// an optional trailing `i`/`iB`/`B`), e.g. `512M`, `2G`, `1.5G`, `1073741824`.
pub fn parse_bytes(arg: &str, value: &str) -> Result<u64, Invalid> {
    let bad = || {
        Invalid::new(
            arg,
            format!("expected a size such as 512M, 2G or a number of bytes (got {value:?})"),
        )
    };
    let v = value.trim();
    let split = v
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "K" | "KI" | "KB" | "KIB" => 1 << 10,
        "M" | "MI" | "MB" | "MIB" => 1 << 20,
        "G" | "GI" | "GB" | "GIB" => 1 << 30,
        "T" | "TI" | "TB" | "TIB" => 1 << 40,
        _ => return Err(bad()),
    };
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(bad());
    }
    let n: f64 = num.parse().map_err(|_| bad())?;
    let bytes = n * mult as f64;
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(bad());
    }
    Ok(bytes as u64)
}

/// The smallest memory limit a runner can live under: the .NET runner alone needs
/// about 100 MiB before a job starts.
pub const MIN_MEMORY_MAX: u64 = 16 << 20;
/// The smallest pids limit: the listener, the worker and a shell need a few.
pub const MIN_PIDS_MAX: u32 = 8;
pub const MAX_PIDS_MAX: u32 = 4_194_304;

/// `memory_max`: a size of at least [`MIN_MEMORY_MAX`], or empty/`none` for no limit.
pub fn memory_max(arg: &str, value: &str) -> Result<Option<u64>, Invalid> {
    if matches!(value, "" | "none" | "max") {
        return Ok(None);
    }
    let b = parse_bytes(arg, value)?;
    if b < MIN_MEMORY_MAX {
        return Err(Invalid::new(
            arg,
            format!("must be at least 16M, or none for no limit (got {value:?})"),
        ));
    }
    Ok(Some(b))
}

/// `cpu_max`: CPUs as a decimal (`0.5`, `2`, `1.25`), kept in thousandths of a CPU; at
/// least 0.01 and at most 4096. Empty or `none` for no limit.
pub fn cpu_max(arg: &str, value: &str) -> Result<Option<u32>, Invalid> {
    if matches!(value, "" | "none" | "max") {
        return Ok(None);
    }
    let bad = || {
        Invalid::new(
            arg,
            format!("expected CPUs such as 0.5, 2 or 1.25, or none (got {value:?})"),
        )
    };
    if !value.bytes().all(|b| b.is_ascii_digit() || b == b'.') || value.starts_with('.') {
        return Err(bad());
    }
    let cpus: f64 = value.parse().map_err(|_| bad())?;
    let millis = (cpus * 1000.0).round();
    if !(10.0..=4_096_000.0).contains(&millis) {
        return Err(Invalid::new(
            arg,
            format!("must be between 0.01 and 4096 CPUs (got {value:?})"),
        ));
    }
    Ok(Some(millis as u32))
}

/// `pids_max`: processes and threads at most, [`MIN_PIDS_MAX`] or more, or none.
pub fn pids_max(arg: &str, value: &str) -> Result<Option<u32>, Invalid> {
    if matches!(value, "" | "none" | "max") {
        return Ok(None);
    }
    let n = super::validate::number_in(arg, value, MIN_PIDS_MAX as u64, MAX_PIDS_MAX as u64)?;
    Ok(Some(n as u32))
}

/// Thousandths of a CPU as a person reads them: `2`, `0.5`, `1.25`.
pub fn human_cpus(millis: u32) -> String {
    let s = format!("{:.3}", millis as f64 / 1000.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> Powers {
        Powers {
            can_switch_users: true,
            uid: 0,
        }
    }

    fn user() -> Powers {
        Powers {
            can_switch_users: false,
            uid: 1000,
        }
    }

    const R: UidRange = UidRange {
        start: 61000,
        end: 61063,
    };

    #[test]
    fn what_is_in_effect() {
        assert_eq!(
            effective(Isolation::Auto, Some(R), root()),
            InEffect::Uids(R)
        );
        assert_eq!(
            effective(Isolation::Uids, Some(R), root()),
            InEffect::Uids(R)
        );
        assert_eq!(effective(Isolation::Auto, None, root()).word(), "none");
        assert!(
            effective(Isolation::Auto, None, root())
                .describe()
                .contains("jobs run as root")
        );
        assert_eq!(effective(Isolation::None, Some(R), root()).word(), "none");
        // A range set but no power to use it fails closed, whether auto or uids.
        for s in [Isolation::Auto, Isolation::Uids] {
            let e = effective(s, Some(R), user());
            assert_eq!(e.word(), "refused", "{s:?}");
            assert!(e.describe().contains("isolation=none"));
        }
        assert_eq!(effective(Isolation::Uids, None, root()).word(), "refused");
        assert!(
            effective(Isolation::Auto, None, user())
                .describe()
                .contains("uid 1000")
        );
    }

    #[test]
    fn parses_ranges_and_refuses_bad_ones() {
        let r = UidRange::parse("61000-61999").unwrap();
        assert_eq!(
            r,
            UidRange {
                start: 61000,
                end: 61999
            }
        );
        assert_eq!(r.len(), 1000);
        assert!(r.contains(61000) && r.contains(61999));
        assert!(!r.contains(60999) && !r.contains(62000));
        assert_eq!(r.to_string(), "61000-61999");
        assert_eq!("5-5".parse::<UidRange>().unwrap().len(), 1);
        assert_eq!(UidRange::parse("1-65536").unwrap().len(), 65536);

        for (bad, says) in [
            ("0-10", "root"),
            ("10-5", "starts after"),
            ("1-65537", "more than"),
            ("100000-200000", "more than"),
            ("abc", "START-END"),
            ("10", "START-END"),
            ("a-10", "not a uid"),
            ("10-", "not a uid"),
            ("-10", "not a uid"),
            ("+1-10", "not a uid"),
            (" 1-10", "not a uid"),
            ("1-10-20", "not a uid"),
            ("1-99999999999", "too large"),
        ] {
            let err = UidRange::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad:?}: {err}");
            assert!(err.contains(&format!("{bad:?}")), "{bad:?} is named: {err}");
        }
        let hand = UidRange { start: 9, end: 3 };
        assert_eq!(hand.len(), 0);
        assert!(hand.is_empty());
    }

    #[test]
    fn sizes_and_limits() {
        assert_eq!(parse_bytes("m", "512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("m", "2G").unwrap(), 2 << 30);
        assert_eq!(parse_bytes("m", "1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_bytes("m", "4096").unwrap(), 4096);
        assert_eq!(parse_bytes("m", "64 mb").unwrap(), 64 << 20);
        for bad in ["", "M", "1.2.3G", "12X", "-5M", "1e9"] {
            assert!(parse_bytes("m", bad).is_err(), "{bad}");
        }
        assert_eq!(memory_max("memory_max", "none").unwrap(), None);
        assert_eq!(memory_max("memory_max", "").unwrap(), None);
        assert!(memory_max("memory_max", "1M").is_err());
        assert_eq!(cpu_max("cpu_max", "1.5").unwrap(), Some(1500));
        assert_eq!(cpu_max("cpu_max", "2").unwrap(), Some(2000));
        assert_eq!(cpu_max("cpu_max", "none").unwrap(), None);
        for bad in ["0", "0.001", "-1", "abc", "5000", ".5", "1,5"] {
            assert!(cpu_max("cpu_max", bad).is_err(), "{bad}");
        }
        assert_eq!(pids_max("pids_max", "512").unwrap(), Some(512));
        assert!(pids_max("pids_max", "2").is_err());
        assert!(pids_max("pids_max", "x").is_err());
    }

    #[test]
    fn human_units() {
        assert_eq!(human_cpus(1500), "1.5");
        assert_eq!(human_cpus(2000), "2");
        assert_eq!(human_cpus(1250), "1.25");
    }
}
