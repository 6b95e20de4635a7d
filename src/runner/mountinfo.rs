//! `/proc/self/mountinfo` read into its lines (proc(5)), the one parser of it: for the
//! cgroup detection (`cgroup::detect`) and the shared directories' discovery
//! (`shared_dirs`).

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;

/// One mount, as far as its line says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountLine {
    /// The path within its filesystem mounted here (field 4, escapes undone).
    pub root: Vec<u8>,
    /// Where it is mounted (field 5, escapes undone).
    pub point: PathBuf,
    /// The mount's own options (field 6: `rw,nosuid,...`).
    pub mount_opts: String,
    /// The filesystem type (the first field after the ` - ` separator).
    pub fstype: String,
    /// The filesystem's options (the third field after the separator; may be absent).
    pub super_opts: String,
}

impl MountLine {
    /// Whether the mount or its filesystem is read-only.
    pub fn read_only(&self) -> bool {
        let ro = |opts: &str| opts.split(',').any(|o| o == "ro");
        ro(&self.mount_opts) || ro(&self.super_opts)
    }
}

/// Pure: the mounts of a mountinfo text. Optional fields end at `-`, which comes after
/// the six fixed fields; a line not in that form is skipped.
pub fn parse(text: &str) -> Vec<MountLine> {
    text.lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split(' ').collect();
            let sep = 6 + f.get(6..)?.iter().position(|x| *x == "-")?;
            Some(MountLine {
                root: unescape(f.get(3)?),
                point: PathBuf::from(OsString::from_vec(unescape(f.get(4)?))),
                mount_opts: f.get(5)?.to_string(),
                fstype: f.get(sep + 1)?.to_string(),
                super_opts: f.get(sep + 3).copied().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(field: &str) -> Vec<u8> {
    let b = field.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = b[i + 1..i + 4]
                .iter()
                .fold(0u32, |acc, c| acc * 8 + u32::from(c - b'0'));
            // Only bytes are escaped; a larger value is not an escape mountinfo writes.
            out.push(v as u8);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_fixed_optional_and_escaped_fields() {
        let text = "36 35 98:0 /mnt1 /mnt\\040x rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n\
                    40 25 0:35 / /sys/fs/cgroup ro,nosuid shared:9 - cgroup2 cgroup2 rw\n\
                    short line\n";
        let m = parse(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].root, b"/mnt1");
        assert_eq!(m[0].point, PathBuf::from("/mnt x"));
        assert_eq!(m[0].fstype, "ext3");
        assert_eq!(m[0].super_opts, "rw,errors=continue");
        assert!(!m[0].read_only());
        assert_eq!(m[1].fstype, "cgroup2");
        assert!(m[1].read_only());
    }
}
