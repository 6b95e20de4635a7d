//! The release source: a directory or an http(s) URL holding `SHA256SUMS` (lines of
//! `sha256sum` output) and one binary per version and target, named
//! `runner-manager-<version>-<arch>-<os>`. `SHA256SUMS` is also the index: the newest
//! version is the highest one it lists for this target, so a URL needs no listing.

use super::UpdateError;
use crate::domain::validate::Invalid;
use crate::install::versions::is_version;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The index file a release source holds.
pub const SUMS: &str = "SHA256SUMS";
/// The most `SHA256SUMS` may hold; a real one is a few lines.
pub const MAX_SUMS_BYTES: u64 = 1 << 20;

/// Where releases come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    Dir(PathBuf),
    /// `https://…`, or `http://` on loopback (as `runner install` allows).
    Url(String),
}

impl Source {
    /// Reads a stored or typed `release_source` value; empty is none. A directory must
    /// be absolute (its existence is the caller's check, at `host set`).
    pub fn parse(key: &str, value: &str) -> Result<Option<Source>, Invalid> {
        if value.is_empty() {
            return Ok(None);
        }
        if value.starts_with("http://") || value.starts_with("https://") {
            if value.len() > 2048 || value.contains(|c: char| c.is_whitespace() || c.is_control()) {
                return Err(Invalid::new(
                    key,
                    "is not a usable URL (too long, or has spaces)",
                ));
            }
            let authority = value.split("://").nth(1).unwrap_or("").split('/').next();
            if authority.is_some_and(|a| a.contains('@')) {
                // The URL is shown by `host show`: it must not carry a secret.
                return Err(Invalid::new(
                    key,
                    "must not carry credentials (USER:PASSWORD@); use a URL that needs none",
                ));
            }
            if !value.starts_with("https://") && !crate::install::loopback_http(value) {
                return Err(Invalid::new(
                    key,
                    format!(
                        "plain http:// is allowed on loopback only; use https:// (got {value:?})"
                    ),
                ));
            }
            return Ok(Some(Source::Url(value.trim_end_matches('/').to_string())));
        }
        crate::domain::validate::path(key, value)
            .map(|p| Some(Source::Dir(p)))
            .map_err(|i| {
                Invalid::new(
                    key,
                    format!(
                        "{}; expected https://URL or an absolute directory",
                        i.reason
                    ),
                )
            })
    }

    fn describe(&self, file: &str) -> String {
        match self {
            Source::Dir(d) => d.join(file).display().to_string(),
            Source::Url(u) => format!("{u}/{file}"),
        }
    }
}

/// This binary's target in release file names: `x86_64-linux`, `aarch64-linux`.
pub fn target() -> String {
    format!("{}-{}", std::env::consts::ARCH, std::env::consts::OS)
}

/// The release file of `version` for `target`.
pub fn asset_name(version: &str, target: &str) -> String {
    format!("runner-manager-{version}-{target}")
}

/// One release binary `SHA256SUMS` lists for this target.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub version: String,
    pub file: String,
    /// Lowercase hex.
    pub sha256: String,
}

/// The entries of `SHA256SUMS` (`<64 hex>  <file>`, or `<hex> *<file>`) that are this
/// target's binaries, in file order. Other files, other targets, versions that are not
/// plain dotted numbers (pre-releases) and malformed lines are left out.
pub fn parse_sums(text: &str, target: &str) -> Vec<Entry> {
    let suffix = format!("-{target}");
    text.lines()
        .filter_map(|line| {
            let (hash, rest) = line.trim_end().split_once(char::is_whitespace)?;
            let file = rest.trim_start().trim_start_matches('*');
            let ok_hash = hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit());
            let version = file
                .strip_prefix("runner-manager-")?
                .strip_suffix(suffix.as_str())?;
            (ok_hash && is_version(version)).then(|| Entry {
                version: version.to_string(),
                file: file.to_string(),
                sha256: hash.to_ascii_lowercase(),
            })
        })
        .collect()
}

/// The highest version among `entries`.
pub fn newest(entries: &[Entry]) -> Option<&Entry> {
    entries
        .iter()
        .max_by(|a, b| crate::install::compare_versions(&a.version, &b.version))
}

