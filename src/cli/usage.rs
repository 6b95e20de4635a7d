//! `usage` and `coordinator usage`: who used the host (or, on a coordinator, the pool's
//! hosts), and how much, from the daily roll-up: grouped by repository, workflow, job,
//! profile, day or (on a coordinator) host, any of them together, the biggest first,
//! as a table, JSON or CSV, with a cost column when the store has prices.
//!
//! [`parse_query`] and [`report`] are pure; `run` reads the store and prints.

use super::output::{Out, table};
use super::parse::Invocation;
use super::spec::opts;
use super::{CliError, CliResult};
use crate::domain::rollup::{DAY_MS, Day, UsageFigures, WAIT_BOUNDS_SECS, day_of};
use crate::domain::validate;
use crate::store::{SqliteStore, Store, UsageRow};
use crate::timefmt::{Millis, format_rfc3339, now_millis, parse_rfc3339};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What a row can be grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dim {
    Repo,
    Workflow,
    Job,
    Profile,
    Day,
    /// The pool host that reported the row (`coordinator usage` only).
    Host,
}

impl Dim {
    const ALL: [Dim; 6] = [
        Dim::Repo,
        Dim::Workflow,
        Dim::Job,
        Dim::Profile,
        Dim::Day,
        Dim::Host,
    ];

    fn word(self) -> &'static str {
        match self {
            Dim::Repo => "repo",
            Dim::Workflow => "workflow",
            Dim::Job => "job",
            Dim::Profile => "profile",
            Dim::Day => "day",
            Dim::Host => "host",
        }
    }

    fn value(self, r: &UsageRow) -> String {
        let k = &r.key;
        let text = match self {
            Dim::Repo => &k.repo,
            Dim::Workflow => &k.workflow,
            Dim::Job => &k.job,
            Dim::Profile => &k.profile,
            Dim::Day => return day_text(k.day),
            Dim::Host => &r.host,
        };
        if text.is_empty() {
            "-".into()
        } else {
            text.clone()
        }
    }
}

/// `usage`'s arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query {
    pub from: Day,
    pub until: Day,
    pub by: Vec<Dim>,
    /// At most this many groups; the rest are summed as `other`.
    pub top: Option<usize>,
    pub csv: bool,
}

const DEFAULT_SINCE_DAYS: i64 = 30;

/// A day as `YYYY-MM-DD`.
fn day_text(day: Day) -> String {
    format_rfc3339(day * DAY_MS)[..10].to_string()
}

/// `--since`/`--until`: a date (`2026-01-31`) or how long ago (`30d`, `12h`).
fn parse_day(arg: &str, value: &str, now: Millis) -> Result<Day, CliError> {
    if let Some(at) = parse_rfc3339(&format!("{value}T00:00:00Z")) {
        return Ok(day_of(at));
    }
    let secs = validate::seconds_in(arg, value, 0, 20 * 365 * 86_400).map_err(|_| {
        CliError::usage(
            arg,
            &format!("expected a date YYYY-MM-DD or a time ago such as 30d (got {value:?})"),
        )
    })?;
    Ok(day_of(now - secs as Millis * 1000))
}

/// Whose roll-up a report reads: this host's, or on a coordinator its hosts'.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Books {
    Host,
    Pool,
}

/// The query `inv` asks for at `now` of `books`; any argument that does not read is
/// exit 2, naming it.
pub fn parse_query(inv: &Invocation, now: Millis, books: Books) -> Result<Query, CliError> {
    let from = match inv.value(&opts::usage::SINCE) {
        Some(v) => parse_day("--since", v, now)?,
        None => day_of(now) - (DEFAULT_SINCE_DAYS - 1),
    };
    let until = match inv.value(&opts::usage::UNTIL) {
        Some(v) => parse_day("--until", v, now)?,
        None => day_of(now),
    };
    if until < from {
        return Err(CliError::usage(
            "--until",
            &format!("{} is before --since {}", day_text(until), day_text(from)),
        ));
    }
    let mut by = Vec::new();
    for w in inv.value(&opts::usage::BY).unwrap_or("repo").split(',') {
        let w = w.trim();
        let found = Dim::ALL.into_iter().find(|d| d.word() == w);
        let Some(d) = found.filter(|d| *d != Dim::Host || books == Books::Pool) else {
            let host = if books == Books::Pool { ", host" } else { "" };
            let pool = if found.is_some() {
                " (host is for 'coordinator usage')"
            } else {
                ""
            };
            return Err(CliError::usage(
                "--by",
                &format!(
                    "unknown grouping {w:?}{pool}; use repo, workflow, job, profile, day{host}, comma-separated"
                ),
            ));
        };
        if !by.contains(&d) {
            by.push(d);
        }
    }
    let top = inv
        .value(&opts::usage::TOP)
        .map(|v| validate::number_in("--top", v, 1, 100_000).map(|n| n as usize))
        .transpose()?;
    let csv = inv.flag(&opts::usage::CSV);
    if csv && inv.json {
        return Err(CliError::usage("--csv", "cannot be combined with --json"));
    }
    Ok(Query {
        from,
        until,
        by,
        top,
        csv,
    })
}

