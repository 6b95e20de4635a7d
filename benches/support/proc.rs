//! Readings of a process from /proc: resident memory (VmRSS, and its anonymous and
//! file-backed parts), threads and CPU time (utime + stime), and scans for runner
//! processes by their environment.

use std::collections::BTreeMap;
use std::path::Path;

#[derive(Debug, Clone, Copy, Default)]
pub struct Usage {
    pub rss_kb: u64,
    /// utime + stime, in clock ticks.
    pub cpu_ticks: u64,
}

/// Clock ticks per second (`sysconf(_SC_CLK_TCK)`, almost always 100).
pub fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

pub fn usage(pid: i32) -> Option<Usage> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(Usage {
        rss_kb,
        cpu_ticks: utime + stime,
    })
}

/// A process's resident memory and threads, from /proc/PID/status: what is its own
/// (`RssAnon`: heaps, stacks, SQLite's caches) apart from the pages of its binary and
/// libraries (`RssFile`), which other processes of the same binary share.
#[derive(Debug, Clone, Copy, Default)]
pub struct Memory {
    pub rss_kb: u64,
    pub anon_kb: u64,
    pub file_kb: u64,
    pub threads: u64,
}

pub fn memory(pid: i32) -> Option<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Some(Memory {
        rss_kb: field("VmRSS"),
        anon_kb: field("RssAnon"),
        file_kb: field("RssFile"),
        threads: field("Threads"),
    })
}

/// A process's threads counted by the part of their name before the first `:` (`io`
/// for `io:demo:0`), from /proc/PID/task/*/comm.
pub fn thread_kinds(pid: i32) -> BTreeMap<String, usize> {
    let mut kinds = BTreeMap::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return kinds;
    };
    for e in rd.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        let kind = comm.trim().split(':').next().unwrap_or("").to_string();
        *kinds.entry(kind).or_insert(0) += 1;
    }
    kinds
}

pub fn cpu_secs(ticks: u64) -> f64 {
    ticks as f64 / clock_ticks() as f64
}

/// Every pid in /proc.
pub fn pids() -> Vec<i32> {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The NUL-separated entries of /proc/PID/<file> (`environ`, `cmdline`); None when the
/// process is gone or not ours to read.
pub fn nul_entries(pid: i32, file: &str) -> Option<Vec<Vec<u8>>> {
    let raw = std::fs::read(format!("/proc/{pid}/{file}")).ok()?;
    Some(
        raw.split(|b| *b == 0)
            .filter(|s| !s.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
    )
}

/// Processes whose environment holds `ACTIONS_RUNNER_INPUT_JITCONFIG`, that is, runner
/// processes (ours or a baseline's), with the variable's value.
pub fn jit_processes() -> Vec<(i32, Vec<u8>)> {
    const VAR: &[u8] = b"ACTIONS_RUNNER_INPUT_JITCONFIG=";
    pids()
        .into_iter()
        .filter_map(|pid| {
            let env = nul_entries(pid, "environ")?;
            let v = env.iter().find_map(|e| e.strip_prefix(VAR))?;
            Some((pid, v.to_vec()))
        })
        .collect()
}

/// Whether `pid` still runs (a zombie counts as gone).
pub fn alive(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s
            .rfind(')')
            .and_then(|i| s.as_bytes().get(i + 2))
            .is_some_and(|st| *st != b'Z' && *st != b'X'),
        Err(_) => false,
    }
}

/// Whether `path` is `dir` or under it, after resolving what can be resolved.
pub fn is_under(path: &Path, dir: &Path) -> bool {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    path.starts_with(&dir)
}
