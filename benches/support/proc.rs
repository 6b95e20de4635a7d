//! Readings of a process from /proc: resident memory (VmRSS) and CPU time (utime +
//! stime), and scans for runner processes by their environment.

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
