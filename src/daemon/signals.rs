//! Signals as values on a channel: SIGTERM/SIGINT (drain and stop), SIGHUP (reload).
//! signal-hook's iterator runs on its own named thread and forwards into crossbeam.

use crossbeam_channel::{Receiver, bounded};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM or SIGINT: stop starting runners, drain, exit.
    Terminate,
    /// SIGHUP: re-read settings.
    Reload,
}

/// The forwarding thread; `close` stops it and joins.
pub struct SignalWatch {
    handle: Handle,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SignalWatch {
    pub fn start() -> std::io::Result<(SignalWatch, Receiver<Signal>)> {
        let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])?;
        let handle = signals.handle();
        let (tx, rx) = bounded(16);
        let thread = std::thread::Builder::new()
            .name("signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let s = if sig == SIGHUP {
                        Signal::Reload
                    } else {
                        Signal::Terminate
                    };
                    if tx.send(s).is_err() {
                        break;
                    }
                }
            })?;
        Ok((
            SignalWatch {
                handle,
                thread: Some(thread),
            },
            rx,
        ))
    }
}

impl Drop for SignalWatch {
    fn drop(&mut self) {
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
