//! The host's settings as `host set` and `top` edit them: the host row, and the
//! settings kept beside it in key-value rows (where `update` finds releases, the
//! webhook listener's address and secret), with the rules across them.

use super::{Host, Invalid};
use std::collections::BTreeMap;

/// A `host set` key kept in a key-value row beside the host row: read by the part
/// that uses it (`update`, the daemon's webhook listener at start), not a host column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Beside {
    ReleaseSource,
    WebhookListen,
    WebhookSecretFile,
    UsageRetention,
    CostPerCpuHour,
    CostPerGibHour,
    UsageMetricsTop,
}

/// The key-value row of `release_source=`.
pub const KV_RELEASE_SOURCE: &str = "host:release_source";
/// The key-value row of `webhook_listen=`.
pub const KV_WEBHOOK_LISTEN: &str = "webhook_listen";
/// The key-value row of `webhook_secret_file=`.
pub const KV_WEBHOOK_SECRET_FILE: &str = "webhook_secret_file";

/// How long the daily usage roll-up is kept unless `host set usage_retention=` says
/// otherwise: about 13 months, so a month is compared with the same month a year ago.
pub const DEFAULT_USAGE_RETENTION_SECS: u64 = 400 * 86_400;
/// The longest `usage_retention=` takes: ten years.
const MAX_USAGE_RETENTION_SECS: u64 = 3_650 * 86_400;
/// The repositories the usage metrics name unless `host set usage_metrics_top=` says
/// otherwise; the rest are `other`.
pub const DEFAULT_USAGE_METRICS_TOP: u64 = 10;
/// The most repositories the usage metrics may name: a bound on their series.
const MAX_USAGE_METRICS_TOP: u64 = 200;

impl Beside {
    /// In the order `host show` prints them.
    pub const ALL: [Beside; 7] = [
        Beside::ReleaseSource,
        Beside::WebhookListen,
        Beside::WebhookSecretFile,
        Beside::UsageRetention,
        Beside::CostPerCpuHour,
        Beside::CostPerGibHour,
        Beside::UsageMetricsTop,
    ];

    /// The `host set` key.
    pub fn name(self) -> &'static str {
        match self {
            Beside::ReleaseSource => "release_source",
            Beside::WebhookListen => "webhook_listen",
            Beside::WebhookSecretFile => "webhook_secret_file",
            Beside::UsageRetention => "usage_retention",
            Beside::CostPerCpuHour => "cost_per_cpu_hour",
            Beside::CostPerGibHour => "cost_per_gib_hour",
            Beside::UsageMetricsTop => "usage_metrics_top",
        }
    }

    /// The key-value row it is kept in.
    pub fn kv_key(self) -> &'static str {
        match self {
            Beside::ReleaseSource => KV_RELEASE_SOURCE,
            Beside::WebhookListen => KV_WEBHOOK_LISTEN,
            Beside::WebhookSecretFile => KV_WEBHOOK_SECRET_FILE,
            // The rest are kept under their own names.
            other => other.name(),
        }
    }

    pub fn of(key: &str) -> Option<Beside> {
        Beside::ALL.into_iter().find(|b| b.name() == key)
    }

    /// The value as kept, checked as far as the value alone tells (the probe of
    /// `store::edit_host` checks the rest on the disk); `None` unsets.
    fn parse(self, value: &str) -> Result<Option<String>, Invalid> {
        if value.is_empty() {
            return Ok(None);
        }
        let key = self.name();
        match self {
            Beside::ReleaseSource => {
                let trimmed = value.trim_end_matches('/');
                Ok(Some(
                    if trimmed.is_empty() { value } else { trimmed }.into(),
                ))
            }
            Beside::WebhookListen => parse_listen(key, value).map(|_| Some(value.into())),
            Beside::WebhookSecretFile => {
                super::validate::path(key, value).map(|_| Some(value.into()))
            }
            Beside::UsageRetention => {
                let secs =
                    super::validate::seconds_in(key, value, 86_400, MAX_USAGE_RETENTION_SECS)?;
                Ok(Some(crate::timefmt::duration(secs)))
            }
            Beside::CostPerCpuHour | Beside::CostPerGibHour => {
                price(key, value).map(|p| Some(p.to_string()))
            }
            Beside::UsageMetricsTop => {
                super::validate::number_in(key, value, 1, MAX_USAGE_METRICS_TOP)
                    .map(|n| Some(n.to_string()))
            }
        }
    }
}

