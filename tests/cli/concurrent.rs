//! Two processes editing one profile at the same revision: exactly one wins.

use crate::support::{BIN, seeded};
use std::process::{Command, Stdio};

#[test]
fn two_edits_at_one_revision_exactly_one_wins() {
    let d = seeded("race");
    for round in 0..5u64 {
        let rev = (round + 1).to_string();
        let values = [10 + round * 2, 11 + round * 2];
        // Both processes start before either is waited for, so their writes race.
        let children: Vec<_> = values
            .iter()
            .map(|v| {
                Command::new(BIN)
                    .arg("--state-dir")
                    .arg(d.state())
                    .args([
                        "profile",
                        "set",
                        "linux",
                        &format!("max={v}"),
                        "--revision",
                        &rev,
                    ])
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let results: Vec<_> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let winners: Vec<usize> = (0..2).filter(|&i| results[i].status.success()).collect();
        assert_eq!(winners.len(), 1, "round {round}: exactly one edit must win");
        let loser = &results[1 - winners[0]];
        assert_eq!(loser.status.code(), Some(13), "conflict");
        let msg = String::from_utf8_lossy(&loser.stderr);
        assert!(msg.contains("changed by another edit"), "{msg}");
        let show = d.ok(&["--json", "profile", "show", "linux"]);
        let v: serde_json::Value = serde_json::from_str(&show.stdout).unwrap();
        assert_eq!(
            v["max"], values[winners[0]],
            "the store holds the winner's value"
        );
        assert_eq!(v["revision"], round + 2);
    }
}
