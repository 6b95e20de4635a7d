//! Usage of a process tree and per-attempt peaks: pure accumulation, no /proc.

use crate::runner::proc::ProcStat;

/// One sample of a runner's process tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Sum of the processes' resident sets. Pages shared between processes (the
    /// runner's libraries) count once per process, so this is an upper bound.
    pub rss_bytes: u64,
    /// CPU time (user + system) of the live processes plus the children they have
    /// waited for. A process that exits without being waited for inside the tree
    /// takes its time with it, which is why [`Meter`] keeps the largest total seen.
    pub cpu_millis: u64,
    pub processes: u32,
}

/// Sums a tree's stats. Zombies are skipped: their time reaches their parent's
/// children counters when it waits for them.
pub fn usage_from_stats(stats: &[ProcStat], page_size: u64, ticks_per_sec: u64) -> Usage {
    let ticks_per_sec = ticks_per_sec.max(1);
    let mut ticks = 0u64;
    let mut usage = Usage::default();
    for s in stats.iter().filter(|s| !s.has_exited()) {
        ticks += s.utime + s.stime + s.cutime + s.cstime;
        usage.rss_bytes += s.rss_pages * page_size;
        usage.processes += 1;
    }
    usage.cpu_millis = ticks * 1000 / ticks_per_sec;
    usage
}

/// Usage from an attempt's cgroup counters: exact where a /proc walk is an estimate
/// (memory counted once, CPU time of every process that ever ran in it, processes
/// that left the session included). `None` when the cgroup gives no memory figure.
/// The cgroup's own peak, when it keeps one, raises the sample to it, so a spike
/// between samples is not lost.
pub fn usage_from_cgroup(c: &crate::runner::CgroupUsage) -> Option<Usage> {
    let rss = c.memory_current?;
    Some(Usage {
        rss_bytes: c.memory_peak.map_or(rss, |p| p.max(rss)),
        cpu_millis: c.cpu_usec.map_or(0, |u| u / 1000),
        processes: c.pids_current.map_or(0, |p| p.min(u32::MAX as u64) as u32),
    })
}

/// One attempt's meter: peak RSS and CPU time over its samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Meter {
    pub peak_rss_bytes: u64,
    /// The largest CPU total seen (CPU time only grows; a smaller total means part of
    /// the tree exited, not that time was given back).
    pub cpu_millis: u64,
    pub peak_processes: u32,
    pub samples: u32,
    /// The sum of the samples' RSS, for the mean (samples come at a steady pace, so
    /// their mean is the time-weighted one the usage roll-up needs).
    pub rss_sum_bytes: u128,
    pub last: Option<Usage>,
}

impl Meter {
    pub fn new() -> Meter {
        Meter::default()
    }

    pub fn observe(&mut self, usage: Usage) {
        self.peak_rss_bytes = self.peak_rss_bytes.max(usage.rss_bytes);
        self.cpu_millis = self.cpu_millis.max(usage.cpu_millis);
        self.peak_processes = self.peak_processes.max(usage.processes);
        self.samples = self.samples.saturating_add(1);
        self.rss_sum_bytes += usage.rss_bytes as u128;
        self.last = Some(usage);
    }

    /// The mean RSS over the samples (0 with none).
    pub fn mean_rss_bytes(&self) -> u64 {
        match self.samples {
            0 => 0,
            n => (self.rss_sum_bytes / n as u128) as u64,
        }
    }

    /// CPU seconds, as the attempt record and the coordinator report it.
    pub fn cpu_secs(&self) -> f64 {
        self.cpu_millis as f64 / 1000.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(pid: i32, state: u8, ticks: (u64, u64, u64, u64), rss_pages: u64) -> ProcStat {
        ProcStat {
            pid,
            state,
            ppid: 1,
            pgrp: 10,
            session: 10,
            utime: ticks.0,
            stime: ticks.1,
            cutime: ticks.2,
            cstime: ticks.3,
            starttime: 1,
            rss_pages,
        }
    }

    #[test]
    fn sums_a_tree_and_skips_zombies() {
        let stats = [
            stat(10, b'S', (100, 50, 10, 5), 1000),
            stat(11, b'R', (30, 20, 0, 0), 500),
            stat(12, b'Z', (999, 999, 0, 0), 0),
        ];
        let u = usage_from_stats(&stats, 4096, 100);
        assert_eq!(u.processes, 2);
        assert_eq!(u.rss_bytes, 1500 * 4096);
        assert_eq!(u.cpu_millis, 2150);
    }

    #[test]
    fn meter_means_its_samples() {
        let mut m = Meter::new();
        assert_eq!(m.mean_rss_bytes(), 0);
        for rss in [100, 300, 200] {
            m.observe(Usage {
                rss_bytes: rss,
                ..Usage::default()
            });
        }
        assert_eq!(m.mean_rss_bytes(), 200);
    }

    #[test]
    fn meter_keeps_peaks_not_the_latest() {
        let mut m = Meter::new();
        let s = |rss, cpu, processes| Usage {
            rss_bytes: rss,
            cpu_millis: cpu,
            processes,
        };
        m.observe(s(100, 10, 1));
        m.observe(s(300, 50, 3));
        m.observe(s(200, 40, 2));
        assert_eq!(m.peak_rss_bytes, 300);
        assert_eq!(m.cpu_millis, 50);
        assert_eq!(m.peak_processes, 3);
        assert_eq!(m.samples, 3);
        assert_eq!(m.last, Some(s(200, 40, 2)));
        assert_eq!(m.cpu_secs(), 0.05);
    }

    #[test]
    fn cgroup_counters_make_a_sample() {
        use crate::runner::CgroupUsage;
        let c = CgroupUsage {
            memory_current: Some(50 << 20),
            memory_peak: Some(80 << 20),
            cpu_usec: Some(2_500_000),
            pids_current: Some(7),
        };
        let u = usage_from_cgroup(&c).unwrap();
        assert_eq!(
            u,
            Usage {
                rss_bytes: 80 << 20,
                cpu_millis: 2_500,
                processes: 7
            }
        );
        assert_eq!(usage_from_cgroup(&CgroupUsage::default()), None);
    }
}
