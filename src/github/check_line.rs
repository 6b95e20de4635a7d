//! One line of a check, and its one renderer: `doctor`'s lines, `target check`'s and
//! the scale set check's are all a [`CheckLine`] (status, name, detail, hint, whether
//! the daemon starts runners while it fails, and a typed cause), printed by
//! [`render`] as text and [`to_json`] as JSON. It lives here, on the lowest floor that
//! knows a [`GhError`], which a failed line carries so the CLI classes its exit code
//! by type, never by the line's text.

use super::error::GhError;
pub use crate::reconcile::fitness::Class;
use std::fmt;

/// How a check came out. `Warn` and `Skip` do not fail a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
    /// Not applicable here (no systemctl, no store yet, target unreachable).
    Skip,
}

impl Status {
    fn mark(self) -> &'static str {
        match self {
            Status::Ok => "ok  ",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Skip => "skip",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// What a failed line met, typed, so a caller classes it (the CLI's exit code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// A GitHub error, met asking about `target`.
    GitHub { target: String, error: GhError },
    /// The host's coordinator did not answer at its URL.
    CoordinatorUnreachable,
}

/// One proven (or failed) fact.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckLine {
    pub name: String,
    pub status: Status,
    pub detail: String,
    /// What to do; set on every `doctor` `Fail` and `Warn`.
    pub hint: Option<String>,
    /// Whether the daemon starts runners while it fails: said by the check that made
    /// the line ([`CheckLine::with_class`]; `reconcile::fitness::Finding::class` for
    /// the fitness checks), never guessed from its name. `Recommended` unless said.
    pub class: Class,
    pub cause: Option<Cause>,
}

impl CheckLine {
    pub fn ok(name: impl Into<String>, detail: impl Into<String>) -> CheckLine {
        CheckLine {
            name: name.into(),
            status: Status::Ok,
            detail: detail.into(),
            hint: None,
            class: Class::Recommended,
            cause: None,
        }
    }

    pub fn skip(name: impl Into<String>, detail: impl Into<String>) -> CheckLine {
        CheckLine {
            status: Status::Skip,
            ..CheckLine::ok(name, detail)
        }
    }

    /// A failure with no hint (`target check`'s lines, whose detail says it all).
    pub fn failed(name: impl Into<String>, detail: impl Into<String>) -> CheckLine {
        CheckLine {
            status: Status::Fail,
            ..CheckLine::ok(name, detail)
        }
    }

    pub fn fail(
        name: impl Into<String>,
        detail: impl Into<String>,
        hint: impl Into<String>,
    ) -> CheckLine {
        CheckLine {
            hint: Some(hint.into()),
            ..CheckLine::failed(name, detail)
        }
    }

    pub fn warn(
        name: impl Into<String>,
        detail: impl Into<String>,
        hint: impl Into<String>,
    ) -> CheckLine {
        CheckLine {
            status: Status::Warn,
            ..CheckLine::fail(name, detail, hint)
        }
    }

    /// `ok` on `Ok(detail)`, else failed with the detail.
    pub fn of(name: impl Into<String>, r: Result<String, String>) -> CheckLine {
        match r {
            Ok(detail) => CheckLine::ok(name, detail),
            Err(detail) => CheckLine::failed(name, detail),
        }
    }

    pub fn with_class(self, class: Class) -> CheckLine {
        CheckLine { class, ..self }
    }

    pub fn with_cause(self, cause: Option<Cause>) -> CheckLine {
        CheckLine { cause, ..self }
    }

    /// Whether it passed (`Ok`).
    pub fn passed(&self) -> bool {
        self.status == Status::Ok
    }

    /// The GitHub error a failed line met, with its target.
    pub fn github_error(&self) -> Option<(&str, &GhError)> {
        match &self.cause {
            Some(Cause::GitHub { target, error }) if self.status == Status::Fail => {
                Some((target, error))
            }
            _ => None,
        }
    }

    /// The line with its name padded to `width` and two spaces before the detail:
    /// names have spaces of their own (`target octo rate limit`), so one space would
    /// run the name into its detail.
    pub fn render(&self, width: usize) -> String {
        let mut out = format!(
            "{} {:<width$}  {}",
            self.status.mark(),
            self.name,
            self.detail
        );
        if let Some(h) = &self.hint {
            out.push_str(&format!("; hint: {h}"));
        }
        out
    }
}

