//! `daemon --once` fails when a target's pass failed, naming the target and why, with
//! the class of what failed (a credential that cannot be read: 3, credentials).

use super::support::seeded;

#[test]
fn daemon_once_fails_when_its_target_fails_on_credentials() {
    let d = seeded("once-cred");
    // The token file was there at `target add`; it is gone when the daemon reads it.
    std::fs::remove_file(d.path("token")).unwrap();
    let r = d.run(&["daemon", "--once"]);
    assert_eq!(r.code, 3, "stdout:\n{}\nstderr:\n{}", r.stdout, r.stderr);
    // The error, then the line naming the fix.
    let mut lines = r.stderr.lines().rev();
    let fix = lines.next().unwrap_or_default();
    assert!(
        fix.starts_with("fix: runner-manager target set") && fix.contains("token_file="),
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
