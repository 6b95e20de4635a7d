//! The runner's log file: tailing new lines, the last N lines, and keeping it size-bounded.
//!
//! The runner appends to `STATE_DIR/logs/<id>.log` (opened `O_APPEND` by `spawn`);
//! the daemon reads only what was appended since its last read. The read position is
//! plain data ([`LogTail::offset`]), so a daemon that persists it resumes after a
//! restart without re-reading or losing a line.
//!
//! Bounding keeps the **head and the tail** with a marker line between them: the first
//! lines explain a runner that never became idle, the last ones explain how it ended.
//! The middle is cut in place (same inode; the runner's `O_APPEND` writes keep going
//! to the end). Bytes the runner appends in the few microseconds between the final
//! copy and the truncate are lost; the daemon bounds logs between passes, where that
//! costs at most a line of output it has not read yet.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

/// How much one `read_new_lines` reads at most, so a runner that floods its log cannot
/// stall a pass; the rest is read on the next call.
pub const DEFAULT_MAX_READ: usize = 256 * 1024;

/// A line longer than this without a newline is returned in pieces, so a runner
/// printing without newlines cannot grow the buffer without bound.
pub const MAX_LINE: usize = 64 * 1024;

/// Follows one log file across calls (and, through its offset, across restarts).
#[derive(Debug, Clone)]
pub struct LogTail {
    path: PathBuf,
    /// End of the last complete line returned: the position to persist.
    offset: u64,
    /// Bytes after `offset` already read, waiting for their newline.
    partial: Vec<u8>,
    /// (device, inode) of the file last read, to notice a file replaced under us.
    file_id: Option<(u64, u64)>,
    max_read: usize,
}

impl LogTail {
    /// Tails `path` from its beginning.
    pub fn new(path: impl Into<PathBuf>) -> LogTail {
        LogTail::resume(path, 0)
    }

    /// Tails `path` from a persisted [`offset`](LogTail::offset).
    pub fn resume(path: impl Into<PathBuf>, offset: u64) -> LogTail {
        LogTail {
            path: path.into(),
            offset,
            partial: Vec::new(),
            file_id: None,
            max_read: DEFAULT_MAX_READ,
        }
    }

    pub fn with_max_read(mut self, max_read: usize) -> LogTail {
        self.max_read = max_read.max(1);
        self
    }

    /// Where the next complete line starts: persist this to resume after a restart.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn reset(&mut self) {
        self.offset = 0;
        self.partial.clear();
    }

    /// The complete lines appended since the last call (without `\n` or `\r\n`;
    /// invalid UTF-8 replaced). A file that shrank or was replaced is read again from
    /// its start. A missing file has no lines yet.
    pub fn read_new_lines(&mut self) -> io::Result<Vec<String>> {
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let meta = file.metadata()?;
        let id = (meta.dev(), meta.ino());
        if self.file_id.is_some_and(|old| old != id) {
            self.reset();
        }
        self.file_id = Some(id);
        let mut read_pos = self.offset + self.partial.len() as u64;
        if meta.len() < read_pos {
            // Truncated (or rotated by copy-and-truncate): start over on what is there.
            self.reset();
            read_pos = 0;
        }
        let want = (meta.len() - read_pos).min(self.max_read as u64);
        if want == 0 {
            return Ok(Vec::new());
        }
        file.seek(SeekFrom::Start(read_pos))?;
        file.take(want).read_to_end(&mut self.partial)?;
        Ok(self.split_lines())
    }

    fn split_lines(&mut self) -> Vec<String> {
        let mut lines = Vec::new();
        let mut start = 0;
        while let Some(nl) = self.partial[start..].iter().position(|&b| b == b'\n') {
            lines.push(decode(&self.partial[start..start + nl]));
            start += nl + 1;
        }
        if self.partial.len() - start > MAX_LINE {
            lines.push(decode(&self.partial[start..]));
            start = self.partial.len();
        }
        self.offset += start as u64;
        self.partial.drain(..start);
        lines
    }

    /// Reads what is new (up to 64 calls' worth), then bounds the file to about
    /// `max_bytes` (see [`bound_log`]) and moves the read position to match, so the
    /// tail neither re-reads nor skips lines after a trim.
    pub fn bound(&mut self, max_bytes: u64) -> io::Result<(Vec<String>, BoundOutcome)> {
        let mut lines = Vec::new();
        for _ in 0..64 {
            let before = self.offset + self.partial.len() as u64;
            lines.extend(self.read_new_lines()?);
            if self.offset + self.partial.len() as u64 == before {
                break;
            }
        }
        let outcome = bound_log(&self.path, max_bytes)?;
        if let BoundOutcome::Trimmed { head, cut_end, .. } = outcome {
            if self.offset >= cut_end {
                self.offset = outcome.map_offset(self.offset);
            } else if self.offset >= head {
                // Inside the cut: continue at the marker line.
                self.offset = head;
                self.partial.clear();
            } else {
                self.partial.clear();
            }
        }
        Ok((lines, outcome))
    }
}

