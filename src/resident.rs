//! The pages of a long-lived process's own code that only its start-up ran, given back
//! once start-up is over and then every minute (beside malloc's free pages,
//! [`crate::alloc::trim`]).
//!
//! The binary's code is mapped from its file, and the kernel maps the cached pages
//! around every page that runs (fault-around, 64 kB or a large folio). Start-up runs
//! code from all over the binary (the store's checks and migrations, containment, TLS,
//! the first pass), so an idle daemon held 7.2 MB of its 8.4 MB of code in its RSS.
//! [`drop_code_pages`] unmaps the binary's read-only private mappings that no write
//! ever touched (`MADV_DONTNEED`); the pages stay in the page cache, where the kernel
//! reclaims them first under pressure, and code that runs again maps them back at the
//! cost of a minor fault. An idle pass maps back about 6 MB within its first tenth of
//! a second (its code is spread as widely), so what stays given back is the code only
//! start-up ran, 0.2 to 1 MB (BENCHMARKS.md, "Idle memory").
//! A mapping with any page of its own (`Anonymous` above 0: relocated data made
//! read-only, RELRO) is never touched, since dropping it would lose what was written.

use std::path::Path;

/// How long after start-up the code pages are first dropped: the start-up (the store's
/// checks, containment, every target's first pass) is over within a second or two, and
/// an idle daemon read every second from its start held them for ten (issue 49).
pub const FIRST_AFTER_MS: i64 = 3_000;

/// Unmaps the pages of this binary's read-only, never-written private mappings, and
/// returns how many bytes of mappings it advised. Linux only (0 elsewhere).
pub fn drop_code_pages() -> usize {
    #[cfg(target_os = "linux")]
    {
        let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
            return 0;
        };
        let Ok(smaps) = std::fs::read_to_string("/proc/self/smaps") else {
            return 0;
        };
        let mut advised = 0;
        for (start, len) in droppable(&smaps, &exe) {
            // SAFETY: the range is a whole mapping of our own binary, read-only and
            // private, with no page ever written (no anonymous page): its content is
            // the file's, which a later access maps back. madvise changes no memory
            // any Rust value owns.
            let r = unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
            if r == 0 {
                advised += len;
            }
        }
        advised
    }
    #[cfg(not(target_os = "linux"))]
    {
        0
    }
}

/// The (start, length) of each mapping in `smaps` (the text of /proc/PID/smaps) that
/// maps `exe` private and without write permission, and holds no anonymous page.
pub fn droppable(smaps: &str, exe: &Path) -> Vec<(usize, usize)> {
    let exe = exe.to_string_lossy();
    let exe = exe.trim_end_matches(" (deleted)");
    let mut out = Vec::new();
    // The mapping being read: its range, if its header qualifies.
    let mut current: Option<(usize, usize)> = None;
    for line in smaps.lines() {
        if let Some(range) = header(line, exe) {
            current = range;
            continue;
        }
        if let Some(kb) = line.strip_prefix("Anonymous:")
            && let Some((start, len)) = current.take()
            && kb.trim().trim_end_matches("kB").trim() == "0"
        {
            out.push((start, len));
        }
    }
    out
}

/// For a mapping's header line: `Some(Some(range))` when it maps `exe` private and
/// read-only, `Some(None)` for any other mapping, `None` for a field line.
fn header(line: &str, exe: &str) -> Option<Option<(usize, usize)>> {
    let mut f = line.split_whitespace();
    let range = f.next()?;
    let (start, end) = range.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    let perms = f.next()?.as_bytes();
    if perms.len() != 4 {
        return None;
    }
    // offset, device, inode, then the path (which may hold spaces).
    let path = f.nth(3).map(|first| {
        let at = line.find(first).unwrap_or(line.len());
        line[at..].trim_end_matches(" (deleted)")
    });
    let ours = path == Some(exe) && perms[1] == b'-' && perms[3] == b'p';
    Some(ours.then_some((start, end - start)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS: &str = "\
55d0c000-55d0d000 r--p 00000000 fe:00 42      /usr/bin/runner-manager
Rss:                 4 kB
Anonymous:           0 kB
55d0d000-55d0f000 r-xp 00001000 fe:00 42      /usr/bin/runner-manager
Rss:                 8 kB
Anonymous:           0 kB
55d0f000-55d10000 r--p 00003000 fe:00 42      /usr/bin/runner-manager
Rss:                 4 kB
Anonymous:           4 kB
55d10000-55d11000 rw-p 00004000 fe:00 42      /usr/bin/runner-manager
Anonymous:           0 kB
7f00000000-7f00001000 r-xp 00000000 fe:00 43      /usr/lib/libc.so.6
Anonymous:           0 kB
7f00002000-7f00003000 rw-p 00000000 00:00 0
Anonymous:           4 kB
";

    #[test]
    fn only_the_binarys_read_only_unwritten_private_mappings_are_dropped() {
        let got = droppable(SMAPS, Path::new("/usr/bin/runner-manager"));
        // The header page and the code; not the relocated read-only data (RELRO),
        // the writable data, a library, or an anonymous mapping.
        assert_eq!(got, vec![(0x55d0c000, 0x1000), (0x55d0d000, 0x2000)]);
    }

    #[test]
    fn a_binary_replaced_on_disk_is_still_recognised() {
        let smaps = SMAPS.replace(
            "/usr/bin/runner-manager\nRss:                 8 kB",
            "/usr/bin/runner-manager (deleted)\nRss:                 8 kB",
        );
        let got = droppable(&smaps, Path::new("/usr/bin/runner-manager (deleted)"));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn code_runs_on_after_its_pages_are_dropped() {
        let advised = drop_code_pages();
        assert!(
            advised > 0,
            "the test binary's code was mapped from its file"
        );
        // Code not run since: maps back on use, and computes as before.
        let v: serde_json::Value = serde_json::from_str(r#"{"a":[1,2,3]}"#).unwrap();
        assert_eq!(v["a"][2], 3);
        let store = crate::store::SqliteStore::open_in_memory().unwrap();
        assert!(store.schema_version().unwrap() > 0);
    }
}
