//! Wall-clock timestamps: unix milliseconds in the store, RFC 3339 at the edges.
//!
//! Pure conversions (Howard Hinnant's civil-date algorithms); no time zone other than
//! UTC is ever needed: GitHub and the runner both speak UTC.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the unix epoch, UTC. The one wall-clock type of the crate.
pub type Millis = i64;

/// Now, as unix milliseconds. Only loops and the CLI call this; pure code takes `now`.
pub fn now_millis() -> Millis {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// A whole number of seconds in the largest unit that divides it: `14d`, `36h`, `90m`,
/// `45s` (what `host set retention=` takes back).
pub fn duration(secs: u64) -> String {
    match secs {
        0 => "0s".into(),
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// A span for people: `42s`, `3m12s`, `2h05m`, `3d04h`; two units at most, so
/// columns stay narrow. Negative spans (a clock step) are `0s`.
pub fn age(ms: Millis) -> String {
    let s = ms.max(0) / 1000;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        3600..86_400 => format!("{}h{:02}m", s / 3600, (s / 60) % 60),
        _ => format!("{}d{:02}h", s / 86_400, (s / 3600) % 24),
    }
}

/// `2026-11-30T10:00:00Z` (seconds precision, as GitHub writes them).
pub fn format_rfc3339(ms: Millis) -> String {
    let secs = ms.div_euclid(1000);
    let (y, mo, d) = civil_from_days(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}Z",
        sod / 3600,
        (sod / 60) % 60,
        sod % 60
    )
}

/// `ms` as `YYYY-MM-DDTHH:MM:SS.fffffffZ`: the seven fractional digits the Actions
/// service (.NET) writes, to the millisecond.
pub fn format_rfc3339_fraction(ms: Millis) -> String {
    let whole = format_rfc3339(ms);
    format!(
        "{}.{:03}0000Z",
        &whole[..whole.len() - 1],
        ms.rem_euclid(1000)
    )
}

/// Parses `YYYY-MM-DD[T ]HH:MM:SS[.fff](Z|±HH:MM)`: GitHub's timestamps and the
/// runner's `yyyy-MM-dd HH:mm:ssZ` log prefix. `None` for anything else.
pub fn parse_rfc3339(s: &str) -> Option<Millis> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    if b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b'T' || b[10] == b' ')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)? as u32, num(8..10)? as u32);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        if digits.is_empty() {
            return None;
        }
        let first3: String = digits.chars().chain("000".chars()).take(3).collect();
        frac_ms = first3.parse().ok()?;
    }
    let offset_secs = match &s[i..] {
        "Z" | "z" => 0,
        rest if rest.len() == 6 && (rest.starts_with('+') || rest.starts_with('-')) => {
            let oh: i64 = rest.get(1..3)?.parse().ok()?;
            let om: i64 = rest.get(4..6)?.parse().ok()?;
            let sign = if rest.starts_with('-') { -1 } else { 1 };
            sign * (oh * 3600 + om * 60)
        }
        _ => return None,
    };
    let days = days_from_civil(y, mo, d);
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_secs;
    Some(secs * 1000 + frac_ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            "1970-01-01T00:00:00Z",
            "2026-11-30T10:00:05Z",
            "2000-02-29T23:59:59Z",
        ] {
            assert_eq!(format_rfc3339(parse_rfc3339(s).unwrap()), s);
        }
    }

    #[test]
    fn fractions_keep_the_millisecond() {
        let ms = parse_rfc3339("2026-11-30T10:00:05Z").unwrap() + 42;
        let s = format_rfc3339_fraction(ms);
        assert_eq!(s, "2026-11-30T10:00:05.0420000Z");
        assert_eq!(parse_rfc3339(&s), Some(ms));
        assert_eq!(format_rfc3339_fraction(-1), "1969-12-31T23:59:59.9990000Z");
    }

    #[test]
    fn parses_runner_and_offset_forms() {
        let a = parse_rfc3339("2026-11-30 10:00:00Z").unwrap();
        let b = parse_rfc3339("2026-11-30T12:00:00+02:00").unwrap();
        let c = parse_rfc3339("2026-11-30T10:00:00.250Z").unwrap();
        assert_eq!(a, b);
        assert_eq!(c - a, 250);
        assert_eq!(a, 1_796_032_800_000);
    }

    #[test]
    fn refuses_garbage() {
        for s in [
            "",
            "2026-11-30",
            "2026-13-01T00:00:00Z",
            "2026-11-30T10:00:00",
            "x026-11-30T10:00:00Z",
        ] {
            assert_eq!(parse_rfc3339(s), None, "{s}");
        }
    }
}