impl fmt::Display for CheckLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.render(0))
    }
}

/// How [`render`] lays lines out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The name column's least width.
    pub min_width: usize,
    /// Under a heading per class (required, recommended, info), or as they come.
    pub by_class: bool,
}

/// `doctor`'s: under a heading per class.
pub const DOCTOR: Layout = Layout {
    min_width: 22,
    by_class: true,
};

/// `target check`'s: as they come (none is required: a target's lines never stop
/// the host).
pub const TARGET_CHECK: Layout = Layout {
    min_width: 13,
    by_class: false,
};

/// Every line, one per row, the details aligned after the widest name; by class, under
/// a heading per class (each in check order).
pub fn render(lines: &[CheckLine], layout: Layout) -> String {
    let width = lines
        .iter()
        .map(|l| l.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(layout.min_width);
    let rows = |these: &mut dyn Iterator<Item = &CheckLine>| -> String {
        these.map(|l| l.render(width) + "\n").collect()
    };
    if !layout.by_class {
        return rows(&mut lines.iter());
    }
    let mut out = String::new();
    for (class, heading) in [
        (
            Class::Required,
            "required (while one fails, the daemon starts no runner):",
        ),
        (Class::Recommended, "recommended:"),
        (Class::Info, "info:"),
    ] {
        if lines.iter().any(|l| l.class == class) {
            out.push_str(heading);
            out.push('\n');
            out.push_str(&rows(&mut lines.iter().filter(|l| l.class == class)));
        }
    }
    out
}

/// The documented `--json` shape of a line: `{check, status, ok, detail, hint, class}`,
/// `status` one of `ok`, `warn`, `fail`, `skip`, `class` one of `required`,
/// `recommended`, `info`.
pub fn to_json(lines: &[CheckLine]) -> serde_json::Value {
    serde_json::Value::Array(
        lines
            .iter()
            .map(|l| {
                serde_json::json!({
                    "check": l.name,
                    "status": l.status.as_str(),
                    "ok": l.passed(),
                    "detail": l.detail,
                    "hint": l.hint,
                    "class": l.class.as_str(),
                })
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_start_in_one_column_after_the_widest_name() {
        let lines = vec![
            CheckLine::ok("disk", "63 GiB free"),
            CheckLine::ok("target octo rate limit", "4882 of 5000"),
            CheckLine::fail("target octo-long-name credentials", "401", "fix it"),
        ];
        let text = render(&lines, DOCTOR);
        // Under the one heading, "recommended:".
        let rows: Vec<&str> = text.lines().skip(1).collect();
        let col = |row: &str, detail: &str| row.find(detail).unwrap();
        assert_eq!(col(rows[0], "63 GiB"), col(rows[1], "4882"));
        assert_eq!(col(rows[1], "4882"), col(rows[2], "401"));
        assert!(rows[2].contains("credentials  401; hint: fix it"), "{text}");
        assert!(rows[1].contains("rate limit  "), "{text}");
        let flat = render(
            &[
                CheckLine::ok("credentials", "d"),
                CheckLine::failed("scale set session", "d"),
            ],
            TARGET_CHECK,
        );
        assert_eq!(
            flat,
            "ok   credentials        d\nFAIL scale set session  d\n"
        );
    }

    #[test]
    fn lines_are_grouped_by_the_class_their_check_gave_them() {
        let lines = vec![
            CheckLine::ok("kept", "1 MiB").with_class(Class::Info),
            CheckLine::warn("memory", "1 GiB", "more"),
            CheckLine::fail("tools:linux", "node missing", "install it")
                .with_class(Class::Required),
        ];
        let text = render(&lines, DOCTOR);
        let at = |s: &str| text.find(s).unwrap_or_else(|| panic!("{s} in {text}"));
        assert!(at("required (") < at("FAIL tools:linux"));
        assert!(at("FAIL tools:linux") < at("recommended:"));
        assert!(at("WARN memory") < at("info:"));
        assert!(at("info:") < at("ok   kept"));
        let json = to_json(&lines);
        assert_eq!(json[2]["class"], "required");
        assert_eq!(json[2]["status"], "fail");
        assert_eq!(json[0]["ok"], true);
    }
}