/// Reads `SHA256SUMS` from the source, into memory (nothing is written).
pub fn read_sums(source: &Source) -> Result<String, UpdateError> {
    let what = source.describe(SUMS);
    let fail = |e: String| {
        UpdateError::Source(format!(
            "cannot read {what}: {e}; check release_source (runner-manager host show)"
        ))
    };
    let mut text = String::new();
    match source {
        Source::Dir(d) => {
            // Checked on every read, not only at `host set`: the directory may have
            // changed hands since (issue 33).
            text = super::trust::audit(d)
                .map_err(UpdateError::Source)?
                .ok_or_else(|| fail("not found".into()))?;
        }
        Source::Url(u) => {
            let resp = crate::install::agent()
                .get(&format!("{u}/{SUMS}"))
                .call()
                .map_err(|e| fail(e.to_string()))?;
            let status = resp.status().as_u16();
            if status != 200 {
                return Err(fail(format!("HTTP {status}")));
            }
            resp.into_body()
                .into_with_config()
                .limit(MAX_SUMS_BYTES)
                .reader()
                .read_to_string(&mut text)
                .map_err(|e| fail(e.to_string()))?;
        }
    }
    Ok(text)
}

/// Writes the release binary `entry` to `dest` (a new file: it must not exist), checks
/// its SHA-256 and syncs it. On any failure `dest` is removed.
pub fn fetch(source: &Source, entry: &Entry, dest: &Path) -> Result<(), UpdateError> {
    let result = match source {
        Source::Url(u) => crate::install::download(
            &format!("{u}/{}", entry.file),
            dest,
            Some(&entry.sha256),
            &mut (),
        )
        .map(drop)
        .map_err(|e| match e {
            crate::install::InstallError::Checksum { expected, actual } => {
                UpdateError::Checksum { expected, actual }
            }
            other => UpdateError::Source(other.to_string()),
        }),
        Source::Dir(d) => super::trust::check_dir(d)
            .map_err(UpdateError::Source)
            .and_then(|()| copy_checked(d, &entry.file, dest, &entry.sha256)),
    };
    if result.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    result
}

