//! `burst300`: 300 jobs queued at once over REST, more than GitHub lets one credential
//! make JIT configs for in a minute (900 points per endpoint, 5 a POST: 180), with the
//! simulated GitHub's secondary limits on. Ours beside the naive poller in one run.
//! Prints the secondary limits hit (the goal is 0), the JIT configs of the busiest
//! minute against GitHub's 180, what was spawned in the first minute and after it
//! against what the limit allows, the longest stall of the polling (a wait from a queue
//! read's end to the next read's start: the goal is the 2 s poll interval; a read in
//! flight is polling, its runs handed to the loop as each is read), the longest gap
//! between the starts of two reads and the longest read, and the longest wait between a
//! runner's exit and its cleanup while starts waited. Then the same burst on a scale
//! set (its JIT configs go to the Actions service, outside the REST limits): the goal
//! is every runner spawned within 15 s. `--small` runs 60 jobs, which the limit never
//! paces: it checks that nothing is hit.

use super::*;

/// GitHub's JIT configs per credential and minute: 900 points, 5 each.
const LIMIT_PER_MIN: f64 = 180.0;
const JIT_ROUTE: &str = "/repos/{owner}/{repo}/actions/runners/generate-jitconfig";
const RUNS_ROUTE: &str = "/repos/{owner}/{repo}/actions/runs";

pub(super) fn burst300(cfg: Cfg) -> Result<Vec<Row>, String> {
    let (n, job_ms) = match cfg.size {
        Size::Small => (60, 1000),
        _ => (300, 2000),
    };
    let wl = Workload {
        arrivals: (0..n).map(|_| (0, job_ms)).collect(),
        poll_secs: 2,
        max: n as u32 + 10,
        deadline: Duration::from_millis(180_000 + n * 500 + cfg.slack_ms(n)),
        hooks_late_ms: None,
        after_first_poll: false,
    };
    let scn = cfg.scenario("burst300");
    let ours = run(System::Ours, &wl, cfg)?;
    let ss = run(System::OursScaleSet, &wl, cfg)?;
    let nv = run(System::Naive, &wl, cfg)?;
    println!(
        "burst300: {n} jobs queued at once, {job_ms} ms each; poll 2 s; max and host capacity {}; \
         GitHub's secondary limits on; {}",
        wl.max,
        cfg.distance.describe()
    );
    let mut rows = vec![
        Row::new(&scn, "jobs served", "jobs")
            .ours(ours.served as f64)
            .naive(nv.served as f64),
    ];
    for (who, o) in [("ours", &ours), ("naive poller", &nv)] {
        println!("{}", o.summary(&scn, who));
        let f = Figures::of(o);
        println!(
            "{scn}: {who}: secondary limits hit {}; JIT configs in the busiest minute {} of \
             {LIMIT_PER_MIN} ({:.1}%); spawned in the first minute {}, in the second {} of \
             the {} left ({:.1}% of what the limit allows); longest stall of the polling \
             (from a queue read's end to the next read's start) {} ms (goal 2000 ms); \
             longest gap between the starts of two reads {} ms, the longest read {} ms",
            o.secondary_hits,
            f.busiest_minute,
            f.busiest_minute as f64 / LIMIT_PER_MIN * 100.0,
            f.first_minute,
            f.second_minute,
            f.left_after_first,
            f.after_first_share * 100.0,
            f.idle_gap_ms,
            f.poll_gap_ms,
            f.longest_read_ms,
        );
    }
    let (a, b) = (Figures::of(&ours), Figures::of(&nv));
    rows.extend([
        Row::new(&scn, "secondary limits hit", "403s")
            .ours(ours.secondary_hits as f64)
            .naive(nv.secondary_hits as f64),
        Row::new(
            &scn,
            "JIT configs in the busiest minute (limit 180)",
            "configs",
        )
        .ours(a.busiest_minute as f64)
        .naive(b.busiest_minute as f64)
        .higher_better(),
        Row::new(&scn, "runners spawned in the first minute", "runners")
            .ours(a.first_minute as f64)
            .naive(b.first_minute as f64)
            .higher_better(),
        Row::new(
            &scn,
            "spawn rate after the first minute, of the limit's",
            "%",
        )
        .ours(a.after_first_share * 100.0)
        .naive(b.after_first_share * 100.0)
        .higher_better(),
        Row::new(&scn, "time to spawn every runner", "ms")
            .ours(ours.spawn_span_ms as f64)
            .naive(nv.spawn_span_ms as f64),
        Row::new(
            &scn,
            "longest stall of the polling, no read in flight (goal: the 2 s poll)",
            "ms",
        )
        .ours(a.idle_gap_ms as f64)
        .naive(b.idle_gap_ms as f64),
        Row::new(
            &scn,
            "longest gap between the starts of two queue reads",
            "ms",
        )
        .ours(a.poll_gap_ms as f64)
        .naive(b.poll_gap_ms as f64),
        Row::new(&scn, "longest queue read", "ms")
            .ours(a.longest_read_ms as f64)
            .naive(b.longest_read_ms as f64),
    ]);
    rows.extend(cleanup_rows(&scn, &ours, true));
    println!("{}", ss.summary(&scn, "ours on a scale set"));
    println!(
        "{scn}: ours on a scale set: all {} of {n} spawned within {} ms of the burst (goal \
         15000 ms); secondary limits hit {}",
        ss.spawns.len(),
        ss.spawn_span_ms,
        ss.secondary_hits
    );
    rows.extend([
        Row::new(&scn, "on a scale set: jobs served", "jobs").ours(ss.served as f64),
        Row::new(&scn, "on a scale set: time to spawn every runner", "ms")
            .ours(ss.spawn_span_ms as f64),
        Row::new(&scn, "on a scale set: secondary limits hit", "403s")
            .ours(ss.secondary_hits as f64),
    ]);
    Ok(rows)
}

