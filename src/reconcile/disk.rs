//! Whether the state directory's filesystem has room to start runners: a pure
//! decision with hysteresis, from the free bytes last read, the host's
//! `disk_reserve` and whether starts were held already. Under the reserve nothing
//! starts (a runner's root, its log and the store's rows all need room, and the
//! store must keep room to record every end); starts resume only above twice the
//! reserve, so a filesystem hovering at the mark does not flap. Watching, recording
//! and cleaning never depend on it: cleanups are what give the space back.

use crate::units;

/// Free space above which held starts resume: twice the reserve.
pub fn resume_above(reserve: u64) -> u64 {
    reserve.saturating_mul(2)
}

/// Whether starts are held now. `free` is `None` when it could not be read: the last
/// decision stands (a failed `statvfs` says nothing about the space). A reserve of 0
/// never holds.
pub fn held(free: Option<u64>, was_held: bool, reserve: u64) -> bool {
    if reserve == 0 {
        return false;
    }
    match free {
        None => was_held,
        Some(f) if was_held => f <= resume_above(reserve),
        Some(f) => f < reserve,
    }
}

/// The unfit reason `status` and `top` show while starts are held; the same words
/// `doctor` uses for the threshold.
pub fn describe(free: Option<u64>, reserve: u64) -> String {
    let free = match free {
        Some(f) => format!("{} free", units::bytes(f)),
        None => "free space unknown".to_string(),
    };
    format!(
        "disk: {free} in the state directory, under disk_reserve {}; starts resume above {}",
        units::bytes(reserve),
        units::bytes(resume_above(reserve))
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    /// One step: free space read, held before → held after.
    fn check(free: Option<u64>, was: bool, want: bool) {
        assert_eq!(
            held(free, was, 256 * MIB),
            want,
            "{free:?} held before: {was}"
        );
    }

    #[test]
    fn stops_under_the_reserve_and_resumes_only_above_twice_it() {
        check(Some(10 << 30), false, false);
        check(Some(256 * MIB), false, false);
        check(Some(256 * MIB - 1), false, true);
        check(Some(0), false, true);
        // Held: the band between the marks keeps it held.
        check(Some(300 * MIB), true, true);
        check(Some(512 * MIB), true, true);
        check(Some(512 * MIB + 1), true, false);
        // Not held: the same band lets starts go on.
        check(Some(300 * MIB), false, false);
    }

    #[test]
    fn an_unreadable_filesystem_keeps_the_last_decision() {
        check(None, true, true);
        check(None, false, false);
    }

    #[test]
    fn a_reserve_of_zero_never_holds() {
        assert!(!held(Some(0), false, 0));
        assert!(!held(Some(0), true, 0));
        assert!(!held(None, true, 0));
    }

    #[test]
    fn a_huge_reserve_does_not_overflow() {
        assert_eq!(resume_above(u64::MAX), u64::MAX);
        assert!(held(Some(u64::MAX - 1), true, u64::MAX));
    }

    #[test]
    fn the_reason_names_the_free_space_and_both_marks() {
        assert_eq!(
            describe(Some(3 * MIB), 4 * MIB),
            "disk: 3.0 MiB free in the state directory, under disk_reserve 4.0 MiB; \
             starts resume above 8.0 MiB"
        );
        assert!(describe(None, 4 * MIB).starts_with("disk: free space unknown"));
    }
}
