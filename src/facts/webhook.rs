//! The webhook listener's settings as the store holds them, read by the daemon's
//! listener (`daemon::feeds::webhook`), `status` and `doctor` alike. What the
//! listener last saw is `store::daemon_facts::WebhookSeen`.

use crate::domain::host_settings::Beside;
use crate::store::Store;
use std::net::SocketAddr;
use std::path::PathBuf;

/// `webhook_listen=`: an address and port (`0.0.0.0:8090`, `[::1]:8090`).
pub fn parse_listen(key: &str, value: &str) -> Result<SocketAddr, String> {
    crate::domain::host_settings::parse_listen(key, value)
        .map_err(|e| format!("{}: {}", e.arg, e.reason))
}

/// The settings as the store holds them: `None` while the listener is off (neither
/// set), an error when only one of the two is set or one does not read.
pub fn settings(store: &dyn Store) -> Result<Option<(SocketAddr, PathBuf)>, String> {
    use crate::store::beside;
    let listen = beside(store, Beside::WebhookListen).map_err(|e| e.to_string())?;
    let file = beside(store, Beside::WebhookSecretFile).map_err(|e| e.to_string())?;
    match (listen, file) {
        (None, None) => Ok(None),
        (Some(_), None) => Err("webhook_listen is set but webhook_secret_file is not".into()),
        (None, Some(_)) => Err("webhook_secret_file is set but webhook_listen is not".into()),
        (Some(l), Some(f)) => Ok(Some((
            parse_listen(Beside::WebhookListen.name(), &l)?,
            PathBuf::from(f),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::SqliteStore;

    #[test]
    fn settings_are_both_or_neither() {
        let s = SqliteStore::open_in_memory().unwrap();
        assert_eq!(settings(&s), Ok(None));
        s.kv_put(Beside::WebhookListen.kv_key(), "127.0.0.1:8090")
            .unwrap();
        assert!(settings(&s).unwrap_err().contains("webhook_secret_file"));
        s.kv_put(Beside::WebhookSecretFile.kv_key(), "/etc/x")
            .unwrap();
        assert_eq!(
            settings(&s),
            Ok(Some(("127.0.0.1:8090".parse().unwrap(), "/etc/x".into())))
        );
        assert!(parse_listen("webhook_listen", "8090").is_err());
        assert!(parse_listen("webhook_listen", "[::]:8090").is_ok());
    }
}