fn decode(line: &[u8]) -> String {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    String::from_utf8_lossy(line).into_owned()
}

/// How much `tail_lines` reads backwards at most.
const TAIL_MAX_BYTES: u64 = 1 << 20;
const CHUNK: u64 = 8192;

/// The last `n` lines of `path` (for `attempt show`), reading backwards from the end
/// in chunks: cost proportional to the lines asked for, not to the file. A missing
/// file has no lines.
pub fn tail_lines(path: &Path, n: usize) -> io::Result<Vec<String>> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if n == 0 || len == 0 {
        return Ok(Vec::new());
    }
    let mut chunks: Vec<Vec<u8>> = Vec::new();
    let mut pos = len;
    let mut newlines = 0usize;
    // The file's final newline ends the last line; it does not start a new one.
    let mut last_byte = [0u8];
    file.read_exact_at(&mut last_byte, len - 1)?;
    let trailing = usize::from(last_byte[0] == b'\n');
    while pos > 0 && newlines < n + trailing && len - pos < TAIL_MAX_BYTES {
        let take = CHUNK.min(pos);
        pos -= take;
        let mut chunk = vec![0u8; take as usize];
        file.read_exact_at(&mut chunk, pos)?;
        newlines += chunk.iter().filter(|&&b| b == b'\n').count();
        chunks.push(chunk);
    }
    let mut buf: Vec<u8> = chunks.into_iter().rev().flatten().collect();
    if trailing == 1 {
        buf.pop();
    }
    let pieces: Vec<&[u8]> = buf.split(|&b| b == b'\n').collect();
    let skip = pieces.len().saturating_sub(n);
    Ok(pieces[skip..].iter().map(|l| decode(l)).collect())
}

/// What [`bound_log`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BoundOutcome {
    /// The file was within the bound (or missing).
    Untouched { len: u64 },
    /// Bytes `[head, cut_end)` were replaced by a marker line; every position at or
    /// after `cut_end` moved down by `shift`.
    Trimmed {
        head: u64,
        cut_end: u64,
        shift: u64,
        new_len: u64,
    },
}

impl BoundOutcome {
    /// Where an old position is now (positions inside the cut map to the marker).
    pub fn map_offset(&self, old: u64) -> u64 {
        match *self {
            BoundOutcome::Untouched { .. } => old,
            BoundOutcome::Trimmed {
                head,
                cut_end,
                shift,
                ..
            } => {
                if old >= cut_end {
                    old - shift
                } else if old >= head {
                    head
                } else {
                    old
                }
            }
        }
    }
}

/// The smallest bound honoured: room for a head, a marker and a tail.
const MIN_BOUND: u64 = 4096;

