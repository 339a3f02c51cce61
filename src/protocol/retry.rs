//! The retry policy of the client: which failures are retried, how long to
//! wait, and a wait that a cancel cuts short. See the
//! [client docs](super::client#retries).

use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::{Cancellable, Result};

/// Status codes worth another attempt: rate limits and the transient server
/// failures a proxy or an overloaded server reports (the kinds `RateLimit`
/// and part of `Server`; the client skips a `ContextOverflow` among them).
/// 529 is Anthropic's "overloaded".
pub(super) const RETRYABLE: [u16; 6] = [429, 500, 502, 503, 504, 529];

/// Whether a failed status is worth asking again: a retryable status,
/// but an overflow (sent again, it overflows again, even as a 500: Ollama's
/// `prompt too long`) and an image to a model without vision (llama-server
/// answers it with a 500). The same whether the status came before the
/// stream or in it.
pub(super) fn is_retried(err: &crate::Error) -> bool {
    matches!(err, crate::Error::Http { status, .. } if RETRYABLE.contains(status))
        && !err.is_context_overflow()
        && err.kind() != crate::ErrorKind::ImageUnsupported
}

/// A failed attempt that will be retried.
#[derive(Debug)]
pub(crate) struct RetryNotice {
    pub(crate) attempt: u32,
    pub(crate) error: String,
    pub(crate) wait: Duration,
}

/// Whether `e` happened before the server saw the request, so that sending
/// it again cannot run it twice.
pub(super) fn is_connection_failure(e: &ureq::Error) -> bool {
    use std::io::ErrorKind as K;
    match e {
        ureq::Error::ConnectionFailed => true,
        // A pooled connection the server closed while idle fails like this
        // on first use: the classic case for one more attempt.
        ureq::Error::Io(io) => matches!(
            io.kind(),
            K::ConnectionRefused
                | K::ConnectionReset
                | K::ConnectionAborted
                | K::BrokenPipe
                | K::UnexpectedEof
        ),
        _ => false,
    }
}

/// A `Retry-After` in seconds; the HTTP-date form, negative and fractional
/// values are not parsed, and the backoff applies instead. A value past
/// `u64` seconds is taken as `u64::MAX` seconds (the cap applies anyway).
pub(super) fn retry_after(headers: &ureq::http::HeaderMap) -> Option<Duration> {
    let v = headers.get("retry-after")?.to_str().ok()?.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(Duration::from_secs(v.parse::<u64>().unwrap_or(u64::MAX)))
}

/// `base * 2^(attempt-1)`, scaled by a jitter factor in [0.5, 1.0);
/// saturating (a huge base gives a huge wait, never an overflow).
pub(super) fn backoff(base: Duration, attempt: u32) -> Duration {
    let exp = base.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    let factor = 0.5 + jitter() * 0.5;
    Duration::try_from_secs_f64(exp.as_secs_f64() * factor).map_or(exp, |d| d.min(exp))
}

/// A cheap pseudo-random number in [0, 1) (no `rand` dependency; jitter only
/// needs to de-synchronize clients).
fn jitter() -> f64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static STATE: AtomicU64 = AtomicU64::new(0);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0x9E37_79B9, |d| d.as_nanos() as u64);
    let mut x = STATE.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) ^ seed;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

/// Sleep `d`, returning early with `Cancelled` when `cancel` fires.
pub(super) fn sleep(d: Duration, cancel: Option<&Cancellable>) -> Result<()> {
    let Some(cancel) = cancel else {
        std::thread::sleep(d);
        return Ok(());
    };
    let wake = Wake::new();
    let hook_wake = wake.clone();
    let _hook = cancel.on_cancel(move || hook_wake.put(()));
    let _ = wake.wait_timeout(d);
    cancel.check()
}

