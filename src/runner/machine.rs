//! Which machine this is: `/etc/machine-id` (or D-Bus's copy), the identity a clone
//! or a restore on other hardware does not share with the machine it came from, read
//! so the store can keep the one its host id was drawn on.

use std::path::PathBuf;

/// The variable that names another file to read the machine id from (tests, which
/// play a cloned machine; hosts whose id lives elsewhere).
pub const MACHINE_ID_FILE_ENV: &str = "RUNNER_MANAGER_MACHINE_ID_FILE";

/// Where the machine id is looked for, first to last.
const DEFAULT_FILES: &[&str] = &["/etc/machine-id", "/var/lib/dbus/machine-id"];

/// Pure: a machine id as machine-id(5) writes it (32 lowercase hex digits; upper
/// case is taken and lowered), or `None` for anything else: an empty file, the
/// `uninitialized` a first boot leaves, text that is not one.
pub fn parse(text: &str) -> Option<String> {
    let t = text.trim();
    (t.len() == 32 && t.bytes().all(|b| b.is_ascii_hexdigit())).then(|| t.to_ascii_lowercase())
}

/// The files to read, first to last: `$RUNNER_MANAGER_MACHINE_ID_FILE` alone when set.
fn files() -> Vec<PathBuf> {
    match std::env::var_os(MACHINE_ID_FILE_ENV) {
        Some(f) if !f.is_empty() => vec![PathBuf::from(f)],
        _ => DEFAULT_FILES.iter().map(PathBuf::from).collect(),
    }
}

/// This machine's id, from the first file that holds one; `None` when none does (a
/// container without `/etc/machine-id`, a first boot not yet done).
pub fn current() -> Option<String> {
    files()
        .iter()
        .find_map(|f| std::fs::read_to_string(f).ok().and_then(|t| parse(&t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_machine_id_is_taken() {
        let id = "0123456789abcdef0123456789ABCDEF\n";
        assert_eq!(
            parse(id).as_deref(),
            Some("0123456789abcdef0123456789abcdef")
        );
        assert_eq!(parse(""), None);
        assert_eq!(parse("uninitialized\n"), None);
        assert_eq!(parse("0123456789abcdef0123456789abcde"), None);
        assert_eq!(parse("0123456789abcdef0123456789abcdeg"), None);
    }
}
