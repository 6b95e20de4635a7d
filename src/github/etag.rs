//! The conditional-request cache: URL -> (ETag, body), so polling an unchanged
//! resource costs a 304, which GitHub does not count against the rate limit. It keeps
//! a journal of the URLs changed since it was last asked, so the daemon can keep the
//! cache in its store and a restart costs what a poll costs (issue 20).

use std::collections::{BTreeSet, HashMap, VecDeque};

/// Entries kept before the oldest is dropped; enough for the runs and jobs of a busy
/// repository. Bounded in bytes too, since a body can be large.
pub const MAX_ENTRIES: usize = 4096;
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

/// A cached response: its validator, its body, and its `Link` header (a 304 need not
/// repeat it, and a cached page must still lead to the next one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cached {
    pub etag: String,
    pub body: Vec<u8>,
    pub link: Option<String>,
}

#[derive(Debug, Default)]
pub struct EtagCache {
    map: HashMap<String, Cached>,
    order: VecDeque<String>,
    bytes: usize,
    /// URLs put, changed or dropped since [`EtagCache::take_changes`], while the
    /// journal is on.
    changed: BTreeSet<String>,
    /// Whether changes are journaled: only for an owner that takes them (the daemon,
    /// which keeps the cache in its store). Off, nothing drains the journal, and it
    /// would grow by a URL for every run ever read (the coordinator's did, about a
    /// hundred bytes a job).
    journal: bool,
}

impl EtagCache {
    /// Turns the journal on: from now on, changes are kept until taken.
    pub fn keep_journal(&mut self) {
        self.journal = true;
    }

    fn note(&mut self, url: &str) {
        if self.journal {
            self.changed.insert(url.to_string());
        }
    }

    pub fn etag(&self, url: &str) -> Option<&str> {
        self.map.get(url).map(|c| c.etag.as_str())
    }

    pub fn get(&self, url: &str) -> Option<&Cached> {
        self.map.get(url)
    }

    pub fn put(&mut self, url: &str, entry: Cached) {
        if self.map.get(url) == Some(&entry) {
            return;
        }
        self.insert(url, entry);
        self.note(url);
    }

    /// Takes an entry kept from before (the store's), without journaling it.
    pub fn seed(&mut self, url: &str, entry: Cached) {
        self.insert(url, entry);
    }

    fn insert(&mut self, url: &str, entry: Cached) {
        self.drop_entry(url);
        self.bytes += entry.body.len();
        self.map.insert(url.to_string(), entry);
        self.order.push_back(url.to_string());
        while self.map.len() > MAX_ENTRIES || self.bytes > MAX_BYTES {
            match self.order.pop_front() {
                Some(old) => {
                    if let Some(c) = self.map.remove(&old) {
                        self.bytes -= c.body.len();
                        self.note(&old);
                    }
                }
                None => break,
            }
        }
    }

    /// Keeps `body` in place of the entry's body, when there is one: the same content
    /// in fewer bytes (only the fields the client reads, as the caller re-encoded
    /// them). A 304 then answers with it, and the store keeps kilobytes, not the
    /// hundreds a page of runs takes as GitHub sends it.
    pub fn compact(&mut self, url: &str, body: Vec<u8>) {
        let Some(c) = self.map.get_mut(url) else {
            return;
        };
        if c.body == body {
            return;
        }
        self.bytes = self.bytes - c.body.len() + body.len();
        c.body = body;
        self.note(url);
    }

    pub fn remove(&mut self, url: &str) {
        if self.drop_entry(url) {
            self.note(url);
        }
    }

    fn drop_entry(&mut self, url: &str) -> bool {
        match self.map.remove(url) {
            Some(c) => {
                self.bytes -= c.body.len();
                self.order.retain(|u| u != url);
                true
            }
            None => false,
        }
    }

    /// What changed since the last call: each URL with its entry now, `None` for one
    /// dropped.
    pub fn take_changes(&mut self) -> Vec<(String, Option<Cached>)> {
        std::mem::take(&mut self.changed)
            .into_iter()
            .map(|url| {
                let now = self.map.get(&url).cloned();
                (url, now)
            })
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(etag: &str, body: &[u8]) -> Cached {
        Cached {
            etag: etag.into(),
            body: body.to_vec(),
            link: None,
        }
    }

    #[test]
    fn keeps_replaces_and_bounds() {
        let mut c = EtagCache::default();
        c.put("/a", e("\"1\"", b"one"));
        c.put("/a", e("\"2\"", b"two"));
        assert_eq!(c.etag("/a"), Some("\"2\""));
        assert_eq!(c.get("/a").unwrap().body, b"two");
        assert_eq!(c.len(), 1);
        for i in 0..MAX_ENTRIES + 10 {
            c.put(&format!("/p{i}"), e("e", b""));
        }
        assert_eq!(c.len(), MAX_ENTRIES);
        assert_eq!(c.etag("/a"), None, "the oldest entry goes first");
        c.put("/big", e("e", &vec![0; MAX_BYTES + 1]));
        assert!(c.is_empty(), "a body over the byte bound is not kept");
    }

    #[test]
    fn journals_what_changed_and_not_what_was_seeded() {
        let mut c = EtagCache::default();
        c.keep_journal();
        c.seed("/kept", e("\"k\"", b"kept"));
        assert!(
            c.take_changes().is_empty(),
            "a seeded entry is already stored"
        );
        assert_eq!(c.etag("/kept"), Some("\"k\""));
        c.put("/a", e("\"1\"", b"long body as GitHub sends it"));
        c.compact("/a", b"short".to_vec());
        c.compact("/absent", b"x".to_vec());
        assert_eq!(
            c.take_changes(),
            vec![("/a".to_string(), Some(e("\"1\"", b"short")))]
        );
        // The same answer again, or the same compact body, changes nothing.
        c.put("/a", e("\"1\"", b"short"));
        c.compact("/a", b"short".to_vec());
        assert!(c.take_changes().is_empty());
        c.remove("/kept");
        assert_eq!(c.take_changes(), vec![("/kept".to_string(), None)]);
        // An eviction is a change too.
        for i in 0..MAX_ENTRIES {
            c.put(&format!("/p{i}"), e("e", b""));
        }
        assert!(c.take_changes().contains(&("/a".to_string(), None)));
    }

    #[test]
    fn keeps_no_journal_unless_asked() {
        // A cache whose owner never takes its changes (the coordinator's) stays
        // bounded by its entries: a journal nobody drains would grow with every URL.
        let mut c = EtagCache::default();
        for i in 0..MAX_ENTRIES * 2 {
            c.put(&format!("/p{i}"), e("e", b"body"));
            c.compact(&format!("/p{i}"), b"b".to_vec());
        }
        c.remove(&format!("/p{}", MAX_ENTRIES * 2 - 1));
        assert!(c.take_changes().is_empty());
        assert_eq!(c.changed.len(), 0);
        c.keep_journal();
        c.put("/x", e("e", b"x"));
        assert_eq!(
            c.take_changes(),
            vec![("/x".to_string(), Some(e("e", b"x")))]
        );
    }
}