/// One line of the report: its group's values (in `by`'s order) and figures.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub group: Vec<String>,
    pub figures: UsageFigures,
}

/// The rows grouped as `q.by` says, the biggest runner time first (then by name); past
/// `q.top`, the rest summed in one `other` line. Returns the lines and the total.
pub fn report(rows: &[UsageRow], q: &Query) -> (Vec<Line>, UsageFigures) {
    let mut groups: BTreeMap<Vec<String>, UsageFigures> = BTreeMap::new();
    let mut total = UsageFigures::default();
    for r in rows
        .iter()
        .filter(|r| (q.from..=q.until).contains(&r.key.day))
    {
        let g: Vec<String> = q.by.iter().map(|d| d.value(r)).collect();
        groups.entry(g).or_default().merge(&r.figures);
        total.merge(&r.figures);
    }
    let mut lines: Vec<Line> = groups
        .into_iter()
        .map(|(group, figures)| Line { group, figures })
        .collect();
    // A day report reads in date order; others biggest first.
    if q.by != [Dim::Day] {
        lines.sort_by(|a, b| {
            b.figures
                .runner_ms()
                .cmp(&a.figures.runner_ms())
                .then_with(|| a.group.cmp(&b.group))
        });
    }
    if let Some(n) = q.top
        && lines.len() > n
    {
        let mut other = UsageFigures::default();
        for l in lines.drain(n..) {
            other.merge(&l.figures);
        }
        lines.push(Line {
            group: q.by.iter().map(|_| "other".to_string()).collect(),
            figures: other,
        });
    }
    (lines, total)
}

fn hours(ms: u64) -> String {
    format!("{:.2}", ms as f64 / 3_600_000.0)
}

fn wait(f: &UsageFigures, q: f64) -> Option<u64> {
    f.wait.quantile_secs(q)
}

const FIGURE_HEADERS: [&str; 12] = [
    "JOBS", "RUNNERS", "BUSY_H", "IDLE_H", "CPU_H", "GIB_H", "PEAK_RSS", "MEAN_RSS", "WAIT_P50",
    "WAIT_P95", "LOST", "RERUNS",
];

/// The figures as a table's (or CSV's) cells, with the cost when priced.
fn cells(f: &UsageFigures, prices: Option<(f64, f64)>, human: bool) -> Vec<String> {
    let bytes = |b: u64| {
        if human {
            crate::units::bytes(b)
        } else {
            b.to_string()
        }
    };
    // The waits are the histogram's bucket bounds, whole seconds: `10s`, `1m`.
    let secs = |s: Option<u64>| s.map_or_else(|| "-".into(), crate::timefmt::duration);
    let mut c = vec![
        f.jobs.to_string(),
        f.runners.to_string(),
        hours(f.busy_ms),
        hours(f.idle_ms),
        format!("{:.2}", f.cpu_secs() / 3600.0),
        format!("{:.2}", f.gib_secs() / 3600.0),
        bytes(f.peak_rss_bytes),
        bytes(f.mean_rss_bytes()),
        secs(wait(f, 0.5)),
        secs(wait(f, 0.95)),
        f.lost.to_string(),
        f.reruns.to_string(),
    ];
    if let Some((cpu, gib)) = prices {
        c.push(format!("{:.2}", f.cost(cpu, gib)));
    }
    c
}

