//! Human units where a person reads a figure: `612 MiB`, `1.2 s`, `35%`, `3 jobs`. On
//! the ground floor, so the pure plan, the meters and every view print a figure the
//! same way.
//!
//! The one format of each kind, everywhere a person reads it (`status`, `profile
//! show`, `doctor`, `top`, the logs):
//! - sizes: [`bytes`] (`1.0 MiB`, never `1020 KiB` beside it);
//! - a setting's duration, whole seconds: `timefmt::duration` (`5m`, `90s`), the form
//!   the setting takes back;
//! - a span measured: `timefmt::age` (`3m12s`); CPU time: [`cpu`].

/// Binary units with one decimal under 10 and none above: `512 B`, `1.5 KiB`,
/// `612 MiB`, `2.0 GiB`. A figure never has four digits: from 1000 of a unit on it
/// is said in the next (`1020 KiB` is `1.0 MiB`), so two figures side by side read
/// alike.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1000 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    // 999.5 and up would round to four digits.
    while v >= 999.5 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if v < 10.0 {
        format!("{v:.1} {}", UNITS[unit])
    } else {
        format!("{v:.0} {}", UNITS[unit])
    }
}

/// CPU time: `0.85 s` under a second, `1.2 s` under a minute, then `3m 12s`, `2h 05m`.
pub fn cpu(ms: u64) -> String {
    match ms {
        0..1000 => format!("{:.2} s", ms as f64 / 1000.0),
        1000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{}m {:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h {:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// CPU use, where 100% is one core: `0%`, `35%`, `250%`; one decimal under 10.
pub fn percent(p: f64) -> String {
    let p = p.max(0.0);
    if p < 10.0 && p.fract() != 0.0 {
        format!("{p:.1}%")
    } else {
        format!("{p:.0}%")
    }
}

/// A count with its noun, singular for one: `1 job`, `3 jobs`, `0 checks` (regular
/// nouns only), so no line reads `1 job(s)` or `1 runners`.
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(999), "999 B");
        assert_eq!(bytes(1000), "1.0 KiB");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(612 << 20), "612 MiB");
        assert_eq!(bytes(2 << 30), "2.0 GiB");
        assert_eq!(cpu(850), "0.85 s");
        assert_eq!(cpu(1_200), "1.2 s");
        assert_eq!(cpu(192_000), "3m 12s");
        assert_eq!(cpu(7_500_000), "2h 05m");
        assert_eq!(percent(0.0), "0%");
        assert_eq!(percent(2.5), "2.5%");
        assert_eq!(percent(35.4), "35%");
        assert_eq!(percent(-1.0), "0%");
        assert_eq!(count(1u32, "job"), "1 job");
        assert_eq!(count(0u32, "check"), "0 checks");
        assert_eq!(count(3u64, "connection"), "3 connections");
    }

    /// Issue 38: `1020 KiB` was printed next to `1.0 MiB`. No figure has four digits,
    /// and one just under a unit reads as that unit.
    #[test]
    fn regression_38_no_four_digit_figures() {
        assert_eq!(bytes(1020 << 10), "1.0 MiB");
        assert_eq!(bytes(1 << 20), "1.0 MiB");
        assert_eq!(bytes(999 << 10), "999 KiB");
        assert_eq!(bytes(1023 << 20), "1.0 GiB");
        for b in (0..60)
            .map(|i| (1u64 << i) - 1)
            .chain((0..50).map(|i| 1000u64 << i))
        {
            let s = bytes(b);
            let digits = s.split(' ').next().unwrap().replace('.', "");
            assert!(digits.len() <= 3, "{b} → {s}");
        }
    }
}
