//! Work on every core with the results in order: a producer thread hands out items, worker
//! threads turn them into results, and the calling thread consumes the results in the
//! order the items were produced, as a loop on one thread would. What the document passes
//! of `simdex dedup` run on.
//!
//! Memory stays bounded: at most `4 * threads` items are between the producer and the
//! consumer (produced and not yet consumed) whatever the order the workers finish in.

use std::collections::BTreeMap;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::{Arc, Mutex};

/// Runs `produce` (which hands out items through its argument, which returns false when the
/// run stops: it should then return), `work` on `threads` threads, each with a state made by
/// `init`, and `consume` on the calling thread, in the items' order. The first error of
/// `consume` stops the run and is returned; so are the workers' states otherwise (to merge
/// what they gathered). With one thread everything runs on the calling thread, one item at
/// a time.
pub fn run<T, R, S>(
    threads: usize,
    produce: impl FnOnce(&mut dyn FnMut(T) -> bool) + Send,
    init: impl Fn() -> S + Sync,
    work: impl Fn(&mut S, T) -> R + Sync,
    mut consume: impl FnMut(R) -> anyhow::Result<()>,
) -> anyhow::Result<Vec<S>>
where
    T: Send,
    R: Send,
    S: Send,
{
    if threads <= 1 {
        let mut state = init();
        let mut failed = None;
        produce(&mut |item| match consume(work(&mut state, item)) {
            Ok(()) => true,
            Err(e) => {
                failed = Some(e);
                false
            }
        });
        return failed.map_or(Ok(vec![state]), Err);
    }
    let in_flight = 4 * threads;
    // a credit a item: the producer takes one before handing out an item, the consumer gives
    // it back when it has consumed that item
    let (credit_tx, credit_rx) = sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        let _ = credit_tx.send(());
    }
    let (item_tx, item_rx) = sync_channel::<(u64, T)>(in_flight);
    let item_rx = Arc::new(Mutex::new(item_rx));
    let (result_tx, result_rx) = sync_channel::<(u64, R)>(in_flight);
    std::thread::scope(|s| {
        s.spawn(move || {
            let mut seq = 0u64;
            produce(&mut |item| {
                if credit_rx.recv().is_err() || item_tx.send((seq, item)).is_err() {
                    return false;
                }
                seq += 1;
                true
            });
        });
        let (init, work) = (&init, &work);
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                let (item_rx, result_tx) = (Arc::clone(&item_rx), result_tx.clone());
                s.spawn(move || {
                    let mut state = init();
                    while let Some((seq, item)) = next_item(&item_rx) {
                        if result_tx.send((seq, work(&mut state, item))).is_err() {
                            break;
                        }
                    }
                    state
                })
            })
            .collect();
        drop((item_rx, result_tx));
        let consumed = (|| {
            let mut next = 0u64;
            let mut early: BTreeMap<u64, R> = BTreeMap::new();
            for (seq, result) in &result_rx {
                early.insert(seq, result);
                while let Some(result) = early.remove(&next) {
                    consume(result)?;
                    next += 1;
                    let _ = credit_tx.send(());
                }
            }
            Ok(())
        })();
        // stop the producer and the workers (a no-op when they are done)
        drop((credit_tx, result_rx));
        let states: Vec<S> = workers.into_iter().map(|w| w.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect();
        consumed.map(|()| states)
    })
}

/// The next item for a worker; `None` when the producer is done (or gone).
fn next_item<T>(rx: &Mutex<Receiver<(u64, T)>>) -> Option<(u64, T)> {
    rx.lock().unwrap_or_else(|p| p.into_inner()).recv().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The results arrive in the items' order whatever the threads, with uneven work.
    #[test]
    fn results_in_order_on_any_number_of_threads() {
        for threads in [1, 2, 3, 8] {
            let mut got = Vec::new();
            let states = run(
                threads,
                |send| {
                    for i in 0..500u64 {
                        if !send(i) {
                            return;
                        }
                    }
                },
                || 0u64,
                |n, i| {
                    *n += 1;
                    if i % 7 == 0 {
                        std::thread::sleep(std::time::Duration::from_micros(200));
                    }
                    i * i
                },
                |r| {
                    got.push(r);
                    Ok(())
                },
            )
            .unwrap();
            assert_eq!(got, (0..500u64).map(|i| i * i).collect::<Vec<_>>(), "{threads} threads");
            assert_eq!((states.len(), states.iter().sum::<u64>()), (threads, 500));
        }
    }

    /// A consumer's error stops the producer (which would otherwise never end) and is returned.
    #[test]
    fn an_error_stops_the_run() {
        for threads in [1, 2, 4] {
            let mut consumed = 0;
            let e = run(
                threads,
                |send| {
                    let mut i = 0u64;
                    while send(i) {
                        i += 1;
                    }
                },
                || (),
                |_, i| i,
                |i| {
                    consumed += 1;
                    if i == 100 {
                        anyhow::bail!("stop at {i}");
                    }
                    Ok(())
                },
            )
            .unwrap_err();
            assert_eq!((e.to_string(), consumed), ("stop at 100".to_owned(), 101));
        }
    }
}