fn header(q: &Query, prices: Option<(f64, f64)>) -> Vec<String> {
    let mut h: Vec<String> = q.by.iter().map(|d| d.word().to_uppercase()).collect();
    h.extend(FIGURE_HEADERS.iter().map(|s| s.to_string()));
    if prices.is_some() {
        h.push("COST".into());
    }
    h
}

fn figures_json(f: &UsageFigures, prices: Option<(f64, f64)>) -> Value {
    let mut v = json!({
        "jobs": f.jobs,
        "runners": f.runners,
        "busy_seconds": f.busy_ms / 1000,
        "idle_seconds": f.idle_ms / 1000,
        "cpu_seconds": f.cpu_secs(),
        "gib_seconds": f.gib_secs(),
        "peak_rss_bytes": f.peak_rss_bytes,
        "mean_rss_bytes": f.mean_rss_bytes(),
        "wait_p50_seconds": wait(f, 0.5),
        "wait_p95_seconds": wait(f, 0.95),
        "wait_histogram": {"le_seconds": WAIT_BOUNDS_SECS, "counts": f.wait.0},
        "lost": f.lost,
        "reruns": f.reruns,
    });
    if let Some((cpu, gib)) = prices {
        v["cost"] = json!(f.cost(cpu, gib));
    }
    v
}

/// One CSV field (RFC 4180: quoted when it holds a comma, a quote or a line break).
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// One CSV field holding a name from outside (a repository, workflow, job, profile or
/// host): its hazards escaped as everywhere it is printed (`printable::escape`, line
/// breaks included), and, when it would start a formula in a spreadsheet (OWASP's
/// CSV injection: a first `=`, `+`, `-`, `@`, tab or carriage return), a `'` put
/// before it and the field quoted. The report's own `-` (no name) is left as it is.
fn csv_name(s: &str) -> String {
    let formula = s != "-" && s.starts_with(['=', '+', '-', '@', '\t', '\r']);
    let s = crate::printable::escape(s);
    if formula {
        format!("\"'{}\"", s.replace('"', "\"\""))
    } else {
        csv_field(&s)
    }
}

/// A CSV line whose first `names` cells are names from outside ([`csv_name`]); the
/// rest (the header, the figures, `total` and `other`) are the report's own.
fn csv_line(cells: &[String], names: usize) -> String {
    cells
        .iter()
        .enumerate()
        .map(|(i, c)| if i < names { csv_name(c) } else { csv_field(c) })
        .collect::<Vec<_>>()
        .join(",")
        + "\n"
}

