//! Test support: the shared temporary directory and binary runner (`common/dir.rs`),
//! a seeded store, and snapshots of the store's bytes.

use std::path::Path;

#[path = "../common/dir.rs"]
mod dir;
pub use dir::{BIN, Dir, Run};

/// The bytes of `state.db` and `state.db-wal` (absent = empty), to prove that a
/// refused command wrote nothing.
pub fn snapshot(state: &Path) -> (Vec<u8>, Vec<u8>) {
    let read = |n: &str| std::fs::read(state.join(n)).unwrap_or_default();
    (read("state.db"), read("state.db-wal"))
}

/// A store with a target (token in a file) and a profile `linux` at revision 1.
pub fn seeded(tag: &str) -> Dir {
    let d = Dir::new(tag);
    let tok = d.file("token", "secret-token-value");
    d.ok(&[
        "target",
        "add",
        "octo",
        "--repo",
        "octo/app",
        "--token-file",
        &tok,
    ]);
    d.ok(&[
        "profile", "add", "linux", "--target", "octo", "--labels", "gpu", "--max", "4",
    ]);
    d
}
