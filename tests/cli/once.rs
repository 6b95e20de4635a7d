//! `daemon --once` exits 1 when a target's pass failed, naming the target and why.

use super::support::seeded;

#[test]
fn daemon_once_fails_when_its_target_fails_on_credentials() {
    let d = seeded("once-cred");
    // The token file was there at `target add`; it is gone when the daemon reads it.
    std::fs::remove_file(d.path("token")).unwrap();
    let r = d.run(&["daemon", "--once"]);
    assert_eq!(r.code, 1, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    // The error, then the line naming the fix.
    let mut lines = r.stderr.lines().rev();
    assert_eq!(
        lines.next(),
        Some("fix: runner-manager doctor"),
        "{}",
        r.stderr
    );
    let last = lines.next().unwrap_or_default();
    assert!(
        last.starts_with("runner-manager: target octo: credentials:"),
        "the error names the target and its credentials:\n{}",
        r.stderr
    );
}
