//! Human units where a person reads a figure: `612 MiB`, `1.2 s`, `35%`. On the ground
//! floor, so the pure plan, the meters and every view print a figure the same way.

/// Binary units with one decimal under 10 and none above: `512 B`, `1.5 KiB`,
/// `612 MiB`, `2.0 GiB`.
pub fn bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if b < 1024 {
        return format!("{b} B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
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
    }
}
