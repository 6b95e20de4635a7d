//! Short human forms for the narrow columns of the views: ages, sizes, CPU time.

use crate::timefmt::Millis;

pub use crate::timefmt::age;

/// `512K`, `87M`, `1.5G` (binary units, as `ps` and `top` print them).
pub fn bytes(b: u64) -> String {
    const K: u64 = 1024;
    match b {
        0..K => format!("{b}B"),
        K..1_048_576 => format!("{}K", b / K),
        1_048_576..1_073_741_824 => format!("{}M", b / 1_048_576),
        _ => format!("{:.1}G", b as f64 / 1_073_741_824.0),
    }
}

/// CPU time used: `850ms`, `12.3s`, then like [`age`].
pub fn cpu(ms: u64) -> String {
    match ms {
        0..1000 => format!("{ms}ms"),
        1000..60_000 => format!("{:.1}s", ms as f64 / 1000.0),
        _ => age(ms as Millis),
    }
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
        assert_eq!(bytes(900), "900B");
        assert_eq!(bytes(90 * 1024 * 1024), "90M");
        assert_eq!(bytes(3 * 1024 * 1024 * 1024 / 2), "1.5G");
        assert_eq!(cpu(850), "850ms");
        assert_eq!(cpu(12_345), "12.3s");
        assert_eq!(cpu(125_000), "2m05s");
    }
}
