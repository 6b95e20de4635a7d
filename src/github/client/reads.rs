//! Reading: one resource or every page of a listing, and the ETag cache behind conditional GETs (a 304 answered from it).

use super::{Call, GitHubClient, Reply, lock, parse_json};
use crate::github::error::GhError;
use crate::github::etag::Cached;
use crate::github::headers::Headers;
use crate::github::pagination::{next_link, origin};
use serde::Serialize;
use serde::de::DeserializeOwned;

impl GitHubClient {
    /// Keeps a 2xx body under its validator, or forgets the URL's entry when the
    /// answer has none (a stale one must not be sent next time).
    pub(super) fn keep_etag(&self, url: &str, reply: &Reply) {
        match reply.headers.get("etag") {
            Some(tag) => {
                let entry = Cached {
                    etag: tag.to_string(),
                    body: reply.body.clone(),
                    link: reply.headers.get("link").map(str::to_string),
                };
                lock(&self.state).etags.put(url, entry);
            }
            None => lock(&self.state).etags.remove(url),
        }
    }

    /// A 304's answer: the cached body, as a 200.
    pub(super) fn cached_reply(&self, url: &str) -> Result<Reply, GhError> {
        let mut st = lock(&self.state);
        match st.etags.get(url).cloned() {
            Some(hit) => {
                let mut pairs = vec![("etag".to_string(), hit.etag)];
                if let Some(l) = hit.link {
                    pairs.push(("link".to_string(), l));
                }
                Ok(Reply {
                    status: 200,
                    headers: Headers::new(pairs),
                    body: hit.body,
                })
            }
            None => {
                st.etags.remove(url);
                Err(GhError::Malformed {
                    detail: "304 Not Modified for a request sent without an ETag".into(),
                })
            }
        }
    }

    /// GETs and parses one resource.
    pub(crate) fn get_json<T: DeserializeOwned + Serialize>(
        &self,
        path: &str,
    ) -> Result<T, GhError> {
        let url = self.url(path);
        let parsed = parse_json(&self.call(&Call::get(url.clone()))?.body)?;
        self.compact_cached(&url, &parsed);
        Ok(parsed)
    }

    /// Keeps what `parsed` declares, re-encoded, in place of the body cached for `url`
    /// (see [`EtagCache::compact`]): the cache, and the store that keeps it, hold only
    /// the fields the client reads.
    fn compact_cached<T: Serialize>(&self, url: &str, parsed: &T) {
        if let Ok(body) = serde_json::to_vec(parsed) {
            lock(&self.state).etags.compact(url, body);
        }
    }

    /// Whether a conditional GET of `path` has a cached answer (its next read of an
    /// unchanged resource is a 304).
    pub(crate) fn is_cached(&self, path: &str) -> bool {
        lock(&self.state).etags.get(&self.url(path)).is_some()
    }

    /// Entries kept from an earlier run (the daemon's store), so its first conditional
    /// GETs can be answered with 304s.
    pub fn seed_etags(&self, entries: impl IntoIterator<Item = (String, Cached)>) {
        let mut st = lock(&self.state);
        for (url, entry) in entries {
            st.etags.seed(&url, entry);
        }
    }

    /// The cache entries changed since the last call (`None`: dropped), to keep; only
    /// with [`GitHubClient::with_etag_journal`], else always empty.
    pub fn take_etag_changes(&self) -> Vec<(String, Option<Cached>)> {
        lock(&self.state).etags.take_changes()
    }

    /// GETs every page of a listing (`per_page` must already be in `path`), following
    /// `Link: rel="next"` on our own origin only, up to `max_pages`.
    pub(crate) fn get_pages<T: DeserializeOwned + Serialize, U>(
        &self,
        path: &str,
        mut take: impl FnMut(T) -> Vec<U>,
    ) -> Result<Vec<U>, GhError> {
        let mut out = Vec::new();
        let mut url = self.url(path);
        for _ in 0..self.config.max_pages {
            let reply = self.call(&Call::get(url.clone()))?;
            let parsed = parse_json(&reply.body)?;
            self.compact_cached(&url, &parsed);
            out.extend(take(parsed));
            match reply.headers.get("link").and_then(next_link) {
                Some(next) => {
                    if origin(&next).as_deref() != Some(self.origin.as_str()) {
                        return Err(GhError::Malformed {
                            detail: "a Link header points away from the API host".into(),
                        });
                    }
                    url = next;
                }
                None => return Ok(out),
            }
        }
        Ok(out)
    }
}
