//! Pagination by the `Link` header: find the `rel="next"` URL, and keep it on our host.

/// GitHub's largest page.
pub const PER_PAGE: u32 = 100;
/// Pages followed before a listing is cut short (10,000 items at 100 a page).
pub const MAX_PAGES: usize = 100;

/// The `rel="next"` URL of a `Link` header, if any.
///
/// `<https://api.github.com/repositories/1/actions/runners?page=2>; rel="next", <…>; rel="last"`
pub fn next_link(link: &str) -> Option<String> {
    for part in link.split(',') {
        let mut pieces = part.split(';');
        let url = pieces.next()?.trim();
        let url = url.strip_prefix('<')?.strip_suffix('>')?;
        let is_next = pieces.any(|p| {
            let p = p.trim();
            p.strip_prefix("rel=")
                .map(|v| v.trim_matches('"').split(' ').any(|r| r == "next"))
                .unwrap_or(false)
        });
        if is_next {
            return Some(url.to_string());
        }
    }
    None
}

/// `scheme://host[:port]` of a URL, lowercased, to check a next link stays on the API
/// host: the client must never send its token to another origin.
pub fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let host = rest.split(['/', '?', '#']).next()?;
    if host.is_empty() {
        return None;
    }
    Some(format!(
        "{}://{}",
        scheme.to_ascii_lowercase(),
        host.to_ascii_lowercase()
    ))
}

/// Appends a query parameter to a URL.
pub fn with_query(url: &str, key: &str, value: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!(
        "{url}{sep}{key}={}",
        crate::http_server::percent_encode(value)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_next_among_others() {
        let l = r#"<https://api.github.com/repositories/1/actions/runners?per_page=100&page=2>; rel="next", <https://api.github.com/repositories/1/actions/runners?per_page=100&page=5>; rel="last""#;
        assert_eq!(
            next_link(l).as_deref(),
            Some("https://api.github.com/repositories/1/actions/runners?per_page=100&page=2")
        );
        let last_page = r#"<https://x/a?page=1>; rel="prev", <https://x/a?page=1>; rel="first""#;
        assert_eq!(next_link(last_page), None);
        assert_eq!(next_link(""), None);
        assert_eq!(next_link("garbage"), None);
        assert_eq!(
            next_link(r#"<http://h/p?page=3>;rel=next"#).as_deref(),
            Some("http://h/p?page=3")
        );
    }

    #[test]
    fn origins() {
        assert_eq!(
            origin("https://API.github.com/x?y").as_deref(),
            Some("https://api.github.com")
        );
        assert_eq!(
            origin("http://127.0.0.1:8080").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(origin("nope"), None);
    }

    #[test]
    fn queries() {
        assert_eq!(with_query("/a", "name", "rm 1/x"), "/a?name=rm%201%2Fx");
        assert_eq!(with_query("/a?x=1", "page", "2"), "/a?x=1&page=2");
    }
}
