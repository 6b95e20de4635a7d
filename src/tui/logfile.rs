//! An attempt's whole runner log for the log view, read with a bound: a log of any
//! size costs at most [`FULL_LOG_MAX_BYTES`] of memory (its end, where a runner's
//! trouble is), and the view says how much of the start it left out.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::Path;

/// The most of a log the view holds: its last 4 MiB (tens of thousands of lines).
pub const FULL_LOG_MAX_BYTES: u64 = 4 << 20;

/// What the log view shows: the lines read, and how many bytes at the start of the
/// file were left out to stay within the bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogText {
    pub lines: Vec<String>,
    pub skipped_bytes: u64,
}

/// Reads the last `max` bytes of `path` at most, starting at a whole line. A missing
/// file is an empty log (the runner has not written yet, or the log was pruned).
pub fn read_bounded(path: &Path, max: u64) -> io::Result<LogText> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(LogText::default()),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    let start = len.saturating_sub(max);
    file.seek(SeekFrom::Start(start))?;
    let mut buf = Vec::with_capacity((len - start) as usize);
    // The file may grow while read: take no more than was measured.
    file.take(len - start).read_to_end(&mut buf)?;
    let mut skipped = start;
    if start > 0 {
        // Begin at the first whole line: the cut one is left out with the rest.
        let cut = buf
            .iter()
            .position(|&b| b == b'\n')
            .map_or(buf.len(), |i| i + 1);
        buf.drain(..cut);
        skipped += cut as u64;
    }
    if buf.last() == Some(&b'\n') {
        buf.pop();
    }
    let lines = if buf.is_empty() {
        Vec::new()
    } else {
        buf.split(|&b| b == b'\n')
            .map(|l| {
                String::from_utf8_lossy(l)
                    .trim_end_matches('\r')
                    .to_string()
            })
            .collect()
    };
    Ok(LogText {
        lines,
        skipped_bytes: skipped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, body: &str) -> std::path::PathBuf {
        let p = std::env::temp_dir().join(format!("rm-logfile-{}-{name}", std::process::id()));
        std::fs::write(&p, body).unwrap();
        p
    }

    #[test]
    fn a_small_log_is_read_whole() {
        let p = temp("small", "one\ntwo\r\nthree\n");
        let t = read_bounded(&p, FULL_LOG_MAX_BYTES).unwrap();
        assert_eq!(t.lines, ["one", "two", "three"]);
        assert_eq!(t.skipped_bytes, 0);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_large_log_keeps_its_end_from_a_whole_line() {
        let body: String = (0..1000).map(|i| format!("line {i:04}\n")).collect();
        let p = temp("large", &body);
        // 10 bytes a line; 95 bytes take the last 9 lines whole and a cut one.
        let t = read_bounded(&p, 95).unwrap();
        assert_eq!(t.lines.len(), 9);
        assert_eq!(t.lines[0], "line 0991");
        assert_eq!(t.lines[8], "line 0999");
        assert_eq!(t.skipped_bytes, 9910);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn missing_and_empty_logs_are_empty() {
        let t = read_bounded(Path::new("/nonexistent/rm-log"), 10).unwrap();
        assert_eq!(t, LogText::default());
        let p = temp("empty", "");
        assert_eq!(read_bounded(&p, 10).unwrap(), LogText::default());
        std::fs::remove_file(p).unwrap();
    }
}
