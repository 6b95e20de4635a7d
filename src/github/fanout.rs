//! Bounded fan-out of independent requests on scoped threads: a demand read's jobs
//! lists (one request per queued run) go out together instead of one after another.
//!
//! The threads only bound how many calls are started at once; what is really in flight
//! is the credential's `InFlight` limiter's to bound, shared with every other client.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Runs `work` on every item with up to `width` threads (the caller's own among them),
/// each taking the next item from a shared cursor, and returns the results in item
/// order. The first error to happen wins: no further item is started after it, the
/// ones already started finish, and their results are dropped.
pub fn fan_out<I, T, E>(
    width: usize,
    items: &[I],
    work: impl Fn(&I) -> Result<T, E> + Sync,
) -> Result<Vec<T>, E>
where
    I: Sync,
    T: Send,
    E: Send,
{
    let width = width.clamp(1, items.len().max(1));
    if width == 1 {
        // Nothing to overlap: no thread is worth its start.
        return items.iter().map(&work).collect();
    }
    let next = AtomicUsize::new(0);
    let failed = AtomicBool::new(false);
    let first_error: Mutex<Option<E>> = Mutex::new(None);
    let results: Mutex<Vec<Option<T>>> = Mutex::new(items.iter().map(|_| None).collect());
    let worker = || {
        while !failed.load(Ordering::SeqCst) {
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(item) = items.get(i) else { break };
            match work(item) {
                Ok(v) => results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(v),
                Err(e) => {
                    let mut slot = first_error.lock().unwrap_or_else(|e| e.into_inner());
                    if slot.is_none() {
                        *slot = Some(e);
                    }
                    failed.store(true, Ordering::SeqCst);
                    break;
                }
            }
        }
    };
    std::thread::scope(|s| {
        for _ in 1..width {
            // A thread that cannot be started leaves its share to the others (the
            // caller's thread always works), so the read is slower, never lost.
            let _ = std::thread::Builder::new()
                .name("github-fanout".into())
                .spawn_scoped(s, worker);
        }
        worker();
    });
    if let Some(e) = first_error.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(e);
    }
    Ok(results
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .map(|v| v.expect("every item ran when none failed"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;
    use std::sync::atomic::AtomicU32;

    #[test]
    fn results_keep_the_items_order() {
        let items: Vec<u32> = (0..50).collect();
        for width in [0, 1, 3, 8, 100] {
            let out = fan_out(width, &items, |i| {
                // Later items finish first, to shuffle completion order.
                if *i % 7 == 0 {
                    std::thread::yield_now();
                }
                Ok::<_, ()>(i * 10)
            })
            .unwrap();
            assert_eq!(out, items.iter().map(|i| i * 10).collect::<Vec<_>>());
        }
        assert_eq!(fan_out(4, &[] as &[u32], |_| Ok::<u32, ()>(1)), Ok(vec![]));
    }

    #[test]
    fn items_really_overlap_up_to_the_width() {
        // Four items that each wait for all four to have started: only done when they
        // run at the same time.
        let all = Barrier::new(4);
        let out = fan_out(4, &[1, 2, 3, 4], |i| {
            all.wait();
            Ok::<_, ()>(*i)
        });
        assert_eq!(out, Ok(vec![1, 2, 3, 4]));
    }

    #[test]
    fn the_first_error_wins_and_stops_the_rest() {
        let started = AtomicU32::new(0);
        let items: Vec<u32> = (0..1000).collect();
        let out = fan_out(4, &items, |i| {
            started.fetch_add(1, Ordering::SeqCst);
            if *i == 5 {
                return Err(format!("item {i}"));
            }
            // Work that takes a moment, as a request does: the failure is recorded
            // long before the other threads could run through the list.
            std::thread::sleep(std::time::Duration::from_millis(2));
            Ok(*i)
        });
        assert_eq!(out, Err("item 5".to_string()));
        // Those already taken may finish; nothing much is started after the failure.
        let n = started.load(Ordering::SeqCst);
        assert!(n < 100, "{n} items started after an early failure");

        let serial = AtomicU32::new(0);
        let out = fan_out(1, &items, |i| {
            serial.fetch_add(1, Ordering::SeqCst);
            if *i == 2 { Err(()) } else { Ok(()) }
        });
        assert_eq!(out, Err(()));
        assert_eq!(serial.load(Ordering::SeqCst), 3);
    }
}
