//! Handles to the daemon's loop threads, as rust-analyzer's `FlycheckHandle`: each
//! holds the thread's inbox and the thread, and dropping it stops the thread and
//! joins it, so no loop outlives the handle that started it. `Loops` is the one map
//! of target loops, by target name, through which any thread wakes one.

use crate::daemon::shared::{LoopMsg, lock};
use crate::meter::{LiveAttempt, MeterReport, spawn_sampler};
use crate::reconcile::pass::TargetError;
use crossbeam_channel::{Receiver, Sender, bounded};
use std::collections::HashMap;
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

/// One target loop's thread (`target:<name>`) and its inbox.
pub struct LoopHandle {
    tx: Sender<LoopMsg>,
    /// The loop's error at the end, with `--once` (see `TargetLoop::run`); `None`
    /// once joined.
    thread: Option<JoinHandle<Option<TargetError>>>,
}

impl LoopHandle {
    /// Runs `body` (a target loop's `run`) on a thread named `target:<name>` with the
    /// handle's inbox.
    pub fn spawn(
        name: &str,
        body: impl FnOnce(Receiver<LoopMsg>) -> Option<TargetError> + Send + 'static,
    ) -> std::io::Result<LoopHandle> {
        let (tx, rx) = bounded::<LoopMsg>(4);
        let thread = std::thread::Builder::new()
            .name(format!("target:{name}"))
            .spawn(move || body(rx))?;
        Ok(LoopHandle {
            tx,
            thread: Some(thread),
        })
    }

    /// Sends `msg` unless the inbox is full (a full inbox already holds a wake-up).
    pub fn tell(&self, msg: LoopMsg) {
        let _ = self.tx.try_send(msg);
    }

    /// Tells the loop to leave after its current pass, without waiting for it.
    pub fn ask_stop(&self) {
        let _ = self.tx.send(LoopMsg::Stop);
    }

    /// Waits for the loop to end (after `ask_stop`, or on its own with `--once`) and
    /// gives what it returned; `Err` if it panicked.
    pub fn join(mut self) -> std::thread::Result<Option<TargetError>> {
        match self.thread.take() {
            Some(t) => t.join(),
            None => Ok(None),
        }
    }
}

impl Drop for LoopHandle {
    fn drop(&mut self) {
        let Some(t) = self.thread.take() else {
            return;
        };
        // A loop thread never joins itself (that would wait forever).
        if t.thread().id() == std::thread::current().id() {
            return;
        }
        self.ask_stop();
        let _ = t.join();
    }
}

/// The running target loops, by target name. A handle leaves the map before it is
/// stopped and joined, so the map's lock is never held while a loop finishes (its
/// last pass may wake another loop).
#[derive(Default)]
pub struct Loops(Mutex<HashMap<String, LoopHandle>>);

impl Loops {
    pub fn insert(&self, name: String, handle: LoopHandle) {
        lock(&self.0).insert(name, handle);
    }

    /// Takes `name`'s handle out of the map; dropping it stops the loop.
    pub fn remove(&self, name: &str) -> Option<LoopHandle> {
        lock(&self.0).remove(name)
    }

    /// Takes every handle out of the map.
    pub fn take_all(&self) -> Vec<(String, LoopHandle)> {
        lock(&self.0).drain().collect()
    }

    pub fn contains(&self, name: &str) -> bool {
        lock(&self.0).contains_key(name)
    }

    /// The targets that have a loop now.
    pub fn names(&self) -> Vec<String> {
        lock(&self.0).keys().cloned().collect()
    }

    /// Sends `msg` to one target's loop, if it has one.
    pub fn tell(&self, target: &str, msg: LoopMsg) {
        if let Some(h) = lock(&self.0).get(target) {
            h.tell(msg);
        }
    }

    /// Sends `msg` to every target loop.
    pub fn tell_all(&self, msg: LoopMsg) {
        for h in lock(&self.0).values() {
            h.tell(msg);
        }
    }
}

