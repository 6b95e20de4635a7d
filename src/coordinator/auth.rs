//! Host credentials: a token is 32 random bytes from the kernel, shown once as 64 hex
//! digits; only its SHA-256 is stored. The handshake compares the presented token's
//! hash with every stored one in constant time, before any frame is read.

use crate::secret::Secret;
use crate::store::SqliteStore;
use std::path::PathBuf;
use std::sync::Mutex;

/// A new host token (64 lowercase hex digits).
pub fn new_token() -> std::io::Result<Secret> {
    let mut bytes = [0u8; 32];
    crate::random::fill(&mut bytes)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    bytes.fill(0);
    Ok(Secret::new(hex))
}

pub fn token_hash(token: &Secret) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, token.expose().trim().as_bytes());
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// Equality whose time does not depend on where the inputs differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// Finds which host a token belongs to.
pub trait TokenBook: Send + Sync {
    /// Every host's name and token hash now, or `None` if they cannot be read.
    fn hashes(&self) -> Option<Vec<(String, Vec<u8>)>>;

    /// The host's name, or `None` for a token nobody holds (or a failed lookup).
    fn find(&self, token: &Secret) -> Option<String> {
        find_in(&self.hashes()?, token)
    }
}

/// Every stored hash is compared (no early exit), so timing tells nothing about which
/// host or how close.
pub fn find_in(hashes: &[(String, Vec<u8>)], token: &Secret) -> Option<String> {
    let h = token_hash(token);
    let mut found = None;
    for (name, stored) in hashes {
        if constant_time_eq(&h, stored) && found.is_none() {
            found = Some(name.clone());
        }
    }
    found
}

/// The tokens of a coordinator's store, read at every handshake (and by the placer
/// every tick, to cut off removed hosts) so that `coordinator host add|rm` takes
/// effect without a restart.
pub struct StoreTokens {
    dir: PathBuf,
    store: Mutex<Option<SqliteStore>>,
}

impl StoreTokens {
    pub fn new(dir: PathBuf) -> StoreTokens {
        StoreTokens {
            dir,
            store: Mutex::new(None),
        }
    }
}

impl TokenBook for StoreTokens {
    fn hashes(&self) -> Option<Vec<(String, Vec<u8>)>> {
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        if guard.is_none() {
            *guard = SqliteStore::open(&self.dir).ok();
        }
        guard.as_ref()?.coord_token_hashes().ok()
    }
}

/// The bearer token of an `Authorization` header value.
pub fn bearer(header: &str) -> Option<Secret> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    let t = rest.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !t.is_empty()).then(|| Secret::new(t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_hex_and_only_their_hash_matches() {
        let a = new_token().unwrap();
        let b = new_token().unwrap();
        assert_eq!(a.expose().len(), 64);
        assert!(a.expose().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        let hashes = vec![
            ("h1".to_string(), token_hash(&a).to_vec()),
            ("h2".to_string(), token_hash(&b).to_vec()),
        ];
        assert_eq!(find_in(&hashes, &b).as_deref(), Some("h2"));
        assert_eq!(find_in(&hashes, &Secret::new("nope")), None);
        assert!(!constant_time_eq(b"ab", b"abc"));
        assert_eq!(bearer("Bearer  xyz ").unwrap().expose(), "xyz");
        assert!(bearer("Basic xyz").is_none() && bearer("Bearer ").is_none());
    }
}
