//! The pool as a person reads it at fifty hosts (pure): one summary line of its hosts
//! and jobs, the fields `coordinator hosts` and `coordinator leases` sort by, and the
//! filter they and top's Pool pane apply (every word of it, case-insensitive, somewhere
//! in the row).

use crate::domain::job_phase::Phase;
use crate::store::{CoordHostRow, CoordJobRow};
use std::cmp::{Ordering, Reverse};

/// The whole pool in figures, whatever a filter shows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Summary {
    pub up: usize,
    pub down: usize,
    /// Connected hosts that are draining (counted in `up` too).
    pub draining: usize,
    /// Live runners on the connected hosts (capacity less free, as each reported).
    pub runners: u64,
    /// The connected hosts' capacity added up.
    pub capacity: u64,
    /// Jobs with an open lease (offered or accepted).
    pub leases: usize,
    pub waiting: usize,
    pub started: usize,
}

impl Summary {
    pub fn of(hosts: &[CoordHostRow], jobs: &[CoordJobRow]) -> Summary {
        let mut s = Summary::default();
        for h in hosts {
            if !h.connected {
                s.down += 1;
                continue;
            }
            s.up += 1;
            s.draining += usize::from(h.draining);
            let cap = u64::from(h.capacity.unwrap_or(0));
            s.capacity += cap;
            s.runners += cap.saturating_sub(u64::from(h.free.unwrap_or(0)));
        }
        for j in jobs {
            match j.phase.known() {
                Some(p) if p.is_leased() => s.leases += 1,
                Some(Phase::Waiting) => s.waiting += 1,
                Some(Phase::Started) => s.started += 1,
                _ => {}
            }
        }
        s
    }

    /// `hosts 48 up, 2 down, 1 draining · runners 120/400 · leases 37 open · jobs 12
    /// waiting, 80 started`.
    pub fn line(&self) -> String {
        format!(
            "{} · jobs {} waiting, {} started",
            self.hosts_line(),
            self.waiting,
            self.started
        )
    }

    /// The line without the jobs' counts (top's Pool pane says them over its jobs).
    pub fn hosts_line(&self) -> String {
        format!(
            "hosts {} up, {} down, {} draining · runners {}/{} · leases {} open",
            self.up, self.down, self.draining, self.runners, self.capacity, self.leases,
        )
    }
}

/// A host's state word: `down`, `draining` or `up`.
pub fn host_state(h: &CoordHostRow) -> &'static str {
    match (h.connected, h.draining) {
        (false, _) => "down",
        (true, true) => "draining",
        (true, false) => "up",
    }
}

/// Whether every word of `filter` (case-insensitive) is somewhere in `fields`; an
/// empty filter takes every row.
fn words_in(filter: &str, fields: &[&str]) -> bool {
    let hay = fields.join(" ").to_lowercase();
    filter
        .to_lowercase()
        .split_whitespace()
        .all(|w| hay.contains(w))
}

/// Whether host `h` matches `filter`: its name, state word, binary version, profiles,
/// unfit profiles and last refusal's word.
pub fn host_matches(h: &CoordHostRow, filter: &str) -> bool {
    let mut fields = vec![
        h.name.as_str(),
        host_state(h),
        h.binary_version.as_deref().unwrap_or(""),
        h.last_refusal.as_deref().unwrap_or(""),
    ];
    fields.extend(h.profiles.iter().map(String::as_str));
    fields.extend(h.unfit.iter().map(String::as_str));
    words_in(filter, &fields)
}

/// Whether job `j` matches `filter`: its key, target, repository, name, phase, host,
/// profile, lease, runner and labels.
pub fn job_matches(j: &CoordJobRow, filter: &str) -> bool {
    let phase = j.phase.to_string();
    let mut fields = vec![
        j.job_key.as_str(),
        j.target.as_str(),
        j.repo.as_str(),
        j.name.as_str(),
        phase.as_str(),
        j.host.as_deref().unwrap_or(""),
        j.profile.as_deref().unwrap_or(""),
        j.lease_id.as_deref().unwrap_or(""),
        j.runner_name.as_deref().unwrap_or(""),
    ];
    fields.extend(j.labels.iter().map(String::as_str));
    words_in(filter, &fields)
}

/// A field `--sort` takes: its word, and how it orders two rows (name breaks ties).
pub struct SortField<R: 'static> {
    pub word: &'static str,
    order: fn(&R, &R) -> Ordering,
}

/// `coordinator hosts --sort`: counts largest first, the rest in their natural order.
pub const HOST_SORTS: &[SortField<CoordHostRow>] = &[
    SortField {
        word: "name",
        order: |a, b| a.name.cmp(&b.name),
    },
    SortField {
        word: "state",
        order: |a, b| host_state(a).cmp(host_state(b)),
    },
    SortField {
        word: "version",
        order: |a, b| a.binary_version.cmp(&b.binary_version),
    },
    SortField {
        word: "free",
        order: |a, b| Reverse(a.free).cmp(&Reverse(b.free)),
    },
    SortField {
        word: "leases",
        order: |a, b| Reverse(a.open_leases).cmp(&Reverse(b.open_leases)),
    },
    SortField {
        word: "started",
        order: |a, b| Reverse(a.started).cmp(&Reverse(b.started)),
    },
    SortField {
        word: "refusals",
        order: |a, b| Reverse(a.refusals).cmp(&Reverse(b.refusals)),
    },
    SortField {
        word: "seen",
        order: |a, b| Reverse(a.last_seen_at).cmp(&Reverse(b.last_seen_at)),
    },
];