/// The meter sampler's thread (`meter-sampler`): the live attempts go in through
/// `live`, its readings come out on the receiver `start` returns.
pub struct SamplerHandle {
    live: Sender<Vec<LiveAttempt>>,
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl SamplerHandle {
    /// Starts the sampler, reading every `interval`.
    pub fn start(
        interval: Duration,
    ) -> std::io::Result<(SamplerHandle, Receiver<Vec<MeterReport>>)> {
        let (live, live_rx) = bounded::<Vec<LiveAttempt>>(1);
        let (report_tx, report_rx) = bounded::<Vec<MeterReport>>(4);
        let (stop, stop_rx) = bounded::<()>(0);
        let thread = spawn_sampler(interval, live_rx, stop_rx, report_tx)?;
        let handle = SamplerHandle {
            live,
            stop: Some(stop),
            thread: Some(thread),
        };
        Ok((handle, report_rx))
    }

    /// Gives the sampler the attempts to read next, unless it has not taken the last
    /// list yet.
    pub fn watch(&self, live: Vec<LiveAttempt>) {
        let _ = self.live.try_send(live);
    }
}

impl Drop for SamplerHandle {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a test loop returns: its words, as a target error.
    fn said(words: String) -> TargetError {
        TargetError::Credentials(words)
    }

    fn text(e: Option<TargetError>) -> Option<String> {
        e.map(|e| match e {
            TargetError::Credentials(words) => words,
            other => other.to_string(),
        })
    }
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A loop that passes until told to stop, then says so in `ended`.
    fn until_stopped(name: &str, ended: &Arc<AtomicBool>) -> LoopHandle {
        let ended = ended.clone();
        LoopHandle::spawn(name, move |inbox| {
            while let Ok(msg) = inbox.recv() {
                if msg == LoopMsg::Stop {
                    break;
                }
            }
            ended.store(true, Ordering::SeqCst);
            None
        })
        .unwrap()
    }

    #[test]
    fn dropping_a_handle_stops_its_loop_and_joins_it() {
        let ended = Arc::new(AtomicBool::new(false));
        let handle = until_stopped("a", &ended);
        handle.tell(LoopMsg::Wake);
        drop(handle);
        assert!(ended.load(Ordering::SeqCst));
    }

    #[test]
    fn join_gives_what_the_loop_returned_without_telling_it_to_stop() {
        let handle = LoopHandle::spawn("a", |inbox| {
            // `--once` reads no inbox: a Stop here would be the handle's doing.
            Some(said(format!("inbox: {:?}", inbox.try_recv().ok())))
        })
        .unwrap();
        assert_eq!(text(handle.join().unwrap()).as_deref(), Some("inbox: None"));
    }

    #[test]
    fn a_loop_that_panicked_joins_as_an_error() {
        let handle = LoopHandle::spawn("a", |_| panic!("a pass panicked")).unwrap();
        assert!(handle.join().is_err());
    }

    #[test]
    fn the_map_tells_each_loop_and_a_removed_loop_is_stopped_when_dropped() {
        let loops = Loops::default();
        for name in ["a", "b"] {
            let handle = LoopHandle::spawn(name, |inbox| {
                inbox.recv().ok().map(|m| said(format!("{m:?}")))
            })
            .unwrap();
            loops.insert(name.into(), handle);
        }
        let mut names = loops.names();
        names.sort();
        assert_eq!(names, ["a", "b"]);
        loops.tell("a", LoopMsg::Reload);
        assert_eq!(
            text(loops.remove("a").unwrap().join().unwrap()).as_deref(),
            Some("Reload")
        );
        assert!(!loops.contains("a"));
        loops.tell_all(LoopMsg::Wake);
        let rest: Vec<_> = loops.take_all();
        assert_eq!(rest.len(), 1);
        for (_, h) in rest {
            assert_eq!(text(h.join().unwrap()).as_deref(), Some("Wake"));
        }
        assert!(loops.names().is_empty());

        let ended = Arc::new(AtomicBool::new(false));
        loops.insert("c".into(), until_stopped("c", &ended));
        drop(loops.remove("c"));
        assert!(ended.load(Ordering::SeqCst));
    }
}
