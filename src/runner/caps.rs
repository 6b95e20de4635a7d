//! The daemon's capabilities: which it needs to run each runner under its own uid, what
//! it holds (from `/proc/self/status`), and dropping the rest.
//!
//! The packaged unit runs the daemon as root with `CapabilityBoundingSet=` reduced to
//! [`NEEDED`] (ARCHITECTURE.md says why root rather than a user with ambient
//! capabilities). A daemon started by hand as root with per-attempt uids in effect
//! drops the rest itself ([`keep_only`]), so it holds the same powers either way.

use std::io;

/// A capability's number and name (linux/capability.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cap {
    pub bit: u32,
    pub name: &'static str,
    /// What the daemon uses it for, for `doctor`.
    pub why: &'static str,
}

/// What starting and stopping runners under their own uids takes, and nothing more.
pub const NEEDED: [Cap; 6] = [
    Cap {
        bit: 0,
        name: "CAP_CHOWN",
        why: "give each attempt's root and home to its uid",
    },
    Cap {
        bit: 1,
        name: "CAP_DAC_OVERRIDE",
        why: "remove roots the runners' uids own, and read their meters",
    },
    Cap {
        bit: 3,
        name: "CAP_FOWNER",
        why: "set modes on files a runner's uid owns during cleanup",
    },
    Cap {
        bit: 5,
        name: "CAP_KILL",
        why: "stop runners, and everything they left, under other uids",
    },
    Cap {
        bit: 6,
        name: "CAP_SETGID",
        why: "switch each runner to its own gid and groups",
    },
    Cap {
        bit: 7,
        name: "CAP_SETUID",
        why: "switch each runner to its own uid",
    },
];

/// CAP_SETPCAP: needed only to drop others from the bounding set.
const CAP_SETPCAP: u32 = 8;

/// The mask of [`NEEDED`].
pub fn needed_mask() -> u64 {
    NEEDED.iter().fold(0, |m, c| m | 1 << c.bit)
}

/// The `CapEff:` (or any `Cap*:`) mask from the text of `/proc/PID/status`.
pub fn parse_caps(status: &str, field: &str) -> Option<u64> {
    status.lines().find_map(|l| {
        let v = l.strip_prefix(field)?.strip_prefix(':')?;
        u64::from_str_radix(v.trim(), 16).ok()
    })
}

/// The effective capabilities of process `pid` (`self` for this one).
pub fn effective_of(pid: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_caps(&text, "CapEff")
}

/// Whether `mask` holds every capability in [`NEEDED`].
pub fn has_needed(mask: u64) -> bool {
    mask & needed_mask() == needed_mask()
}

/// The names of the capabilities in `mask` beyond [`NEEDED`] (for `doctor`: a daemon
/// that holds more than it needs is not wrong, but it is not contained either).
pub fn extra_names(mask: u64) -> Vec<String> {
    (0..64)
        .filter(|b| mask & (1u64 << b) != 0 && needed_mask() & (1u64 << b) == 0)
        .map(|b| name_of(b).map_or_else(|| format!("cap{b}"), str::to_string))
        .collect()
}