/// What one system's run says about the limit.
struct Figures {
    busiest_minute: usize,
    first_minute: usize,
    second_minute: usize,
    left_after_first: usize,
    /// Spawned in the second minute over what the limit allows then (180, or the jobs
    /// left when fewer).
    after_first_share: f64,
    /// The longest gap between the starts of two queue reads while runners were still
    /// to spawn (the JIT calls' span), the read that spans its beginning included.
    poll_gap_ms: i64,
    /// Of the reads in that span: the longest, from its first request to its last
    /// answer, and the longest wait from one's end to the next's start.
    longest_read_ms: i64,
    idle_gap_ms: i64,
}

impl Figures {
    fn of(o: &Outcome) -> Figures {
        let minute = |from: i64| {
            o.spawns
                .iter()
                .filter(|s| (from..from + 60_000).contains(s))
                .count()
        };
        let first_minute = minute(0);
        let second_minute = minute(60_000);
        let left_after_first = o.spawns.len() - first_minute;
        let allowed = left_after_first.min(LIMIT_PER_MIN as usize).max(1);
        let mut jit: Vec<i64> = o
            .log
            .iter()
            .filter(|e| e.method == "POST" && e.endpoint == JIT_ROUTE)
            .map(|e| e.at)
            .collect();
        jit.sort_unstable();
        let busiest_minute = (0..jit.len())
            .map(|i| {
                jit[i..]
                    .iter()
                    .take_while(|t| **t < jit[i] + 60_000)
                    .count()
            })
            .max()
            .unwrap_or(0);
        let start = jit.first().copied().unwrap_or(0);
        let end = jit.last().copied().unwrap_or(0);
        let reads = reads(&o.log);
        let within = |w: &[(i64, i64)]| w[1].0 >= start && w[0].0 <= end;
        let gaps = reads.windows(2).filter(|w| within(w));
        let poll_gap_ms = gaps.clone().map(|w| w[1].0 - w[0].0).max().unwrap_or(0);
        let idle_gap_ms = gaps.map(|w| w[1].0 - w[0].1).max().unwrap_or(0);
        let longest_read_ms = reads
            .iter()
            .filter(|r| r.1 >= start && r.0 <= end)
            .map(|r| r.1 - r.0)
            .max()
            .unwrap_or(0);
        Figures {
            busiest_minute,
            first_minute,
            second_minute,
            left_after_first,
            after_first_share: if left_after_first == 0 {
                1.0
            } else {
                second_minute as f64 / allowed as f64
            },
            poll_gap_ms,
            longest_read_ms,
            idle_gap_ms,
        }
    }
}

/// The queue reads in the request log, as (first request, last answer): a read begins
/// with a run list (`GET .../actions/runs`, page after page) and goes on with the runs'
/// jobs lists; the next run list after a jobs list, or after a pause, begins the next.
/// A daemon reads its queue one read at a time, as the naive poller does.
fn reads(log: &[runner_manager::sim::LogEntry]) -> Vec<(i64, i64)> {
    let mut gets: Vec<&runner_manager::sim::LogEntry> = log
        .iter()
        .filter(|e| e.method == "GET" && e.endpoint.starts_with(RUNS_ROUTE))
        .collect();
    gets.sort_by_key(|e| e.at);
    let mut reads: Vec<(i64, i64)> = Vec::new();
    let mut last_was_list = false;
    for e in gets {
        let list = e.endpoint == RUNS_ROUTE;
        let done = e.done_at.unwrap_or(e.at);
        match reads.last_mut() {
            // A page of the same read's run lists follows its previous page's answer.
            Some(r) if !(list && (!last_was_list || e.at > r.1 + PAGE_PAUSE_MS)) => {
                r.1 = r.1.max(done)
            }
            _ => reads.push((e.at, done)),
        }
        last_was_list = list;
    }
    reads
}

/// The longest a run list's next page waits for the previous page's answer.
const PAGE_PAUSE_MS: i64 = 300;
