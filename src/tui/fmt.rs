//! Human forms for the views' columns: short ages, and sizes and CPU time in the
//! CLI's units (`units`), so a figure reads the same in `top` and `attempts`.

use crate::timefmt::Millis;

pub use crate::timefmt::age;

/// Sizes in the CLI's human units (`612 MiB`), so `top`, `attempts` and
/// `attempt show` say the same figure the same way.
pub fn bytes(b: u64) -> String {
    crate::units::bytes(b)
}

/// CPU time in the CLI's human units (`0.85 s`, `12.3 s`, `3m 12s`).
pub fn cpu(ms: u64) -> String {
    crate::units::cpu(ms)
}

/// When an ended attempt ended, as its AGE column says it: `ended 3m12s ago`.
pub fn ended_ago(ended_at: Millis, now: Millis) -> String {
    format!("ended {} ago", age(now - ended_at))
}

pub fn or_dash<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map(f).unwrap_or_else(|| "-".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(age(0), "0s");
        assert_eq!(age(59_999), "59s");
        assert_eq!(age(192_000), "3m12s");
        assert_eq!(age(7_500_000), "2h05m");
        assert_eq!(age(3 * 86_400_000 + 4 * 3_600_000), "3d04h");
        assert_eq!(age(-5), "0s");
        // The CLI's units, as `attempts` and `attempt show` print them.
        assert_eq!(bytes(900), "900 B");
        assert_eq!(bytes(90 * 1024 * 1024), "90 MiB");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024 / 2), "1.5 GiB");
        assert_eq!(cpu(850), "0.85 s");
        assert_eq!(cpu(12_345), "12.3 s");
        assert_eq!(cpu(125_000), "2m 05s");
        assert_eq!(ended_ago(1_000, 193_000), "ended 3m12s ago");
    }
}
