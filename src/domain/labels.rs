//! Runner labels: validation, the default labels GitHub gives a self-hosted runner, and
//! matching a job's `runs-on` labels against a runner's (case-insensitive subset).

use super::validate::Invalid;

pub const MAX_LABELS: usize = 100;
pub const MAX_LABEL_LEN: usize = 100;

/// Checks a profile's labels whole: 1-100 labels, each 1-100 characters with no
/// whitespace, comma or control character, and no two equal ignoring case.
pub fn validate(arg: &str, labels: &[String]) -> Result<Vec<String>, Invalid> {
    if labels.is_empty() {
        return Err(Invalid::new(arg, "at least one label is required"));
    }
    if labels.len() > MAX_LABELS {
        return Err(Invalid::new(
            arg,
            format!("at most {MAX_LABELS} labels (got {})", labels.len()),
        ));
    }
    for (i, l) in labels.iter().enumerate() {
        if l.is_empty() {
            return Err(Invalid::new(arg, "labels must not be blank"));
        }
        if l.chars().count() > MAX_LABEL_LEN {
            return Err(Invalid::new(
                arg,
                format!(
                    "label {:?}... is longer than {MAX_LABEL_LEN} characters",
                    &l[..l.char_indices().nth(20).map_or(l.len(), |(i, _)| i)]
                ),
            ));
        }
        if l.chars()
            .any(|c| c.is_whitespace() || c == ',' || c.is_control())
        {
            return Err(Invalid::new(
                arg,
                format!("label {l:?} must not contain whitespace, commas or control characters"),
            ));
        }
        if labels[..i].iter().any(|seen| same_label(seen, l)) {
            return Err(Invalid::new(
                arg,
                format!("label {l:?} is given twice (labels compare ignoring case)"),
            ));
        }
    }
    Ok(labels.to_vec())
}

/// Splits `L1,L2,...` as typed on the command line. Blank items are kept so that
/// [`validate`] can refuse them by name.
pub fn parse_list(value: &str) -> Vec<String> {
    if value.is_empty() {
        return Vec::new();
    }
    value.split(',').map(|s| s.to_string()).collect()
}

/// GitHub's name for an OS, as in its default runner labels (`Linux`, `macOS`, `Windows`).
pub fn os_label(os: &str) -> String {
    match os {
        "linux" => "Linux".into(),
        "macos" => "macOS".into(),
        "windows" => "Windows".into(),
        other => other.into(),
    }
}

/// GitHub's name for an architecture (`X64`, `ARM64`, `ARM`).
pub fn arch_label(arch: &str) -> String {
    match arch {
        "x86_64" | "x64" => "X64".into(),
        "aarch64" | "arm64" => "ARM64".into(),
        "arm" => "ARM".into(),
        other => other.to_uppercase(),
    }
}

/// The labels a runner of this profile carries: `self-hosted`, the OS and the
/// architecture first (unless the user opted out), then the user's own, without
/// case-insensitive duplicates.
pub fn with_defaults(user: &[String], os: &str, arch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(user.len() + 3);
    for l in ["self-hosted".to_string(), os_label(os), arch_label(arch)]
        .into_iter()
        .chain(user.iter().cloned())
    {
        if !out.iter().any(|o| same_label(o, &l)) {
            out.push(l);
        }
    }
    out
}

/// The user's labels that a default label already covers (compared ignoring case),
/// each with the default's spelling: `linux` → `Linux`. They add nothing to the
/// profile, and the profile's user labels (defaults removed) will not list them.
pub fn already_defaults(user: &[String], os: &str, arch: &str) -> Vec<(String, String)> {
    let defaults = with_defaults(&[], os, arch);
    user.iter()
        .filter_map(|u| {
            defaults
                .iter()
                .find(|d| same_label(d, u))
                .map(|d| (u.clone(), d.clone()))
        })
        .collect()
}

/// Whether two labels are the same label: GitHub matches labels ignoring case, all of
/// Unicode's and not only ASCII's (its runner compares them `OrdinalIgnoreCase`), so
/// `GPU` is `gpu` and `Ä` is `ä`. The one rule every label comparison uses.
pub fn same_label(a: &str, b: &str) -> bool {
    a.chars()
        .flat_map(char::to_lowercase)
        .eq(b.chars().flat_map(char::to_lowercase))
}