/// Keeps `path` under about `max_bytes` (at least 4 KiB): when larger, keeps its first
/// quarter and its last part, whole lines each, with a marker line saying how much
/// was removed. Safe while the runner still appends (see the module note).
pub fn bound_log(path: &Path, max_bytes: u64) -> io::Result<BoundOutcome> {
    let max_bytes = max_bytes.max(MIN_BOUND);
    let file = match OpenOptions::new().read(true).write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(BoundOutcome::Untouched { len: 0 });
        }
        Err(e) => return Err(e),
    };
    let len = file.metadata()?.len();
    if len <= max_bytes {
        return Ok(BoundOutcome::Untouched { len });
    }
    // The head ends after its last newline within the first quarter.
    let quarter = max_bytes / 4;
    let mut head_buf = vec![0u8; quarter as usize];
    file.read_exact_at(&mut head_buf, 0)?;
    let (head, ends_line) = match head_buf.iter().rposition(|&b| b == b'\n') {
        Some(i) => (i as u64 + 1, true),
        None => (quarter, false),
    };
    // Sized for the largest numbers it can hold, so the tail start is known first.
    let marker_len = marker(u64::MAX, max_bytes, ends_line).len() as u64;
    let tail_len = max_bytes - head - marker_len;
    // The tail starts at a line start.
    let mut cut_end = len - tail_len;
    let mut probe = vec![0u8; (CHUNK as usize).min(tail_len as usize)];
    file.read_exact_at(&mut probe, cut_end)?;
    if let Some(i) = probe.iter().position(|&b| b == b'\n') {
        cut_end += i as u64 + 1;
    }
    // Padded with spaces before its newline to the length reserved above.
    let mut text = marker(cut_end - head, max_bytes, ends_line);
    text.pop();
    text.resize(marker_len as usize - 1, b' ');
    text.push(b'\n');
    file.write_all_at(&text, head)?;
    let write_start = head + marker_len;
    let shift = cut_end - write_start;
    // Copy forward (the destination is always before the source, like memmove), and
    // keep going until the end stops moving: the runner may append meanwhile.
    let mut src = cut_end;
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = file.read_at(&mut buf, src)?;
        if n == 0 {
            break;
        }
        file.write_all_at(&buf[..n], src - shift)?;
        src += n as u64;
    }
    let new_len = src - shift;
    file.set_len(new_len)?;
    Ok(BoundOutcome::Trimmed {
        head,
        cut_end,
        shift,
        new_len,
    })
}

fn marker(removed: u64, max_bytes: u64, head_ends_line: bool) -> Vec<u8> {
    // A head cut mid-line (one huge first line) still gets the marker on its own line.
    let lead = if head_ends_line { "" } else { "\n" };
    format!(
        "{lead}[runner-manager: {removed} bytes removed here to keep this log under {max_bytes} bytes]\n"
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_offsets_around_a_cut() {
        let o = BoundOutcome::Trimmed {
            head: 100,
            cut_end: 1000,
            shift: 800,
            new_len: 500,
        };
        assert_eq!(o.map_offset(50), 50);
        assert_eq!(o.map_offset(500), 100);
        assert_eq!(o.map_offset(1000), 200);
        assert_eq!(o.map_offset(1300), 500);
    }

    #[test]
    fn splits_crlf_and_invalid_utf8() {
        let mut t = LogTail::new("/nonexistent");
        t.partial = b"a\r\nb\xffc\nrest".to_vec();
        assert_eq!(t.split_lines(), vec!["a".to_string(), "b\u{fffd}c".into()]);
        assert_eq!(t.offset(), 7);
        assert_eq!(t.partial, b"rest");
    }

    #[test]
    fn overlong_line_comes_out_in_pieces() {
        let mut t = LogTail::new("/nonexistent");
        t.partial = vec![b'x'; MAX_LINE + 1];
        assert_eq!(t.split_lines().len(), 1);
        assert_eq!(t.offset(), MAX_LINE as u64 + 1);
        assert!(t.partial.is_empty());
    }
}
