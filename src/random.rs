//! The one source of secure random bytes: host ids, lease ids and host tokens all come
//! from [`fill`]. getrandom(2) first, which needs no `/dev`, so the static binary works
//! in an empty chroot or a minimal container; `/dev/urandom` only where the kernel has
//! no getrandom (before Linux 3.17) or on another OS.

use std::io;

/// Fills `buf` with bytes from the kernel's secure random source.
pub fn fill(buf: &mut [u8]) -> io::Result<()> {
    match getrandom(buf) {
        Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => urandom(buf),
        other => other,
    }
}

#[cfg(any(target_os = "linux", target_os = "android"))]
fn getrandom(buf: &mut [u8]) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        let rest = &mut buf[done..];
        // SAFETY: the pointer and length name `rest`, which is valid for writes.
        let n = unsafe { libc::getrandom(rest.as_mut_ptr().cast(), rest.len(), 0) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        done += n as usize;
    }
    Ok(())
}

#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn getrandom(_: &mut [u8]) -> io::Result<()> {
    Err(io::Error::from_raw_os_error(libc::ENOSYS))
}

fn urandom(buf: &mut [u8]) -> io::Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")?.read_exact(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fills_every_byte_and_never_twice_the_same() {
        // Past one getrandom(2) call's 256-byte guarantee, so the loop is taken.
        let (mut a, mut b) = ([0u8; 1024], [0u8; 1024]);
        fill(&mut a).unwrap();
        fill(&mut b).unwrap();
        assert_ne!(a, b);
        // 64 zero bytes in a row from a real source: about 2^-512.
        assert!(a.chunks(64).all(|c| c.iter().any(|x| *x != 0)));
        fill(&mut []).unwrap();
    }

    #[test]
    fn the_fallback_reads_urandom() {
        let mut a = [0u8; 32];
        urandom(&mut a).unwrap();
        assert!(a.iter().any(|x| *x != 0));
    }
}
