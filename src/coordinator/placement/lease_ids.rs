//! Lease ids without randomness drawn inside placement: each is HMAC-SHA-256, keyed by
//! 32 random bytes the caller drew at start, of the count of ids issued before it,
//! cut to 128 bits and written as 32 hex digits. A host cannot guess another host's
//! lease (nor the next id) without the key; a coordinator starts each life with a new
//! key, so ids do not repeat across restarts either (hosts refuse one seen before).

use ring::hmac;
use std::fmt;

/// The lease ids of one coordinator life.
#[derive(Clone)]
pub struct LeaseIds {
    key: hmac::Key,
    issued: u64,
}

impl LeaseIds {
    pub fn new(key: &[u8; 32]) -> LeaseIds {
        LeaseIds {
            key: hmac::Key::new(hmac::HMAC_SHA256, key),
            issued: 0,
        }
    }

    /// The next id: 32 hex digits.
    pub fn issue(&mut self) -> String {
        let tag = hmac::sign(&self.key, &self.issued.to_be_bytes());
        self.issued += 1;
        tag.as_ref()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The key is never printed.
impl fmt::Debug for LeaseIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaseIds")
            .field("issued", &self.issued)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn ids_are_32_hex_digits_never_repeat_and_follow_the_key_alone() {
        let mut a = LeaseIds::new(&[7; 32]);
        let ids: Vec<String> = (0..1000).map(|_| a.issue()).collect();
        assert!(ids.iter().all(|id| id.len() == 32), "{:?}", ids[0]);
        assert!(
            ids.iter()
                .all(|id| id.bytes().all(|b| b.is_ascii_hexdigit())),
            "{:?}",
            ids[0]
        );
        assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), ids.len());
        // The same key gives the same ids (a test is reproducible); another key, as
        // each start draws, gives others from the first.
        let mut again = LeaseIds::new(&[7; 32]);
        assert_eq!(again.issue(), ids[0]);
        let mut other = LeaseIds::new(&[8; 32]);
        let theirs: BTreeSet<String> = (0..1000).map(|_| other.issue()).collect();
        assert!(ids.iter().all(|id| !theirs.contains(id)));
        assert!(!format!("{a:?}").contains("07"), "{a:?}");
    }
}
