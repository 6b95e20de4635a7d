//! Text from outside made safe to print: what a host, a job, GitHub or a peer sends
//! may hold control characters (an escape sequence can rewrite the screen or the
//! window title) and Unicode's bidirectional controls (U+202E and the like can make a
//! line read differently from what it holds, as in "Trojan Source"). Both are written
//! as `\u{…}`, so the text stays readable and nothing it holds acts on the terminal.

use std::borrow::Cow;
use std::fmt::Write;

/// The bidirectional formatting characters: the embeddings and overrides
/// (U+202A–U+202E), the isolates (U+2066–U+2069) and the marks (U+200E, U+200F,
/// U+061C).
pub fn is_bidi_control(c: char) -> bool {
    matches!(
        c,
        '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}'
    )
}

/// A character that must not reach a terminal as it is.
pub fn is_hazard(c: char) -> bool {
    c.is_control() || is_bidi_control(c)
}

/// `s` with every hazard (newlines included) written as `\u{…}`: for one field.
pub fn escape(s: &str) -> Cow<'_, str> {
    escape_where(s, is_hazard)
}

/// `s` with every hazard but newlines and tabs written as `\u{…}`: for a whole
/// command's output, whose lines are its own.
pub fn escape_text(s: &str) -> Cow<'_, str> {
    escape_where(s, |c| c != '\n' && c != '\t' && is_hazard(c))
}

/// Escapes `s` in place, as [`escape`] does.
pub fn escape_in_place(s: &mut String) {
    if let Cow::Owned(e) = escape(s) {
        *s = e;
    }
}

/// JSON text with each bidirectional control written as the JSON escape `\uXXXX`.
/// serde_json escapes control characters but passes these through; they can only
/// stand inside strings, where the escape decodes to the same value.
pub fn json(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_bidi_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if is_bidi_control(c) {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn escape_where(s: &str, hazard: impl Fn(char) -> bool) -> Cow<'_, str> {
    if !s.chars().any(&hazard) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 16);
    for c in s.chars() {
        if hazard(c) {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_and_bidi_controls_are_escaped_and_nothing_else() {
        // Issue 33: U+202E reversed what followed it on the operator's terminal.
        assert_eq!(escape("evil\u{202E}txt.exe"), "evil\\u{202e}txt.exe");
        assert_eq!(
            escape("\u{2066}a\u{2069}\u{200F}\u{061C}"),
            "\\u{2066}a\\u{2069}\\u{200f}\\u{61c}"
        );
        assert_eq!(escape("a\x1b[2J\n"), "a\\u{1b}[2J\\u{a}");
        assert!(matches!(escape("héllo wörld ✓ 日本"), Cow::Borrowed(_)));
        assert_eq!(escape_text("a\tb\nc\r\u{202E}"), "a\tb\nc\\u{d}\\u{202e}");
        let mut s = String::from("x\u{202D}");
        escape_in_place(&mut s);
        assert_eq!(s, "x\\u{202d}");
    }

    #[test]
    fn json_keeps_its_value_without_the_bidi_controls() {
        let v = serde_json::json!({"name": "a\u{202E}b\u{1b}"});
        let text = serde_json::to_string(&v).unwrap();
        let safe = json(&text);
        assert!(!safe.chars().any(is_hazard), "{safe}");
        let back: serde_json::Value = serde_json::from_str(&safe).unwrap();
        assert_eq!(back, v);
    }
}
