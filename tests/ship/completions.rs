//! `completions bash|zsh|fish`: every command and option is in each script, the
//! scripts parse, and bash's completes what `--help` lists.

use crate::support::{BIN, Dir, on_path};
use runner_manager::cli::spec::{COMMANDS, GLOBAL};
use std::process::Command;

fn script(shell: &str) -> String {
    let d = Dir::new("compl");
    d.ok(&["completions", shell]).stdout
}

#[test]
fn every_command_and_option_is_in_every_script() {
    for shell in ["bash", "zsh", "fish"] {
        let s = script(shell);
        for c in COMMANDS {
            for w in c.path {
                assert!(s.contains(w), "{shell}: command word {w:?} missing");
            }
            // Each word is offered after the words before it.
            let (last, before) = c.path.split_last().unwrap();
            let offered = match shell {
                "fish" => s.contains(&format!(
                    "__runner_manager_at \"{}\"' -a {last}",
                    before.join(" ")
                )),
                _ => s.contains(&format!("\"{}\"", c.name())),
            };
            assert!(offered, "{shell}: command {:?} missing", c.name());
            for o in c.options {
                // fish names long options without the dashes (`-l state-dir`).
                let bare = o.name.trim_start_matches("--");
                assert!(
                    s.contains(o.name) || (shell == "fish" && s.contains(&format!("-l {bare}"))),
                    "{shell}: option {} of {:?} missing",
                    o.name,
                    c.name()
                );
            }
        }
        for o in GLOBAL {
            assert!(
                s.contains(o.name)
                    || s.contains(&format!("-l {}", o.name.trim_start_matches("--"))),
                "{shell}: global option {} missing",
                o.name
            );
        }
    }
}

