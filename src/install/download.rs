//! Downloading a runner release to a file: streamed (a release is ~200 MB), bounded in
//! size, hashed with SHA-256 on the way, with an optional progress report.

use super::InstallError;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

/// Largest download accepted; releases are about 200 MB.
pub const MAX_DOWNLOAD_BYTES: u64 = 1024 * 1024 * 1024;

/// Told how far a download is.
pub trait Progress {
    /// `total` is the Content-Length when the server sent one.
    fn update(&mut self, done: u64, total: Option<u64>);
    fn finish(&mut self);
    /// Whether to give up now (the daemon is stopping): the download ends with an
    /// error and its file is removed.
    fn cancelled(&self) -> bool {
        false
    }
}

/// No report at all (not a terminal, or tests).
impl Progress for () {
    fn update(&mut self, _: u64, _: Option<u64>) {}
    fn finish(&mut self) {}
}

/// Whether `url` is plain http:// to this machine (the only plain HTTP allowed).
pub fn loopback_http(url: &str) -> bool {
    let rest = url.strip_prefix("http://").unwrap_or("");
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, _)| h);
    host == "127.0.0.1" || host == "localhost" || host == "[::1]"
}

fn hex(d: &[u8]) -> String {
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// The HTTP agent for release downloads: statuses as values, bounded waits,
/// redirects followed (github.com release URLs redirect to a storage host).
pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .user_agent(crate::github::client::USER_AGENT)
        .timeout_connect(Some(Duration::from_secs(15)))
        .timeout_per_read(Some(Duration::from_secs(60)))
        .max_redirects(5)
        .build()
        .new_agent()
}

/// Downloads `url` into `dest` (created or truncated) and returns the SHA-256 (hex).
/// When `expected` is given and differs, `dest` is removed and the call fails.
pub fn download(
    url: &str,
    dest: &Path,
    expected: Option<&str>,
    progress: &mut dyn Progress,
) -> Result<String, InstallError> {
    if !url.starts_with("https://") && !loopback_http(url) {
        return Err(InstallError::Download(format!(
            "refusing to download {url}: only https:// (or http:// on loopback) is allowed"
        )));
    }
    let agent = agent();
    let resp = agent.get(url).call().map_err(|e| {
        InstallError::Download(format!(
            "downloading {url}: {e}; check the network and try again"
        ))
    })?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(InstallError::Download(format!(
            "downloading {url}: HTTP {status}; check that the version exists"
        )));
    }
    let total = resp
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if total.is_some_and(|t| t > MAX_DOWNLOAD_BYTES) {
        return Err(InstallError::Download(format!(
            "downloading {url}: {} bytes is more than a runner release can be",
            total.unwrap_or(0)
        )));
    }
    let mut reader = resp
        .into_body()
        .into_with_config()
        .limit(MAX_DOWNLOAD_BYTES)
        .reader();
    let io_err = |e: std::io::Error| InstallError::Io(format!("writing {}: {e}", dest.display()));
    let mut file = std::fs::File::create(dest).map_err(io_err)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 64 * 1024];
    let mut done = 0u64;
    let result = loop {
        if progress.cancelled() {
            break Err(InstallError::Download(format!(
                "downloading {url}: given up after {done} bytes (stopping)"
            )));
        }
        let n = match reader.read(&mut buf) {
            Ok(0) => break Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                break Err(InstallError::Download(format!(
                    "downloading {url}: {e} after {done} bytes; try again"
                )));
            }
        };
        ctx.update(&buf[..n]);
        if let Err(e) = file.write_all(&buf[..n]) {
            break Err(io_err(e));
        }
        done += n as u64;
        progress.update(done, total);
    };
    progress.finish();
    let result = result.and_then(|()| file.sync_all().map_err(io_err));
    let actual = hex(ctx.finish().as_ref());
    let result = result.and_then(|()| match expected {
        Some(e) if !e.eq_ignore_ascii_case(&actual) => Err(InstallError::Checksum {
            expected: e.to_ascii_lowercase(),
            actual: actual.clone(),
        }),
        _ => Ok(()),
    });
    if result.is_err() {
        let _ = std::fs::remove_file(dest);
    }
    result.map(|()| actual)
}

#[cfg(test)]
mod tests {
    use super::*;

    struct GiveUp;

    impl Progress for GiveUp {
        fn update(&mut self, _: u64, _: Option<u64>) {}
        fn finish(&mut self) {}
        fn cancelled(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_cancelled_download_fails_and_leaves_no_file() {
        let sim = crate::sim::SimGitHub::start(crate::sim::SimConfig::default()).unwrap();
        let url = format!(
            "{}/_sim/downloads/v2.336.0/actions-runner-linux-x64-2.336.0.tar.gz",
            sim.url()
        );
        let dest = std::env::temp_dir().join(format!("rm-cancel-{}.tgz", std::process::id()));
        let e = download(&url, &dest, None, &mut GiveUp).unwrap_err();
        assert!(e.to_string().contains("given up"), "{e}");
        assert!(!dest.exists());
        // Not cancelled, the same download goes through.
        download(&url, &dest, None, &mut ()).unwrap();
        assert!(dest.exists());
        let _ = std::fs::remove_file(&dest);
    }

    #[test]
    fn only_https_or_loopback_http() {
        assert!(super::loopback_http("http://127.0.0.1:8080/x"));
        assert!(super::loopback_http("http://localhost/x"));
        assert!(!super::loopback_http("http://example.com/x"));
        assert!(!super::loopback_http("http://127.0.0.1.evil.com/x"));
    }
}