/// Copies `dir/file` (trusted, at most `trust::MAX_BINARY_BYTES`) to the new file
/// `dest`, hashing on the way, and syncs it.
fn copy_checked(dir: &Path, file: &str, dest: &Path, expected: &str) -> Result<(), UpdateError> {
    let from = &dir.join(file);
    let io = |what: &Path, e: std::io::Error| {
        UpdateError::Io(format!("cannot copy {}: {e}", what.display()))
    };
    if !from.exists() && std::fs::symlink_metadata(from).is_err() {
        return Err(UpdateError::Source(format!(
            "cannot read {}: not found; SHA256SUMS lists it, so the release is incomplete",
            from.display()
        )));
    }
    let max = super::trust::MAX_BINARY_BYTES;
    // A file that grows while it is copied stops at the cap and fails its sum.
    let mut src = super::trust::open(dir, file, max)
        .map_err(UpdateError::Source)?
        .take(max + 1);
    let mut out = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dest)
        .map_err(|e| io(dest, e))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match src.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(from, e)),
        };
        ctx.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(|e| io(dest, e))?;
    }
    let actual: String = ctx
        .finish()
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if !actual.eq_ignore_ascii_case(expected) {
        return Err(UpdateError::Checksum {
            expected: expected.to_string(),
            actual,
        });
    }
    out.sync_all().map_err(|e| io(dest, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "1111111111111111111111111111111111111111111111111111111111111111";
    const H2: &str = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA";

    #[test]
    fn sums_list_this_targets_binaries_and_nothing_else() {
        let text = format!(
            "{H1}  runner-manager-0.9.0-x86_64-linux\n\
             {H2} *runner-manager-0.10.0-x86_64-linux\n\
             {H1}  runner-manager-0.11.0-aarch64-linux\n\
             {H1}  runner-manager-0.12.0-rc1-x86_64-linux\n\
             {H1}  runner-manager-0.10.0-x86_64-linux.tar.gz\n\
             1234  runner-manager-0.13.0-x86_64-linux\n\
             \n\
             garbage\n"
        );
        let e = parse_sums(&text, "x86_64-linux");
        let versions: Vec<&str> = e.iter().map(|e| e.version.as_str()).collect();
        assert_eq!(versions, ["0.9.0", "0.10.0"]);
        assert_eq!(e[1].sha256, H2.to_ascii_lowercase());
        assert_eq!(e[1].file, "runner-manager-0.10.0-x86_64-linux");
        assert_eq!(newest(&e).unwrap().version, "0.10.0");
        assert!(newest(&parse_sums(&text, "riscv64-linux")).is_none());
    }

    #[test]
    fn a_source_is_https_loopback_http_or_an_absolute_directory() {
        assert_eq!(Source::parse("release_source", "").unwrap(), None);
        assert_eq!(
            Source::parse("release_source", "https://example.com/rm/").unwrap(),
            Some(Source::Url("https://example.com/rm".into()))
        );
        assert!(
            Source::parse("release_source", "http://127.0.0.1:8080/r")
                .unwrap()
                .is_some()
        );
        assert_eq!(
            Source::parse("release_source", "/srv/releases").unwrap(),
            Some(Source::Dir("/srv/releases".into()))
        );
        for bad in [
            "http://example.com/r",
            "releases",
            "https://a b",
            "ftp://x",
            "https://u:secret@example.com/r",
        ] {
            let e = Source::parse("release_source", bad).unwrap_err();
            assert_eq!(e.arg, "release_source", "{bad}");
        }
    }

    #[test]
    fn a_copy_that_does_not_match_its_sum_is_removed() {
        let dir = std::env::temp_dir().join(format!("rm-release-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("runner-manager-1.0.0-t"), b"new binary").unwrap();
        let entry = Entry {
            version: "1.0.0".into(),
            file: "runner-manager-1.0.0-t".into(),
            sha256: H1.into(),
        };
        let dest = dir.join("staged");
        let e = fetch(&Source::Dir(dir.clone()), &entry, &dest).unwrap_err();
        assert!(matches!(e, UpdateError::Checksum { .. }), "{e}");
        assert!(!dest.exists());
        // The real sum, as `sha256sum` prints it.
        let real: String = ring::digest::digest(&ring::digest::SHA256, b"new binary")
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let good = Entry {
            sha256: real,
            ..entry
        };
        fetch(&Source::Dir(dir.clone()), &good, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"new binary");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Serves `files` (name, body) over loopback HTTP/1.0 for `n` requests; 404 for
    /// any other path.
    fn serve(files: Vec<(String, Vec<u8>)>, n: usize) -> String {
        use std::io::{BufRead, BufReader};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/rel", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming().take(n) {
                let mut stream = stream.unwrap();
                // The whole request head is read before answering: closing a socket
                // with unread input would reset the connection under the answer.
                let mut reader = BufReader::new(&stream);
                let mut line = String::new();
                reader.read_line(&mut line).unwrap();
                let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
                let mut header = String::new();
                while reader.read_line(&mut header).is_ok_and(|n| n > 2) {
                    header.clear();
                }
                let body = files
                    .iter()
                    .find(|(name, _)| path == format!("/rel/{name}"))
                    .map(|(_, b)| b.clone());
                let (status, body) = match body {
                    Some(b) => ("200 OK", b),
                    None => ("404 Not Found", Vec::new()),
                };
                let head = format!(
                    "HTTP/1.0 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = stream.write_all(head.as_bytes());
                let _ = stream.write_all(&body);
            }
        });
        url
    }

    #[test]
    fn a_url_source_reads_its_sums_and_verifies_what_it_downloads() {
        let target = "x86_64-linux";
        let name = asset_name("2.0.0", target);
        let body = b"the new binary".to_vec();
        let sum: String = ring::digest::digest(&ring::digest::SHA256, &body)
            .as_ref()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let sums = format!("{sum}  {name}\n{H1}  {}\n", asset_name("1.0.0", target));
        let url = serve(
            vec![(SUMS.to_string(), sums.into_bytes()), (name, body.clone())],
            3,
        );
        let source = Source::parse("release_source", &url).unwrap().unwrap();
        let entries = parse_sums(&read_sums(&source).unwrap(), target);
        let newest = newest(&entries).unwrap().clone();
        assert_eq!(newest.version, "2.0.0");
        let dir = std::env::temp_dir().join(format!("rm-release-url-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let dest = dir.join("staged");
        fetch(&source, &newest, &dest).unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), body);
        // Served bytes that do not match their line: refused, nothing left.
        let wrong = Entry {
            sha256: H1.into(),
            ..newest
        };
        let _ = std::fs::remove_file(&dest);
        let e = fetch(&source, &wrong, &dest).unwrap_err();
        assert!(matches!(e, UpdateError::Checksum { .. }), "{e}");
        assert!(!dest.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
