//! The log tailer, the last N lines, and bounding a log.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;

use runner_manager::runner::{BoundOutcome, LogTail, bound_log, tail_lines};

use super::util::TempDir;

fn append(path: &Path, text: &[u8]) {
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    f.write_all(text).unwrap();
}

fn lines(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

#[test]
fn reads_only_complete_new_lines() {
    let dir = TempDir::new("tail");
    let path = dir.path().join("1.log");
    let mut tail = LogTail::new(&path);
    assert_eq!(tail.read_new_lines().unwrap(), lines(&[]));
    append(&path, b"\xef\xbb\xbfstarting\r\nListening for Jo");
    assert_eq!(tail.read_new_lines().unwrap(), lines(&["\u{feff}starting"]));
    assert_eq!(tail.offset(), 13);
    append(&path, b"bs\r\nRunning job: build\xff\n");
    assert_eq!(
        tail.read_new_lines().unwrap(),
        lines(&["Listening for Jobs", "Running job: build\u{fffd}"])
    );
    assert_eq!(tail.read_new_lines().unwrap(), lines(&[]));
    assert_eq!(tail.offset(), fs::metadata(&path).unwrap().len());
}

#[test]
fn resumes_from_a_saved_offset_without_losing_a_partial_line() {
    let dir = TempDir::new("resume");
    let path = dir.path().join("1.log");
    append(&path, b"one\ntwo\nthr");
    let mut tail = LogTail::new(&path);
    assert_eq!(tail.read_new_lines().unwrap(), lines(&["one", "two"]));
    let saved = tail.offset();
    drop(tail);
    // The daemon restarts; meanwhile the runner went on writing.
    append(&path, b"ee\nfour\n");
    let mut tail = LogTail::resume(&path, saved);
    assert_eq!(tail.read_new_lines().unwrap(), lines(&["three", "four"]));
}

#[test]
fn starts_over_on_a_truncated_or_replaced_file() {
    let dir = TempDir::new("trunc");
    let path = dir.path().join("1.log");
    append(&path, b"old line one\nold line two\n");
    let mut tail = LogTail::new(&path);
    assert_eq!(tail.read_new_lines().unwrap().len(), 2);
    fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(0)
        .unwrap();
    append(&path, b"new\n");
    assert_eq!(tail.read_new_lines().unwrap(), lines(&["new"]));

    // Rotated by rename: a new file with more bytes than our offset is still new.
    fs::rename(&path, dir.path().join("1.log.old")).unwrap();
    append(&path, b"rotated first line, long enough\n");
    assert_eq!(
        tail.read_new_lines().unwrap(),
        lines(&["rotated first line, long enough"])
    );
}

#[test]
fn reads_a_bounded_amount_per_call() {
    let dir = TempDir::new("bounded");
    let path = dir.path().join("1.log");
    let text: String = (0..100).map(|i| format!("line {i}\n")).collect();
    append(&path, text.as_bytes());
    let mut tail = LogTail::new(&path).with_max_read(64);
    let mut all = Vec::new();
    let mut calls = 0;
    loop {
        let got = tail.read_new_lines().unwrap();
        calls += 1;
        if got.is_empty() && tail.offset() == text.len() as u64 {
            break;
        }
        assert!(got.len() <= 64 / 6 + 1);
        all.extend(got);
        assert!(calls < 1000);
    }
    assert_eq!(all.len(), 100);
    assert_eq!(all[99], "line 99");
    assert!(calls > 10);
}

#[test]
fn tail_lines_reads_the_end() {
    let dir = TempDir::new("tailn");
    let path = dir.path().join("1.log");
    assert_eq!(tail_lines(&path, 5).unwrap(), lines(&[]));
    let text: String = (0..20_000).map(|i| format!("line {i}\r\n")).collect();
    append(&path, text.as_bytes());
    assert_eq!(
        tail_lines(&path, 3).unwrap(),
        lines(&["line 19997", "line 19998", "line 19999"])
    );
    assert_eq!(tail_lines(&path, 0).unwrap(), lines(&[]));
    append(&path, b"no newline yet");
    assert_eq!(
        tail_lines(&path, 2).unwrap(),
        lines(&["line 19999", "no newline yet"])
    );

    let short = dir.path().join("2.log");
    append(&short, b"a\nb\n");
    assert_eq!(tail_lines(&short, 10).unwrap(), lines(&["a", "b"]));
}

#[test]
fn bounding_keeps_head_and_tail_whole_lines() {
    let dir = TempDir::new("bound");
    let path = dir.path().join("1.log");
    let text: String = (0..5000)
        .map(|i| format!("line {i:05} of the runner's output\n"))
        .collect();
    append(&path, text.as_bytes());
    assert!(matches!(
        bound_log(&path, 1 << 20).unwrap(),
        BoundOutcome::Untouched { .. }
    ));

    let outcome = bound_log(&path, 10_000).unwrap();
    let BoundOutcome::Trimmed { new_len, .. } = outcome else {
        panic!("{outcome:?}")
    };
    let after = fs::read_to_string(&path).unwrap();
    assert_eq!(after.len() as u64, new_len);
    assert!(new_len <= 10_000, "{new_len}");
    let got: Vec<&str> = after.lines().collect();
    assert_eq!(got[0], "line 00000 of the runner's output");
    assert_eq!(*got.last().unwrap(), "line 04999 of the runner's output");
    let markers: Vec<&&str> = got
        .iter()
        .filter(|l| l.starts_with("[runner-manager:"))
        .collect();
    assert_eq!(markers.len(), 1, "{after}");
    for l in got.iter().filter(|l| !l.starts_with("[runner-manager:")) {
        assert!(
            l.starts_with("line ") && l.ends_with(" of the runner's output"),
            "{l:?}"
        );
    }
}

#[test]
fn a_tail_follows_its_log_across_a_bound() {
    let dir = TempDir::new("tailbound");
    let path = dir.path().join("1.log");
    let mut tail = LogTail::new(&path);
    let text: String = (0..3000).map(|i| format!("line {i}\n")).collect();
    append(&path, text.as_bytes());
    let (read, outcome) = tail.bound(8192).unwrap();
    assert_eq!(read.len(), 3000);
    assert!(matches!(outcome, BoundOutcome::Trimmed { .. }));
    assert_eq!(tail.offset(), fs::metadata(&path).unwrap().len());
    append(&path, b"after the trim\n");
    assert_eq!(tail.read_new_lines().unwrap(), lines(&["after the trim"]));
}
