//! Response headers as the client keeps them, and the HTTP-date format GitHub sends.

use crate::timefmt::Millis;

/// A response's headers, names lowercased. Only the few the client reads are looked up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers(Vec<(String, String)>);

impl Headers {
    pub fn new(pairs: impl IntoIterator<Item = (String, String)>) -> Headers {
        Headers(
            pairs
                .into_iter()
                .map(|(k, v)| (k.to_ascii_lowercase(), v))
                .collect(),
        )
    }

    /// The first value of a header, by lowercase name.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str().trim())
    }

    pub fn get_u64(&self, name: &str) -> Option<u64> {
        self.get(name)?.parse().ok()
    }
}

/// Parses an IMF-fixdate, `Sun, 06 Nov 1994 08:49:37 GMT`, the only form GitHub sends
/// in `Date` (and `Retry-After` when it is a date). `None` for anything else.
pub fn parse_http_date(s: &str) -> Option<Millis> {
    let rest = s.trim().split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    if parts.len() != 5 || parts[4] != "GMT" {
        return None;
    }
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = MONTHS.iter().position(|m| *m == parts[1])? + 1;
    let day: u32 = parts[0].parse().ok()?;
    let year: u32 = parts[2].parse().ok()?;
    if parts[0].len() != 2 || parts[2].len() != 4 || parts[3].len() != 8 {
        return None;
    }
    // Reuse the crate's one calendar implementation through its RFC 3339 parser.
    crate::timefmt::parse_rfc3339(&format!("{year:04}-{month:02}-{day:02}T{}Z", parts[3]))
}

/// `github-authentication-token-expiration`: `2026-12-31 00:00:00 UTC`, or with a
/// numeric offset (`2026-12-31 00:00:00 -0800`).
pub fn parse_token_expiration(s: &str) -> Option<Millis> {
    let mut parts = s.split_whitespace();
    let (date, time, zone) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let zone = if zone == "UTC" {
        "Z".to_string()
    } else {
        let (sign, hhmm) = zone.split_at_checked(1)?;
        if !matches!(sign, "+" | "-") || hhmm.len() != 4 {
            return None;
        }
        format!("{sign}{}:{}", &hhmm[..2], &hhmm[2..])
    };
    crate::timefmt::parse_rfc3339(&format!("{date}T{time}{zone}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timefmt::parse_rfc3339;

    #[test]
    fn token_expirations() {
        assert_eq!(
            parse_token_expiration("2026-12-31 00:00:00 UTC"),
            parse_rfc3339("2026-12-31T00:00:00Z")
        );
        assert_eq!(
            parse_token_expiration("2026-12-31 00:00:00 -0800"),
            parse_rfc3339("2026-12-31T08:00:00Z")
        );
        for bad in [
            "",
            "2026-12-31",
            "2026-12-31 00:00:00",
            "soon UTC x",
            "2026-12-31 00:00:00 +08",
        ] {
            assert_eq!(parse_token_expiration(bad), None, "{bad}");
        }
    }

    #[test]
    fn http_dates() {
        assert_eq!(
            parse_http_date("Mon, 30 Nov 2026 10:00:05 GMT"),
            parse_rfc3339("2026-11-30T10:00:05Z")
        );
        for bad in [
            "",
            "30 Nov 2026",
            "Mon, 30 Nov 2026 10:00:05 UTC",
            "Mon, 30 Foo 2026 10:00:05 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn lookup_is_case_insensitive_on_names() {
        let h = Headers::new([("X-RateLimit-Remaining".to_string(), " 12 ".to_string())]);
        assert_eq!(h.get_u64("x-ratelimit-remaining"), Some(12));
        assert_eq!(h.get("etag"), None);
    }
}
