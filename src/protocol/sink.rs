//! [`Sink`]: what one chat request reports while it runs, gathered in one
//! implementor instead of closures passed side by side (the shape of
//! grep-searcher's `Sink`).
//!
//! The push model: [`Client::chat`](super::Client::chat) calls the sink on
//! the thread that called it, in the order things happen: `retrying` before
//! each retry's wait, then, while the answer streams, `progress` after each
//! event that carried part of the answer, `fragment` for each piece of
//! text, reasoning or usage (a stream's text joined per read, see
//! [`Joined`]), and `before_read` when what was read is decoded and the
//! next read may wait for the network. Every method has a
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

/// Text a [`Joined`] sink holds before it passes it on, whatever the
/// reads: a stream's text is joined per read (at most the reader's buffer,
/// 8 KiB in the client), and one longer fragment passes through as is.
const JOIN_MAX: usize = 8 * 1024;

/// A sink that joins the text fragments of one read before they reach the
/// inner sink: consecutive fragments of one kind (content, reasoning)
/// become one, passed on before a fragment of another kind, before
/// `before_read`, at [`JOIN_MAX`] bytes, and at [`finish`](Self::finish).
/// So the order of what the inner sink hears is the order of the stream,
/// nothing is held while the next read may wait, and the inner sink runs
/// once per read instead of once per delta (a stream's text arrives in
/// deltas of a few bytes; `BENCHMARKS.md`, issue 42, session 15).
///
/// With a secret ([`redacting`](Self::redacting): the API key), the text
/// passed on has it replaced by `<redacted>`, a server that echoes the key
/// in its answer included; the one exception to "nothing is held" is the
/// end of a read that could be the start of the key (at most its length
/// less one character), held until the next text or the end, so that a key
/// split over two reads is caught too.
pub(crate) struct Joined<'s> {
    inner: &'s mut dyn Sink,
    /// Whether `text` is reasoning, else content.
    reasoning: bool,
    /// Text not passed on yet, of one kind; its capacity is kept.
    text: String,
    /// What never reaches the inner sink (trimmed, non-empty).
    secret: Option<&'s str>,
}

impl<'s> Joined<'s> {
    pub(crate) fn new(inner: &'s mut dyn Sink) -> Joined<'s> {
        Joined {
            inner,
            reasoning: false,
            text: String::new(),
            secret: None,
        }
    }

    /// The same sink, with `secret` redacted from the text it passes on.
    pub(crate) fn redacting(mut self, secret: Option<&'s str>) -> Joined<'s> {
        self.secret = secret.map(str::trim).filter(|s| !s.is_empty());
        self
    }

    /// Pass on all the text held, if any (the end of the stream, or of
    /// one kind of text).
    pub(crate) fn finish(&mut self) {
        self.pass_on(true);
    }

    /// Pass on the text held, but for a tail that may begin the secret
    /// unless `last`.
    fn pass_on(&mut self, last: bool) {
        if self.text.is_empty() {
            return;
        }
        let Some(secret) = self.secret else {
            emit(self.inner, self.reasoning, &self.text);
            self.text.clear();
            return;
        };
        // Copied only when the key is in it (an echo): the common read
        // is passed on from `text` itself.
        crate::util::redact_in(&mut self.text, Some(secret));
        let keep = if last {
            0
        } else {
            secret_start(&self.text, secret)
        };
        let cut = self.text.len() - keep;
        if cut > 0 {
            emit(self.inner, self.reasoning, &self.text[..cut]);
        }
        self.text.drain(..cut);
    }

    fn text(&mut self, reasoning: bool, s: &str) {
        if reasoning != self.reasoning {
            // A key split over two kinds of text is no key.
            self.pass_on(true);
            self.reasoning = reasoning;
        } else if self.text.len() + s.len() > JOIN_MAX {
            self.pass_on(false);
        }
        if s.len() >= JOIN_MAX && self.secret.is_none() {
            // Long already: passed on without a copy.
            self.inner.fragment(if reasoning {
                Fragment::Reasoning(s)
            } else {
                Fragment::Content(s)
            });
        } else {
            self.text.push_str(s);
            if self.secret.is_some() && self.text.len() >= JOIN_MAX {
                self.pass_on(false);
            }
        }
    }
}

/// Pass `text` on to `inner` as reasoning or content.
fn emit(inner: &mut dyn Sink, reasoning: bool, text: &str) {
    inner.fragment(if reasoning {
        Fragment::Reasoning(text)
    } else {
        Fragment::Content(text)
    });
}

/// The length of the longest end of `text` that is a proper start of
/// `secret` (0 when none): what may continue into the key in the next
/// read.
fn secret_start(text: &str, secret: &str) -> usize {
    let most = text.len().min(secret.len() - 1);
    (1..=most)
        .rev()
        .find(|&k| secret.is_char_boundary(k) && text.ends_with(&secret[..k]))
        .unwrap_or(0)
}

impl Sink for Joined<'_> {
    fn retrying(&mut self, notice: &RetryNotice) {
        self.pass_on(false);
        self.inner.retrying(notice);
    }

    fn progress(&mut self) {
        self.inner.progress();
    }

    fn fragment(&mut self, fragment: Fragment<'_>) {
        match fragment {
            Fragment::Content(s) => self.text(false, s),
            Fragment::Reasoning(s) => self.text(true, s),
            Fragment::Usage(_) => {
                self.pass_on(false);
                self.inner.fragment(fragment);
            }
        }
    }

    fn before_read(&mut self) {
        self.pass_on(false);
        self.inner.before_read();
    }
}

/// A sink that notes whether any text (content or reasoning) passed
/// through it: an answer that failed before any reached the listeners can
/// be asked again, as a failed status is (see `Client::chat`).
pub(crate) struct Noting<'s> {
    inner: &'s mut dyn Sink,
    /// Whether text passed.
    pub(crate) heard: bool,
}