/// `usage` (`Books::Host`) and `coordinator usage` (`Books::Pool`): reads the roll-up
/// of the asked days and prints the report, priced by this store's cost model.
pub fn run(inv: &Invocation, store: &SqliteStore, out: &mut Out, books: Books) -> CliResult {
    let q = parse_query(inv, now_millis(), books)?;
    let prices = crate::store::usage_settings(store)?.prices;
    let rows = match books {
        Books::Host => store.usage_rows(q.from, q.until)?,
        Books::Pool => store.coord_usage_rows(q.from, q.until)?,
    };
    if books == Books::Pool && rows.is_empty() && store.coord_hosts()?.is_empty() {
        // An empty report from a store no host ever joined: most likely not the
        // coordinator's (on stderr: the report itself stays what scripts read).
        eprintln!(
            "runner-manager: note: no host has joined a coordinator keeping this store; \
             coordinator usage reads what a coordinator's hosts report (this host's own: \
             runner-manager usage)"
        );
    }
    let (lines, total) = report(&rows, &q);
    let body = |human: bool| -> Vec<Vec<String>> {
        let mut rows: Vec<Vec<String>> = lines
            .iter()
            .map(|l| {
                let mut r = l.group.clone();
                r.extend(cells(&l.figures, prices, human));
                r
            })
            .collect();
        let mut t: Vec<String> = q.by.iter().map(|_| String::new()).collect();
        t[0] = "total".into();
        t.extend(cells(&total, prices, human));
        rows.push(t);
        rows
    };
    if q.csv {
        let mut text = csv_line(&header(&q, prices), 0);
        for r in body(false) {
            text.push_str(&csv_line(&r, q.by.len()));
        }
        out.emit(|| text, || Value::Null);
        return Ok(());
    }
    out.emit(
        || {
            let h = header(&q, prices);
            let h: Vec<&str> = h.iter().map(String::as_str).collect();
            let whose = match books {
                Books::Host => "usage",
                Books::Pool => "pool usage",
            };
            format!(
                "{whose} {} to {} (UTC days)\n{}",
                day_text(q.from),
                day_text(q.until),
                table(&h, &body(true))
            )
        },
        || {
            let rows: Vec<Value> = lines
                .iter()
                .map(|l| {
                    let mut v = figures_json(&l.figures, prices);
                    for (d, g) in q.by.iter().zip(&l.group) {
                        v[d.word()] = json!(g);
                    }
                    v
                })
                .collect();
            json!({
                "since": day_text(q.from),
                "until": day_text(q.until),
                "by": q.by.iter().map(|d| d.word()).collect::<Vec<_>>(),
                "rows": rows,
                "total": figures_json(&total, prices),
            })
        },
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::rollup::UsageKey;

    fn row(day: Day, repo: &str, workflow: &str, busy_ms: u64) -> UsageRow {
        UsageRow {
            host: String::new(),
            key: UsageKey {
                day,
                repo: repo.into(),
                workflow: workflow.into(),
                job: "build".into(),
                profile: "linux".into(),
            },
            figures: UsageFigures {
                runners: 1,
                jobs: 1,
                busy_ms,
                cpu_ms: busy_ms / 2,
                ..Default::default()
            },
        }
    }

    fn query(by: &[Dim], top: Option<usize>) -> Query {
        Query {
            from: 10,
            until: 12,
            by: by.to_vec(),
            top,
            csv: false,
        }
    }

    #[test]
    fn groups_add_up_to_the_total_biggest_first_with_the_rest_as_other() {
        let rows = vec![
            row(10, "o/a", "CI", 1_000),
            row(11, "o/a", "CI", 2_000),
            row(11, "o/b", "CI", 5_000),
            row(12, "", "", 500),
            row(13, "o/c", "CI", 9_000), // after --until
        ];
        let (lines, total) = report(&rows, &query(&[Dim::Repo], None));
        let got: Vec<(&str, u64)> = lines
            .iter()
            .map(|l| (l.group[0].as_str(), l.figures.busy_ms))
            .collect();
        assert_eq!(got, [("o/b", 5_000), ("o/a", 3_000), ("-", 500)]);
        assert_eq!(total.busy_ms, 8_500);
        assert_eq!(total.jobs, 4);
        let (lines, _) = report(&rows, &query(&[Dim::Repo], Some(1)));
        assert_eq!(lines.len(), 2);
        assert_eq!(
            (lines[1].group[0].as_str(), lines[1].figures.busy_ms),
            ("other", 3_500)
        );
        let (lines, _) = report(&rows, &query(&[Dim::Day], None));
        assert_eq!(lines[0].group, ["1970-01-11"], "days in date order");
        let (lines, _) = report(&rows, &query(&[Dim::Repo, Dim::Workflow], None));
        assert_eq!(lines[0].group, ["o/b", "CI"]);
    }

    #[test]
    fn csv_quotes_what_needs_it() {
        assert_eq!(
            csv_line(&["a".into(), "b,c".into(), "say \"hi\"".into()], 0),
            "a,\"b,c\",\"say \"\"hi\"\"\"\n"
        );
    }

    #[test]
    fn a_name_that_would_start_a_formula_is_neutralised_and_figures_are_not() {
        // Issue 48: a workflow named `=HYPERLINK(..)` was a live formula once opened.
        let cells: Vec<String> = [
            "=HYPERLINK(\"http://x\",\"y\")",
            "+1",
            "-1",
            "@x",
            "\tx",
            "\rx",
            "-",
            "build\nrelease",
            "-3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            csv_line(&cells, 8),
            "\"'=HYPERLINK(\"\"http://x\"\",\"\"y\"\")\",\"'+1\",\"'-1\",\"'@x\",\
             \"'\\u{9}x\",\"'\\u{d}x\",-,build\\u{a}release,-3\n"
        );
    }
}