/// `coordinator leases --sort`: `queued` (oldest first) is the default.
pub const JOB_SORTS: &[SortField<CoordJobRow>] = &[
    SortField {
        word: "queued",
        order: |a, b| a.queued_at.cmp(&b.queued_at),
    },
    SortField {
        word: "job",
        order: |a, b| a.job_key.cmp(&b.job_key),
    },
    SortField {
        word: "target",
        order: |a, b| a.target.cmp(&b.target),
    },
    SortField {
        word: "phase",
        order: |a, b| a.phase.to_string().cmp(&b.phase.to_string()),
    },
    SortField {
        word: "host",
        order: |a, b| a.host.cmp(&b.host),
    },
    SortField {
        word: "expires",
        order: |a, b| a.expires_at.cmp(&b.expires_at),
    },
];

/// The field named `word`, or an error naming every field there is.
pub fn sort_field<'a, R>(
    fields: &'a [SortField<R>],
    word: &str,
) -> Result<&'a SortField<R>, String> {
    fields.iter().find(|f| f.word == word).ok_or_else(|| {
        let all: Vec<&str> = fields.iter().map(|f| f.word).collect();
        format!("unknown field {word:?}: sort by one of {}", all.join(", "))
    })
}

/// The hosts `filter` takes, in `by`'s order (name breaks ties).
pub fn hosts_shown(
    hosts: &[CoordHostRow],
    by: &SortField<CoordHostRow>,
    filter: &str,
) -> Vec<CoordHostRow> {
    let mut out: Vec<CoordHostRow> = hosts
        .iter()
        .filter(|h| host_matches(h, filter))
        .cloned()
        .collect();
    out.sort_by(|a, b| (by.order)(a, b).then_with(|| a.name.cmp(&b.name)));
    out
}

/// The jobs `filter` takes, in `by`'s order (the job key breaks ties).
pub fn jobs_shown(
    jobs: &[CoordJobRow],
    by: &SortField<CoordJobRow>,
    filter: &str,
) -> Vec<CoordJobRow> {
    let mut out: Vec<CoordJobRow> = jobs
        .iter()
        .filter(|j| job_matches(j, filter))
        .cloned()
        .collect();
    out.sort_by(|a, b| (by.order)(a, b).then_with(|| a.job_key.cmp(&b.job_key)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host(name: &str, connected: bool, draining: bool, free: u32, v: &str) -> CoordHostRow {
        CoordHostRow {
            name: name.into(),
            connected,
            draining,
            capacity: Some(8),
            free: Some(free),
            binary_version: Some(v.into()),
            profiles: vec!["pool".into()],
            ..CoordHostRow::default()
        }
    }

    fn job(key: &str, phase: Phase, host: Option<&str>, queued_at: i64) -> CoordJobRow {
        CoordJobRow {
            job_key: key.into(),
            target: "pool".into(),
            repo: "acme/app".into(),
            name: format!("build {key}"),
            phase: phase.into(),
            host: host.map(String::from),
            queued_at,
            ..CoordJobRow::default()
        }
    }

    #[test]
    fn the_summary_counts_the_whole_pool() {
        let hosts = [
            host("a", true, false, 2, "1.0.0"),
            host("b", true, true, 8, "1.0.0"),
            host("c", false, false, 0, "0.9.0"),
        ];
        let jobs = [
            job("1", Phase::Offered, Some("a"), 1),
            job("2", Phase::Accepted, Some("a"), 2),
            job("3", Phase::Started, Some("a"), 3),
            job("4", Phase::Waiting, None, 4),
        ];
        let s = Summary::of(&hosts, &jobs);
        assert_eq!(
            s.line(),
            "hosts 2 up, 1 down, 1 draining · runners 6/16 · leases 2 open · jobs 1 waiting, \
             1 started"
        );
    }

    #[test]
    fn a_filter_takes_rows_with_every_word_and_a_sort_orders_them() {
        let hosts: Vec<CoordHostRow> = (0..50)
            .map(|i| {
                let v = if i < 3 { "1.1.0" } else { "1.0.0" };
                host(&format!("h{i:02}"), i % 10 != 0, false, (i % 8) as u32, v)
            })
            .collect();
        let by = sort_field(HOST_SORTS, "name").unwrap();
        assert_eq!(hosts_shown(&hosts, by, "").len(), 50);
        let new: Vec<String> = hosts_shown(&hosts, by, "1.1")
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert_eq!(new, ["h00", "h01", "h02"]);
        let down: Vec<String> = hosts_shown(&hosts, by, "DOWN 1.0.0")
            .into_iter()
            .map(|h| h.name)
            .collect();
        assert_eq!(down, ["h10", "h20", "h30", "h40"]);
        let free = hosts_shown(&hosts, sort_field(HOST_SORTS, "free").unwrap(), "");
        assert_eq!(free[0].free, Some(7), "largest first");
        assert_eq!(free[0].name, "h07", "name breaks ties");
        let jobs = [
            job("b", Phase::Waiting, None, 5),
            job("a", Phase::Started, Some("h01"), 9),
        ];
        let by = sort_field(JOB_SORTS, "queued").unwrap();
        let keys: Vec<String> = jobs_shown(&jobs, by, "")
            .into_iter()
            .map(|j| j.job_key)
            .collect();
        assert_eq!(keys, ["b", "a"]);
        assert_eq!(jobs_shown(&jobs, by, "h01 started").len(), 1);
    }

    #[test]
    fn an_unknown_sort_field_is_refused_naming_every_field() {
        let e = sort_field(HOST_SORTS, "speed").err().unwrap();
        assert_eq!(
            e,
            "unknown field \"speed\": sort by one of name, state, version, free, leases, \
             started, refusals, seen"
        );
        let e = sort_field(JOB_SORTS, "name").err().unwrap();
        assert!(
            e.contains("queued, job, target, phase, host, expires"),
            "{e}"
        );
    }
}