/// Whether two label lists name the same labels, in any order, case and repetition.
pub fn same_set(a: &[String], b: &[String]) -> bool {
    a.iter().all(|x| b.iter().any(|y| same_label(x, y)))
        && b.iter().all(|y| a.iter().any(|x| same_label(x, y)))
}

/// A job fits a runner when every one of the job's labels is one of the runner's,
/// compared ignoring case. A job with no labels fits nothing (GitHub needs `runs-on`).
pub fn job_fits(job: &[String], runner: &[String]) -> bool {
    !job.is_empty() && job.iter().all(|j| runner.iter().any(|r| same_label(r, j)))
}

/// How many labels the runner carries beyond the job's: lower is a more specific fit.
pub fn extra_labels(job: &[String], runner: &[String]) -> usize {
    runner.len().saturating_sub(job.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn labels_a_default_covers_are_named_with_the_default_spelling() {
        assert_eq!(
            already_defaults(&v(&["linux", "gpu", "SELF-HOSTED"]), "linux", "x86_64"),
            vec![
                ("linux".to_string(), "Linux".to_string()),
                ("SELF-HOSTED".to_string(), "self-hosted".to_string())
            ]
        );
        assert!(already_defaults(&v(&["gpu"]), "linux", "x86_64").is_empty());
    }

    #[test]
    fn validation_rules() {
        assert!(validate("--labels", &v(&["gpu", "linux"])).is_ok());
        let cases: Vec<Vec<String>> = vec![
            vec![],
            v(&[""]),
            v(&["a b"]),
            v(&["a,b"]),
            v(&["a\tb"]),
            v(&["gpu", "GPU"]),
            vec!["x".repeat(101)],
            (0..101).map(|i| format!("l{i}")).collect(),
        ];
        for c in cases {
            let e = validate("--labels", &c).unwrap_err();
            assert_eq!(e.arg, "--labels");
        }
        assert!(validate("--labels", &["x".repeat(100)]).is_ok());
        assert!(
            validate(
                "--labels",
                &(0..100).map(|i| format!("l{i}")).collect::<Vec<_>>()
            )
            .is_ok()
        );
    }

    #[test]
    fn parse_keeps_blanks_for_validation() {
        assert_eq!(parse_list("a,,b"), v(&["a", "", "b"]));
        assert!(parse_list("").is_empty());
    }

    #[test]
    fn defaults_are_added_once() {
        assert_eq!(
            with_defaults(&v(&["gpu", "self-hosted"]), "linux", "x86_64"),
            v(&["self-hosted", "Linux", "X64", "gpu"])
        );
        assert_eq!(
            with_defaults(&v(&["linux"]), "macos", "aarch64"),
            v(&["self-hosted", "macOS", "ARM64", "linux"])
        );
    }

    #[test]
    fn label_sets_compare_ignoring_order_repetition_and_unicode_case() {
        assert!(same_set(&v(&["A", "b"]), &v(&["b", "a", "B"])));
        assert!(same_set(&v(&["GPU-Ä"]), &v(&["gpu-ä"])));
        assert!(!same_set(&v(&["a"]), &v(&["a", "b"])));
        assert!(!same_set(&v(&["a", "b"]), &v(&["a"])));
        assert!(same_set(&[], &[]));
        assert!(same_label("Ärger", "äRGER"));
        assert!(!same_label("ab", "a"));
        assert!(job_fits(&v(&["ÄPFEL"]), &v(&["äpfel"])));
        assert!(validate("--labels", &v(&["Ä", "ä"])).is_err());
    }

    #[test]
    fn matching_is_case_insensitive_subset() {
        let runner = v(&["self-hosted", "Linux", "X64", "gpu"]);
        assert!(job_fits(&v(&["self-hosted", "linux"]), &runner));
        assert!(job_fits(&v(&["GPU"]), &runner));
        assert!(!job_fits(&v(&["gpu", "arm64"]), &runner));
        assert!(!job_fits(&[], &runner));
        assert_eq!(extra_labels(&v(&["gpu"]), &runner), 3);
    }
}
