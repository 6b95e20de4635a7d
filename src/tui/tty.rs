//! Watching the terminal itself with poll(2): has it gone away (hung up, closed,
//! invalid)? And, once it has, taking it out of a reader's hands.
//!
//! crossterm's reader cannot be trusted with a terminal that went away: a hung-up tty
//! stays readable and every read returns 0 (or fails with EIO), and crossterm retries
//! at once, for ever, inside `event::poll` (crossterm-rs/crossterm#793). So a watcher
//! waits in poll(2) for the hang-up alone, and then [`neutralise`]s the descriptor:
//! the reader's next read says "nothing yet" (EAGAIN) and crossterm returns.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// What poll(2) says about a terminal descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tty {
    /// Nothing to read within the wait.
    Idle,
    /// Input is waiting.
    Readable,
    /// Hung up (the pty's master closed, the SSH session or the tmux pane ended),
    /// in error, or not an open descriptor: nothing will ever be read from it again.
    Gone,
}

/// The verdict on poll(2)'s `revents`. A hang-up wins over input: a hung-up tty also
/// reports POLLIN, and reading it returns 0 for ever.
pub fn classify(revents: libc::c_short) -> Tty {
    if revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
        Tty::Gone
    } else if revents & libc::POLLIN != 0 {
        Tty::Readable
    } else {
        Tty::Idle
    }
}

/// poll(2) over `fds` for `timeout` (None: no limit). A signal arriving meanwhile
/// (EINTR) counts as nothing ready.
fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<usize> {
    let ms = timeout.map_or(-1, |t| {
        libc::c_int::try_from(t.as_millis()).unwrap_or(libc::c_int::MAX)
    });
    // SAFETY: a valid slice of pollfds and its length.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    Ok(n as usize)
}

/// Waits up to `timeout` for input on `fd`.
pub fn wait(fd: RawFd, timeout: Duration) -> io::Result<Tty> {
    let mut p = [libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }];
    Ok(match poll(&mut p, Some(timeout))? {
        0 => Tty::Idle,
        _ => classify(p[0].revents),
    })
}

/// True when the terminal on `fd` has gone away; asks without waiting.
pub fn gone(fd: RawFd) -> bool {
    matches!(wait(fd, Duration::ZERO), Ok(Tty::Gone) | Err(_))
}

/// Why [`watch`] returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watch {
    /// The terminal went away.
    Gone,
    /// The other end of `wake` was written to or dropped: stop watching.
    Woken,
}

/// Blocks until the terminal on `fd` goes away or `wake`'s peer wakes us. It asks
/// for no events on `fd`: poll(2) reports a hang-up or an error whatever was asked,
/// so input never wakes it and it costs nothing while the terminal lives.
pub fn watch(fd: RawFd, wake: &UnixStream) -> io::Result<Watch> {
    loop {
        let mut p = [
            libc::pollfd {
                fd,
                events: 0,
                revents: 0,
            },
            libc::pollfd {
                fd: wake.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        if poll(&mut p, None)? == 0 {
            continue;
        }
        if classify(p[0].revents) == Tty::Gone {
            return Ok(Watch::Gone);
        }
        if p[1].revents != 0 {
            return Ok(Watch::Woken);
        }
    }
}

/// Puts an empty, non-blocking pipe where the dead terminal was on `fd`, its write
/// end kept open for the rest of the process: a reader stuck in crossterm's read loop
/// then reads EAGAIN ("nothing yet") instead of 0 for ever, and returns. Only for a
/// terminal that is gone, as the process ends.
pub fn neutralise(fd: RawFd) -> io::Result<()> {
    let mut ends = [0; 2];
    // SAFETY: a two-int array for pipe2(2).
    if unsafe { libc::pipe2(ends.as_mut_ptr(), libc::O_NONBLOCK | libc::O_CLOEXEC) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 just returned these two descriptors, owned by no one else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(ends[0]), OwnedFd::from_raw_fd(ends[1])) };
    // SAFETY: dup2 onto a descriptor number this process uses for its terminal.
    if unsafe { libc::dup2(read.as_raw_fd(), fd) } < 0 {
        return Err(io::Error::last_os_error());
    }
    // An open write end makes an empty pipe say EAGAIN rather than end of file.
    std::mem::forget(write);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(revents: libc::c_short, want: Tty) {
        assert_eq!(classify(revents), want, "revents {revents:#x}");
    }

    #[test]
    fn a_hang_up_wins_over_input() {
        check(0, Tty::Idle);
        check(libc::POLLIN, Tty::Readable);
        check(libc::POLLIN | libc::POLLHUP, Tty::Gone);
        check(libc::POLLHUP, Tty::Gone);
        check(libc::POLLERR, Tty::Gone);
        check(libc::POLLNVAL, Tty::Gone);
        check(libc::POLLOUT, Tty::Idle);
    }

    fn pipe() -> (OwnedFd, OwnedFd) {
        let mut fds = [0; 2];
        // SAFETY: a two-int array for pipe2(2).
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: pipe2 just returned them.
        unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
    }

    #[test]
    fn a_closed_pipe_is_gone_and_an_open_one_idle() {
        let (r, w) = pipe();
        assert_eq!(wait(r.as_raw_fd(), Duration::ZERO).unwrap(), Tty::Idle);
        // SAFETY: writing one byte from a live buffer to our own pipe.
        assert_eq!(
            unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) },
            1
        );
        assert_eq!(wait(r.as_raw_fd(), Duration::ZERO).unwrap(), Tty::Readable);
        drop(w);
        assert!(gone(r.as_raw_fd()));
    }

    #[test]
    fn watch_ends_on_a_hang_up_or_a_wake_and_not_on_input() {
        let (r, w) = pipe();
        let (wake, waker) = UnixStream::pair().unwrap();
        // SAFETY: writing one byte from a live buffer to our own pipe.
        assert_eq!(
            unsafe { libc::write(w.as_raw_fd(), b"x".as_ptr().cast(), 1) },
            1
        );
        drop(waker);
        assert_eq!(watch(r.as_raw_fd(), &wake).unwrap(), Watch::Woken);
        let (wake, _waker) = UnixStream::pair().unwrap();
        drop(w);
        assert_eq!(watch(r.as_raw_fd(), &wake).unwrap(), Watch::Gone);
    }

    #[test]
    fn a_neutralised_descriptor_reads_eagain_not_end_of_file() {
        let (r, w) = pipe();
        drop(w);
        let mut buf = [0u8; 8];
        // SAFETY: reading into a live buffer of its length.
        let n = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(n, 0, "a hung-up reader reads end of file");
        neutralise(r.as_raw_fd()).unwrap();
        // SAFETY: as above.
        let n = unsafe { libc::read(r.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        assert_eq!(n, -1);
        assert_eq!(io::Error::last_os_error().kind(), io::ErrorKind::WouldBlock);
    }
}
