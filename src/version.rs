//! The version this binary says it is (`--version`, and `update`'s current version):
//! this build's, kept in a fixed slot of the binary (`RMVERSION=` then the version,
//! NUL-padded) that a release pipeline, or a test making a release of this very binary,
//! can stamp in place. It is read through volatile loads, so the compiler cannot fold
//! it into the code: what the slot says is what the binary says.

/// The slot's size: the prefix, the version and its NUL padding.
pub const SLOT: usize = 48;
/// What opens the slot, for whoever stamps it.
pub const PREFIX: &[u8] = b"RMVERSION=";

#[used]
static STAMP: [u8; SLOT] = stamp(env!("CARGO_PKG_VERSION").as_bytes());

const fn stamp(version: &[u8]) -> [u8; SLOT] {
    let mut out = [0u8; SLOT];
    let mut i = 0;
    while i < PREFIX.len() {
        out[i] = PREFIX[i];
        i += 1;
    }
    let mut j = 0;
    while j < version.len() && PREFIX.len() + j < SLOT {
        out[PREFIX.len() + j] = version[j];
        j += 1;
    }
    out
}

/// The version the slot holds.
pub fn version() -> String {
    let mut bytes = Vec::with_capacity(SLOT);
    for i in PREFIX.len()..SLOT {
        // SAFETY: `i` is within the static array; a volatile read of a byte of it.
        let b = unsafe { std::ptr::read_volatile(STAMP.as_ptr().add(i)) };
        if b == 0 {
            break;
        }
        bytes.push(b);
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `binary` (a copy of this program's file) stamped to say it is `version`: the slot
/// rewritten in place, so the file keeps its size. `None` when the slot is not found
/// or the version does not fit.
pub fn stamped(binary: &[u8], version: &str) -> Option<Vec<u8>> {
    let at = binary.windows(PREFIX.len()).position(|w| w == PREFIX)?;
    if PREFIX.len() + version.len() > SLOT || at + SLOT > binary.len() {
        return None;
    }
    let mut out = binary.to_vec();
    let slot = &mut out[at + PREFIX.len()..at + SLOT];
    slot.fill(0);
    slot[..version.len()].copy_from_slice(version.as_bytes());
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slot_says_this_builds_version_and_a_stamp_rewrites_it_in_place() {
        assert_eq!(version(), env!("CARGO_PKG_VERSION"));
        let file = [b"head".as_slice(), &STAMP, b"tail"].concat();
        let new = stamped(&file, "99.0.0").unwrap();
        assert_eq!(new.len(), file.len());
        let at = PREFIX.len() + 4;
        assert_eq!(&new[at..at + 7], b"99.0.0\0");
        assert!(new.ends_with(b"tail"));
        assert_eq!(stamped(b"no slot here", "1.0.0"), None);
        assert_eq!(stamped(&file, &"9".repeat(SLOT)), None);
    }
}