/// A one-shot hand-over between threads: the first [`put`](Wake::put) wins
/// and wakes the waiter; later ones are dropped. What the loop's timed
/// wake-ups need (the retry wait above, the approval gate's wait for a
/// decision or a cancel), on a `parking_lot` mutex and condition variable.
///
/// Not a channel on purpose: a `crossbeam_channel` per value type compiles
/// its three flavors for that type (about 17 KB of binary each, see
/// BENCHMARKS.md, "the small CLI"), for what is one slot and one wake-up.
pub(crate) struct Wake<T>(Arc<(Mutex<Option<T>>, Condvar)>);

impl<T> Clone for Wake<T> {
    fn clone(&self) -> Self {
        Wake(Arc::clone(&self.0))
    }
}

impl<T> Wake<T> {
    pub(crate) fn new() -> Self {
        Wake(Arc::new((Mutex::new(None), Condvar::new())))
    }

    /// Fill the slot unless it is full, and wake the waiter. Never blocks
    /// for longer than the waiter holds the lock.
    pub(crate) fn put(&self, value: T) {
        let (slot, ready) = &*self.0;
        let mut slot = slot.lock();
        if slot.is_none() {
            *slot = Some(value);
            ready.notify_all();
        }
    }

    /// Wait until the slot is filled, and take its value.
    pub(crate) fn wait(&self) -> T {
        let (slot, ready) = &*self.0;
        let mut slot = slot.lock();
        loop {
            if let Some(value) = slot.take() {
                return value;
            }
            ready.wait(&mut slot);
        }
    }

    /// As [`wait`](Wake::wait), giving up after `d`: `None` when nothing
    /// came in time.
    pub(crate) fn wait_timeout(&self, d: Duration) -> Option<T> {
        let (slot, ready) = &*self.0;
        let deadline = Instant::now().checked_add(d);
        let mut slot = slot.lock();
        loop {
            if let Some(value) = slot.take() {
                return Some(value);
            }
            match deadline {
                Some(deadline) => {
                    if ready.wait_until(&mut slot, deadline).timed_out() {
                        return slot.take();
                    }
                }
                // Beyond what `Instant` can hold: as good as forever.
                None => ready.wait(&mut slot),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn backoff_grows_and_jitters() {
        let b = Duration::from_millis(100);
        for attempt in 1..5 {
            let d = backoff(b, attempt);
            let full = b * (1 << (attempt - 1));
            assert!(d >= full / 2 && d <= full, "{d:?} vs {full:?}");
        }
    }

    #[test]
    fn backoff_saturates() {
        for attempt in [0, 1, 2, 17, u32::MAX] {
            for base in [Duration::ZERO, Duration::from_secs(u64::MAX), Duration::MAX] {
                assert!(backoff(base, attempt) <= Duration::MAX);
            }
        }
        assert!(backoff(Duration::MAX, 3) >= Duration::from_secs(u64::MAX / 2));
    }

    #[test]
    fn wake_hands_over_the_first_value_only() {
        let wake = Wake::new();
        wake.put(1);
        wake.put(2);
        assert_eq!(wake.wait(), 1);
        // Taken: the slot is empty again, and the second put was dropped.
        assert_eq!(wake.wait_timeout(Duration::ZERO), None);
    }

    #[test]
    fn wake_wakes_a_waiter_on_another_thread() {
        let wake = Wake::new();
        let sender = wake.clone();
        let t = std::thread::spawn(move || sender.put("done"));
        // No timed assertion: a wait that never woke would hang the test.
        assert_eq!(wake.wait(), "done");
        t.join().unwrap();
        let late = Wake::<()>::new();
        let sender = late.clone();
        let t = std::thread::spawn(move || sender.put(()));
        assert_eq!(late.wait_timeout(Duration::MAX), Some(()));
        t.join().unwrap();
    }

    #[test]
    fn wake_times_out_empty() {
        let wake = Wake::<u8>::new();
        assert_eq!(wake.wait_timeout(Duration::from_millis(1)), None);
    }

    #[test]
    fn sleep_is_cut_by_cancel() {
        let c = Cancellable::new();
        let c2 = c.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            c2.cancel();
        });
        let started = Instant::now();
        assert!(
            sleep(Duration::from_secs(10), Some(&c))
                .unwrap_err()
                .is_cancelled()
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        t.join().unwrap();
    }
}
