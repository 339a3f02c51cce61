//! The retry policy of the client: which failures are retried, how long to
//! wait, and a wait that a cancel cuts short. See the
//! [client docs](super::client#retries).

use std::time::Duration;

use crate::{Cancellable, Result};

/// Status codes worth another attempt: rate limits and the transient server
/// failures a proxy or an overloaded server reports (the kinds `RateLimit`
/// and part of `Server`; the client skips a `ContextOverflow` among them).
/// 529 is Anthropic's "overloaded".
pub(super) const RETRYABLE: [u16; 6] = [429, 500, 502, 503, 504, 529];

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
    let (tx, rx) = crossbeam_channel::bounded::<()>(1);
    let _hook = cancel.on_cancel(move || {
        let _ = tx.try_send(());
    });
    let _ = rx.recv_timeout(d);
    cancel.check()
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