fn syntax_ok(shell: &str, file: &std::path::Path) {
    let out = Command::new(shell).arg("-n").arg(file).output().unwrap();
    assert!(
        out.status.success(),
        "{shell} -n: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn scripts_parse_in_their_shells() {
    let d = Dir::new("compl-syntax");
    for shell in ["bash", "zsh", "fish"] {
        let s = script(shell);
        let f = d.path(&format!("c.{shell}"));
        std::fs::write(&f, &s).unwrap();
        if on_path(shell) {
            syntax_ok(shell, &f);
        } else {
            // Without the shell, at least the block structure must balance.
            let count = |w: &str| {
                s.lines()
                    .filter(|l| l.split_whitespace().next() == Some(w))
                    .count()
            };
            match shell {
                "zsh" => assert_eq!(count("case"), count("esac"), "zsh case/esac"),
                _ => assert_eq!(
                    count("function") + count("for") + count("if") + count("switch"),
                    count("end"),
                    "fish blocks"
                ),
            }
        }
    }
}

/// Sources the bash script and asks it to complete `words` (the last is the cursor's).
fn bash_complete(words: &[&str]) -> Vec<String> {
    let d = Dir::new("compl-bash");
    let f = d.path("c.bash");
    std::fs::write(&f, script("bash")).unwrap();
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let prog = format!(
        "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _runner_manager; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        f.display(),
        quoted.join(" "),
        words.len() - 1
    );
    let out = Command::new("bash").args(["-c", &prog]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn bash_completes_words_options_and_values() {
    let top = bash_complete(&["runner-manager", ""]);
    for w in [
        "target",
        "profile",
        "status",
        "doctor",
        "runner",
        "completions",
        "--state-dir",
    ] {
        assert!(top.contains(&w.to_string()), "{w} in {top:?}");
    }
    assert_eq!(bash_complete(&["runner-manager", "pro"]), vec!["profile"]);
    let sub = bash_complete(&["runner-manager", "--json", "profile", ""]);
    assert!(sub.contains(&"set".to_string()) && !sub.contains(&"profile".to_string()));
    let opts = bash_complete(&["runner-manager", "profile", "add", "gpu", "--ma"]);
    assert_eq!(opts, vec!["--max"]);
    // A value after an option that takes one is not taken for a command word.
    let after = bash_complete(&[
        "runner-manager",
        "--state-dir",
        "runner",
        "runner",
        "install",
        "--v",
    ]);
    assert_eq!(after, vec!["--version"]);
    let shells = bash_complete(&["runner-manager", "completions", "z"]);
    assert_eq!(shells, vec!["zsh"]);
}

#[test]
fn an_unknown_shell_is_bad_usage() {
    let out = Command::new(BIN)
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bash, zsh or fish"));
    assert!(out.stdout.is_empty());
}

/// Completes `words` with the real binary behind the script (as `COMP_WORDS[0]`),
/// on the books in `d`.
fn bash_complete_with_books(d: &Dir, words: &[&str]) -> Vec<String> {
    let state = d.state();
    let mut all = vec![BIN, "--state-dir", state.to_str().unwrap()];
    all.extend_from_slice(words);
    // No candidate prints one empty line.
    let mut out = bash_complete(&all);
    out.retain(|w| !w.is_empty());
    out
}

/// A state directory whose books hold target `octo` and these profiles.
fn books(tag: &str, profiles: &[&str]) -> Dir {
    let d = Dir::new(tag);
    d.ok(&[
        "target",
        "add",
        "octo",
        "--repo",
        "octo/app",
        "--token-env",
        "GH",
    ]);
    for name in profiles {
        d.ok(&["profile", "add", name, "--target", "octo", "--labels", "x"]);
    }
    d
}

#[test]
fn bash_completes_names_from_the_books_and_setting_keys() {
    let d = books("compl-names", &["linux", "gpu"]);
    let mut names = bash_complete_with_books(&d, &["profile", "set", ""]);
    names.sort();
    assert_eq!(names, vec!["gpu", "linux"]);
    assert_eq!(
        bash_complete_with_books(&d, &["profile", "show", "l"]),
        vec!["linux"]
    );
    assert_eq!(
        bash_complete_with_books(&d, &["target", "check", ""]),
        vec!["octo"]
    );
    assert_eq!(
        bash_complete_with_books(&d, &["profile", "add", "arm", "--target", ""]),
        vec!["octo"]
    );
    // After the name, the keys `profile set` takes, less those given.
    assert_eq!(
        bash_complete_with_books(&d, &["profile", "set", "linux", "ma"]),
        vec!["max="]
    );
    assert_eq!(
        bash_complete_with_books(&d, &["profile", "set", "linux", "max=8", "ma"]),
        Vec::<String>::new()
    );
    assert!(
        bash_complete_with_books(&d, &["host", "set", ""]).contains(&"runner_uids=".to_string())
    );
    // Options are still offered where an option is typed.
    assert_eq!(
        bash_complete_with_books(&d, &["profile", "set", "linux", "--rev"]),
        vec!["--revision"]
    );

    // Completing against a state directory that is not there creates nothing.
    let missing = d.path("typo");
    let words = [
        BIN,
        "--state-dir",
        missing.to_str().unwrap(),
        "profile",
        "set",
        "",
    ];
    // No names there: only the options are offered.
    let offered = bash_complete(&words);
    assert!(offered.iter().all(|w| w.starts_with("--")), "{offered:?}");
    assert!(
        !missing.exists(),
        "completion created {}",
        missing.display()
    );
}

#[test]
fn fish_completes_names_and_keys_from_the_books() {
    if !on_path("fish") {
        // `.ci/run` installs fish; without it the bash test above covers `__complete`.
        eprintln!("fish is not installed: skipped");
        return;
    }
    let d = books("compl-fish", &["linux"]);
    let f = d.path("c.fish");
    std::fs::write(&f, script("fish")).unwrap();
    let state = d.state();
    let complete = |line: &str| {
        let prog = format!(
            "source '{}'; complete -C '{BIN} --state-dir {} {line}'",
            f.display(),
            state.display()
        );
        let out = Command::new("fish").args(["-c", &prog]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let names = complete("profile set ");
    assert!(names.lines().any(|l| l.starts_with("linux")), "{names}");
    let keys = complete("profile set linux ma");
    assert!(keys.lines().any(|l| l.starts_with("max=")), "{keys}");
}