/// A price per hour: a finite number, zero or more, in whatever currency the owner
/// bills in.
fn price(key: &str, value: &str) -> Result<f64, Invalid> {
    match value.trim().parse::<f64>() {
        Ok(p) if p.is_finite() && p >= 0.0 => Ok(p),
        _ => Err(Invalid::new(
            key,
            format!(
                "expected a price per hour, a number of 0 or more such as 0.04 (got {value:?})"
            ),
        )),
    }
}

/// What the usage roll-up and its readers take from the host's settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UsageSettings {
    pub retention_secs: u64,
    /// The cost model: both prices, or none (no cost column).
    pub prices: Option<(f64, f64)>,
    pub metrics_top: usize,
}

impl UsageSettings {
    /// From the rows kept beside the host's; what does not read is its default (the
    /// values were checked when set). A cost model needs at least one price; the
    /// other is 0.
    pub fn of(s: &HostSettings) -> UsageSettings {
        let retention_secs = s
            .beside(Beside::UsageRetention)
            .and_then(|v| super::validate::seconds_in("", v, 0, u64::MAX).ok())
            .unwrap_or(DEFAULT_USAGE_RETENTION_SECS);
        let p = |b| s.beside(b).and_then(|v| price("", v).ok());
        let prices = match (p(Beside::CostPerCpuHour), p(Beside::CostPerGibHour)) {
            (None, None) => None,
            (cpu, gib) => Some((cpu.unwrap_or(0.0), gib.unwrap_or(0.0))),
        };
        let metrics_top = s
            .beside(Beside::UsageMetricsTop)
            .and_then(|v| v.parse().ok())
            .unwrap_or(DEFAULT_USAGE_METRICS_TOP) as usize;
        UsageSettings {
            retention_secs,
            prices,
            metrics_top,
        }
    }
}

/// `webhook_listen=`: an address and port the listener binds.
pub fn parse_listen(key: &str, value: &str) -> Result<std::net::SocketAddr, Invalid> {
    value.parse().map_err(|_| {
        Invalid::new(
            key,
            format!("expected ADDR:PORT such as 127.0.0.1:8090 (got {value:?})"),
        )
    })
}

/// The host and the settings kept beside its row: what one `host set` reads, edits
/// and writes whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSettings {
    pub host: Host,
    pub beside: BTreeMap<Beside, String>,
}

impl HostSettings {
    pub fn beside(&self, b: Beside) -> Option<&str> {
        self.beside.get(&b).map(String::as_str)
    }

    /// Applies one `host set KEY=VALUE`: a key kept beside the row here, any other
    /// through [`Host::apply_setting`] (which refuses unknown keys).
    pub fn apply_setting(&mut self, key: &str, value: &str) -> Result<(), Invalid> {
        match Beside::of(key) {
            Some(b) => {
                match b.parse(value)? {
                    Some(v) => self.beside.insert(b, v),
                    None => self.beside.remove(&b),
                };
                Ok(())
            }
            None => self.host.apply_setting(key, value),
        }
    }

