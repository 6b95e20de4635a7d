//! Per-spawn root creation: what `runner::prepare_root` (the hard-linked copy of the
//! install each attempt runs from) and `runner::remove_root` (its cleanup) cost, over
//! the small simulated install and over the realistic one with a real release's file
//! count. `cargo bench --bench roots [-- --small]`; prints, asserts nothing.
//!
//! The roots are made one after another in a fresh directory on the same filesystem as
//! the install, as the daemon makes them under its state directory beside the
//! profile's `runner_dir` (so they are hard links, not copies).

#[path = "support/mod.rs"]
mod support;

use runner_manager::runner::{RootOptions, prepare_root, remove_root};
use runner_manager::sim::install::{self, InstallShape};
use std::time::{Duration, Instant};

fn main() {
    let small = std::env::args().any(|a| a == "--small");
    let n = if small { 10 } else { 50 };
    let base = std::env::temp_dir().join(format!("rm-bench-roots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    println!(
        "roots: {n} roots per shape, one after another ({} build), under {}",
        support::profile(),
        base.display()
    );
    for shape in [InstallShape::Small, InstallShape::Realistic] {
        let dir = base.join(format!("{shape:?}").to_lowercase());
        let install_dir = dir.join("runner");
        let t = Instant::now();
        install::lay_out_shaped(&install_dir, &support::daemon_binary(), shape)
            .expect("lay out the install");
        let laid = t.elapsed();
        let counts = shape.counts();
        let (mut made, mut removed) = (Vec::new(), Vec::new());
        let mut linked = 0;
        for i in 0..n {
            let root = dir.join("attempts").join(i.to_string());
            let t = Instant::now();
            let p =
                prepare_root(&install_dir, &root, RootOptions::default()).expect("prepare a root");
            made.push(t.elapsed());
            linked = p.linked + p.copied;
            // Removed at once, as cleanup does, so the directory does not grow.
            let t = Instant::now();
            remove_root(&root).expect("remove a root");
            removed.push(t.elapsed());
        }
        println!(
            "{shape:?} install: {} files, {} links, {} directories (laid out once in {laid:.1?}); {linked} files linked per root",
            counts.files, counts.links, counts.dirs
        );
        figures("  prepare_root", made);
        figures("  remove_root", removed);
        let _ = std::fs::remove_dir_all(&dir);
    }
    let _ = std::fs::remove_dir_all(&base);
}

fn figures(name: &str, mut v: Vec<Duration>) {
    v.sort();
    let at = |p: f64| v[((v.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name:<14} n={:<3} p50 {:>9.2?}  p99 {:>9.2?}  max {:>9.2?}",
        v.len(),
        at(0.5),
        at(0.99),
        v[v.len() - 1]
    );
}
