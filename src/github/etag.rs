//! The conditional-request cache: URL -> (ETag, body), so polling an unchanged
//! resource costs a 304, which GitHub does not count against the rate limit.

use std::collections::{HashMap, VecDeque};

/// Entries kept before the oldest is dropped; enough for the runs and jobs of a busy
/// repository. Bounded in bytes too, since a body can be large.
pub const MAX_ENTRIES: usize = 4096;
pub const MAX_BYTES: usize = 64 * 1024 * 1024;

/// A cached response: its validator, its body, and its `Link` header (a 304 need not
/// repeat it, and a cached page must still lead to the next one).
#[derive(Debug, Clone)]
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
}

impl EtagCache {
    pub fn etag(&self, url: &str) -> Option<&str> {
        self.map.get(url).map(|c| c.etag.as_str())
    }

    pub fn get(&self, url: &str) -> Option<&Cached> {
        self.map.get(url)
    }

    pub fn put(&mut self, url: &str, entry: Cached) {
        self.remove(url);
        self.bytes += entry.body.len();
        self.map.insert(url.to_string(), entry);
        self.order.push_back(url.to_string());
        while self.map.len() > MAX_ENTRIES || self.bytes > MAX_BYTES {
            match self.order.pop_front() {
                Some(old) => {
                    if let Some(c) = self.map.remove(&old) {
                        self.bytes -= c.body.len();
                    }
                }
                None => break,
            }
        }
    }

    pub fn remove(&mut self, url: &str) {
        if let Some(c) = self.map.remove(url) {
            self.bytes -= c.body.len();
            self.order.retain(|u| u != url);
        }
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
}