    /// Every rule across keys that needs no disk: the host row's ([`Host::check`]),
    /// and the webhook listener's pair (it needs both, or neither).
    pub fn check(&self) -> Result<(), Invalid> {
        self.host.check()?;
        let listen = self.beside(Beside::WebhookListen).is_some();
        let secret = self.beside(Beside::WebhookSecretFile).is_some();
        match (listen, secret) {
            (true, false) => Err(Invalid::new(
                KV_WEBHOOK_SECRET_FILE,
                "webhook_listen needs webhook_secret_file=PATH too (the secret that signs \
                 the deliveries); set both, or unset both",
            )),
            (false, true) => Err(Invalid::new(
                KV_WEBHOOK_LISTEN,
                "webhook_secret_file needs webhook_listen=ADDR:PORT too; set both, or unset both",
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> HostSettings {
        HostSettings {
            host: Host::new("0123abcd89ef4567".into(), "h".into(), "linux", "x86_64", 4),
            beside: BTreeMap::new(),
        }
    }

    #[test]
    fn every_settable_key_is_owned_here() {
        for key in super::super::host::SETTABLE_KEYS {
            let key = key.replace("NAME", "FOO");
            let mut s = settings();
            let e = s.apply_setting(&key, "\u{1}bad value");
            assert!(
                !e.as_ref().is_err_and(|e| e.reason.contains("unknown")),
                "{key}: {e:?}"
            );
        }
        let e = settings().apply_setting("colour", "red").unwrap_err();
        assert!(e.reason.starts_with("unknown host setting"), "{e}");
    }

    #[test]
    fn cross_field_rules() {
        let mut s = settings();
        s.apply_setting("coordinator", "wss://pool.example:443")
            .unwrap();
        assert_eq!(s.check().unwrap_err().arg, "coordinator_token_file");
        s.apply_setting("coordinator_token_file", "/etc/rm/token")
            .unwrap();
        s.check().unwrap();
        s.apply_setting("coordinator", "ws://10.0.0.1:80").unwrap();
        assert_eq!(s.check().unwrap_err().arg, "coordinator");
        s.apply_setting("coordinator_insecure", "true").unwrap();
        s.check().unwrap();
        s.apply_setting("webhook_listen", "127.0.0.1:8090").unwrap();
        assert_eq!(s.check().unwrap_err().arg, "webhook_secret_file");
        s.apply_setting("webhook_secret_file", "/etc/rm/hook")
            .unwrap();
        s.check().unwrap();
        s.apply_setting("webhook_listen", "").unwrap();
        assert_eq!(s.check().unwrap_err().arg, "webhook_listen");
        s.apply_setting("isolation", "uids").unwrap();
        assert_eq!(s.check().unwrap_err().arg, "isolation");
    }

    #[test]
    fn usage_settings_have_defaults_and_refuse_what_does_not_read() {
        let mut s = settings();
        let u = UsageSettings::of(&s);
        assert_eq!(
            (u.retention_secs, u.prices, u.metrics_top),
            (DEFAULT_USAGE_RETENTION_SECS, None, 10)
        );
        s.apply_setting("usage_retention", "400d").unwrap();
        s.apply_setting("cost_per_cpu_hour", "0.04").unwrap();
        s.apply_setting("usage_metrics_top", "3").unwrap();
        let u = UsageSettings::of(&s);
        assert_eq!(
            (u.retention_secs, u.prices, u.metrics_top),
            (400 * 86_400, Some((0.04, 0.0)), 3)
        );
        for (k, v) in [
            ("usage_retention", "1h"),
            ("cost_per_cpu_hour", "-1"),
            ("cost_per_gib_hour", "NaN"),
            ("usage_metrics_top", "0"),
        ] {
            assert_eq!(s.apply_setting(k, v).unwrap_err().arg, k);
        }
    }

    #[test]
    fn release_source_is_kept_without_its_trailing_slash() {
        let mut s = settings();
        s.apply_setting("release_source", "https://rel.example/rm/")
            .unwrap();
        assert_eq!(
            s.beside(Beside::ReleaseSource),
            Some("https://rel.example/rm")
        );
        s.apply_setting("release_source", "").unwrap();
        assert_eq!(s.beside(Beside::ReleaseSource), None);
    }
}