impl<'s> Noting<'s> {
    pub(crate) fn new(inner: &'s mut dyn Sink) -> Noting<'s> {
        Noting {
            inner,
            heard: false,
        }
    }
}

impl Sink for Noting<'_> {
    fn retrying(&mut self, notice: &RetryNotice) {
        self.inner.retrying(notice);
    }

    fn progress(&mut self) {
        self.inner.progress();
    }

    fn fragment(&mut self, fragment: Fragment<'_>) {
        if matches!(fragment, Fragment::Content(_) | Fragment::Reasoning(_)) {
            self.heard = true;
        }
        self.inner.fragment(fragment);
    }

    fn before_read(&mut self) {
        self.inner.before_read();
    }
}

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

    /// What a sink heard, in order: `c:`/`r:` text, `u` usage, `|` a
    /// read, `p` progress, `!` a retry.
    #[derive(Default)]
    struct Heard(Vec<String>);

    impl Sink for Heard {
        fn retrying(&mut self, _: &RetryNotice) {
            self.0.push("!".into());
        }
        fn progress(&mut self) {
            self.0.push("p".into());
        }
        fn fragment(&mut self, fragment: Fragment<'_>) {
            self.0.push(match fragment {
                Fragment::Content(s) => format!("c:{s}"),
                Fragment::Reasoning(s) => format!("r:{s}"),
                Fragment::Usage(_) => "u".into(),
            });
        }
        fn before_read(&mut self) {
            self.0.push("|".into());
        }
    }

    #[test]
    fn joined_text_keeps_the_order_of_kinds_reads_and_usage() {
        let mut heard = Heard::default();
        {
            let mut sink = Joined::new(&mut heard);
            for f in ["a", "b"] {
                sink.fragment(Fragment::Reasoning(f));
            }
            sink.progress();
            for f in ["c", "d", ""] {
                sink.fragment(Fragment::Content(f));
            }
            sink.fragment(Fragment::Usage(crate::Usage::default()));
            sink.fragment(Fragment::Content("e"));
            sink.before_read();
            sink.fragment(Fragment::Content("f"));
            sink.fragment(Fragment::Reasoning("g"));
            sink.retrying(&RetryNotice {
                attempt: 1,
                error: "busy".into(),
                wait: std::time::Duration::ZERO,
            });
            sink.fragment(Fragment::Content("h"));
            sink.finish();
            // Nothing held: a second finish passes nothing on.
            sink.finish();
        }
        assert_eq!(
            heard.0,
            [
                "p", "r:ab", "c:cd", "u", "c:e", "|", "c:f", "r:g", "!", "c:h"
            ]
        );
    }

    #[test]
    fn joined_text_is_bounded_and_a_long_fragment_passes_through() {
        let mut heard = Heard::default();
        let long = "x".repeat(JOIN_MAX);
        {
            let mut sink = Joined::new(&mut heard);
            // 3-byte deltas past the bound: passed on before it is crossed.
            let delta = "abc";
            let n = JOIN_MAX / delta.len() + 1;
            for _ in 0..n {
                sink.fragment(Fragment::Content(delta));
                assert!(sink.text.len() <= JOIN_MAX, "held text stays bounded");
            }
            sink.fragment(Fragment::Content(&long));
            sink.fragment(Fragment::Content("y"));
            sink.finish();
        }
        let lens: Vec<usize> = heard.0.iter().map(|h| h.len() - 2).collect();
        let first = JOIN_MAX / 3 * 3;
        let rest = (JOIN_MAX / 3 + 1) * 3 - first;
        assert_eq!(lens, [first, rest, JOIN_MAX, 1]);
    }

    #[test]
    fn a_secret_never_passes_whole_or_split_over_reads() {
        const KEY: &str = "sk-abcdef";
        let mut heard = Heard::default();
        {
            let mut sink = Joined::new(&mut heard).redacting(Some(" sk-abcdef "));
            // Whole in one delta.
            sink.fragment(Fragment::Content("a sk-abcdef b"));
            sink.before_read();
            // Split over three reads: the start is held, not passed on.
            for part in ["x sk", "-abc", "def y"] {
                sink.fragment(Fragment::Content(part));
                sink.before_read();
            }
            // A start of the key that never goes on is released by the
            // next text of another kind, and at the end.
            sink.fragment(Fragment::Content("z sk-ab"));
            sink.before_read();
            sink.fragment(Fragment::Reasoning("r sk-"));
            sink.before_read();
            sink.finish();
        }
        let all = heard.0.join("");
        assert!(!all.contains(KEY), "{all}");
        assert_eq!(
            heard.0,
            [
                "c:a <redacted> b",
                "|",
                "c:x ",
                "|",
                "|",
                "c:<redacted> y",
                "|",
                "c:z ",
                "|",
                "c:sk-ab",
                "r:r ",
                "|",
                "r:sk-"
            ]
        );
        // A held tail stays shorter than the key, whatever the reads.
        assert_eq!(secret_start("ab sk-abcde", KEY), 8);
        assert_eq!(secret_start("ab", KEY), 0);
        assert_eq!(secret_start("s", KEY), 1);
        assert_eq!(
            secret_start("sk-abcdef", KEY),
            0,
            "a whole key is redacted first"
        );
    }
}
