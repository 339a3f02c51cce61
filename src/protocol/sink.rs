//! [`Sink`]: what one chat request reports while it runs, gathered in one
//! implementor instead of closures passed side by side (the shape of
//! grep-searcher's `Sink`).
//!
//! The push model: [`Client::chat`](super::Client::chat) calls the sink on
//! the thread that called it, in the order things happen: `retrying` before
//! each retry's wait, then, while the answer streams, `progress` after each
//! event that carried part of the answer, `fragment` for each piece of
//! text, reasoning or usage, and `before_read` when what was read is
//! decoded and the next read may wait for the network. Every method has a
//! no-op default; the client itself puts `progress` to use (the idle
//! bound), the agent the other three. [`Callbacks`] adapts three closures.

use super::decode::Fragment;
use super::retry::RetryNotice;

/// What a chat request reports while it runs (see the
/// [module docs](self)).
pub(crate) trait Sink {
    /// A failed attempt will be retried after `notice.wait`.
    fn retrying(&mut self, notice: &RetryNotice) {
        let _ = notice;
    }

    /// An event carried part of the answer (the
    /// [progress rule](super::rules#progress)).
    fn progress(&mut self) {}

    /// A piece of the answer arrived.
    fn fragment(&mut self, fragment: Fragment<'_>) {
        let _ = fragment;
    }

    /// What was read is decoded; the next read may wait for the network.
    fn before_read(&mut self) {}
}

/// A sink that reports nothing.
impl Sink for () {}

/// A [`Sink`] of three closures: the agent's retry notice, fragment and
/// hand-over hooks.
pub(crate) struct Callbacks<'a> {
    pub(crate) on_retry: &'a mut dyn FnMut(&RetryNotice),
    pub(crate) on_fragment: &'a mut dyn FnMut(Fragment<'_>),
    pub(crate) before_read: &'a mut dyn FnMut(),
}

impl Sink for Callbacks<'_> {
    fn retrying(&mut self, notice: &RetryNotice) {
        (self.on_retry)(notice);
    }

    fn fragment(&mut self, fragment: Fragment<'_>) {
        (self.on_fragment)(fragment);
    }

    fn before_read(&mut self) {
        (self.before_read)();
    }
}

/// A sink that passes fragments to a closure and nothing else (the
/// benches' hook).
#[cfg(any(test, feature = "_bench"))]
pub(crate) struct Fragments<F>(pub(crate) F);

#[cfg(any(test, feature = "_bench"))]
impl<F: FnMut(Fragment<'_>)> Sink for Fragments<F> {
    fn fragment(&mut self, fragment: Fragment<'_>) {
        (self.0)(fragment);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callbacks_reach_their_closures_and_defaults_do_nothing() {
        let (mut retries, mut texts, mut reads) = (0, String::new(), 0);
        {
            let mut sink = Callbacks {
                on_retry: &mut |_| retries += 1,
                on_fragment: &mut |f| {
                    if let Fragment::Content(s) = f {
                        texts.push_str(s);
                    }
                },
                before_read: &mut || reads += 1,
            };
            let notice = RetryNotice {
                attempt: 1,
                error: "busy".into(),
                wait: std::time::Duration::ZERO,
            };
            let sink: &mut dyn Sink = &mut sink;
            sink.retrying(&notice);
            sink.progress();
            sink.fragment(Fragment::Content("a"));
            sink.fragment(Fragment::Content("b"));
            sink.before_read();
        }
        assert_eq!((retries, texts.as_str(), reads), (1, "ab", 1));
        let mut n = 0;
        Fragments(|_: Fragment<'_>| n += 1).fragment(Fragment::Reasoning("r"));
        assert_eq!(n, 1);
        // The unit sink takes everything and does nothing.
        ().fragment(Fragment::Content("x"));
    }
}
