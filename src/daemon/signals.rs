//! Signals as values on a channel: SIGTERM/SIGINT (drain and stop), SIGHUP (reload).
//! signal-hook's iterator runs on its own named thread and forwards into crossbeam.

use crossbeam_channel::{Receiver, bounded};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::{Handle, Signals};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM (a service manager's stop) or SIGINT (Ctrl-C): stop starting runners,
    /// drain, exit.
    Terminate(Stop),
    /// SIGHUP: re-read settings.
    Reload,
}

/// Which signal asked the daemon to stop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM: a normal stop (exit 0).
    Term,
    /// SIGINT: an interrupt (exit 130, the table's `interrupted`).
    Int,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Stop::Term => "SIGTERM",
            Stop::Int => "SIGINT",
        }
    }
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
                    let s = match sig {
                        SIGHUP => Signal::Reload,
                        SIGINT => Signal::Terminate(Stop::Int),
                        _ => Signal::Terminate(Stop::Term),
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