fn name_of(bit: u32) -> Option<&'static str> {
    const NAMES: [&str; 41] = [
        "CAP_CHOWN",
        "CAP_DAC_OVERRIDE",
        "CAP_DAC_READ_SEARCH",
        "CAP_FOWNER",
        "CAP_FSETID",
        "CAP_KILL",
        "CAP_SETGID",
        "CAP_SETUID",
        "CAP_SETPCAP",
        "CAP_LINUX_IMMUTABLE",
        "CAP_NET_BIND_SERVICE",
        "CAP_NET_BROADCAST",
        "CAP_NET_ADMIN",
        "CAP_NET_RAW",
        "CAP_IPC_LOCK",
        "CAP_IPC_OWNER",
        "CAP_SYS_MODULE",
        "CAP_SYS_RAWIO",
        "CAP_SYS_CHROOT",
        "CAP_SYS_PTRACE",
        "CAP_SYS_PACCT",
        "CAP_SYS_ADMIN",
        "CAP_SYS_BOOT",
        "CAP_SYS_NICE",
        "CAP_SYS_RESOURCE",
        "CAP_SYS_TIME",
        "CAP_SYS_TTY_CONFIG",
        "CAP_MKNOD",
        "CAP_LEASE",
        "CAP_AUDIT_WRITE",
        "CAP_AUDIT_CONTROL",
        "CAP_SETFCAP",
        "CAP_MAC_OVERRIDE",
        "CAP_MAC_ADMIN",
        "CAP_SYSLOG",
        "CAP_WAKE_ALARM",
        "CAP_BLOCK_SUSPEND",
        "CAP_AUDIT_READ",
        "CAP_PERFMON",
        "CAP_BPF",
        "CAP_CHECKPOINT_RESTORE",
    ];
    NAMES.get(bit as usize).copied()
}

/// Whether this process can run runners under other uids.
pub fn can_switch_users() -> bool {
    effective_of("self").is_some_and(has_needed)
}

/// Drops every capability but [`NEEDED`]: from the bounding set (so nothing this
/// process execs can regain them) and from the permitted, effective and inheritable
/// sets. Needs CAP_SETPCAP for the bounding set; without it only the sets are reduced.
/// Irreversible for the life of the process, which is the point.
pub fn keep_only_needed() -> io::Result<()> {
    let keep = needed_mask();
    let held = effective_of("self").unwrap_or(0);
    if held & (1 << CAP_SETPCAP) != 0 {
        for bit in 0..64u32 {
            if keep & (1 << bit) != 0 {
                continue;
            }
            // SAFETY: PR_CAPBSET_DROP takes a capability number; an unknown one fails
            // with EINVAL, which ends the walk (the kernel knows no higher bits).
            let rc = unsafe { libc::prctl(libc::PR_CAPBSET_DROP, bit as libc::c_ulong, 0, 0, 0) };
            if rc != 0 {
                let e = io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINVAL) {
                    break;
                }
                return Err(e);
            }
        }
    }
    set_caps(held & keep)
}

/// capset(2) version 3: effective = permitted = `mask`, inheritable empty.
fn set_caps(mask: u64) -> io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    let mut header = Header {
        version: VERSION_3,
        pid: 0,
    };
    let data = [
        Data {
            effective: mask as u32,
            permitted: mask as u32,
            inheritable: 0,
        },
        Data {
            effective: (mask >> 32) as u32,
            permitted: (mask >> 32) as u32,
            inheritable: 0,
        },
    ];
    // SAFETY: a version-3 header and two data structs, as capset(2) requires.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_masks_from_status() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\n\
                      CapEff:\t00000000000000e3\nCapBnd:\t000001ffffffffff\n";
        assert_eq!(parse_caps(status, "CapEff"), Some(0xe3));
        assert_eq!(parse_caps(status, "CapPrm"), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_caps(status, "CapAmb"), None);
    }

    #[test]
    fn the_needed_set() {
        // CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETUID.
        assert_eq!(needed_mask(), 0b1110_1011);
        assert!(has_needed(0xe3 | 0x08));
        assert!(!has_needed(0xe3));
        assert!(extra_names(needed_mask()).is_empty());
        assert_eq!(
            extra_names(needed_mask() | 1 << 21 | 1 << 19),
            vec!["CAP_SYS_PTRACE", "CAP_SYS_ADMIN"]
        );
        assert_eq!(name_of(40), Some("CAP_CHECKPOINT_RESTORE"));
    }

    #[test]
    fn this_process_reports_its_own() {
        // Whatever this process holds, reading it works; a root test run holds all.
        assert!(effective_of("self").is_some());
        if unsafe { libc::geteuid() } == 0 {
            assert!(can_switch_users());
        }
    }
}
