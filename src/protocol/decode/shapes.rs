//! The JSON shapes of chunks and responses: every member is optional,
//! unknown members are ignored, strings are borrowed from the input when
//! they have no escapes (no allocation per delta for plain text).

use std::borrow::Cow;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, Visitor};

use crate::Usage;
use crate::protocol::rules::json_text;

/// A chunk of a streamed completion, or a whole response: one shape for
/// both, so that serde compiles one deserializer (the binary carries each
/// shape's code once, see BENCHMARKS.md, "the small CLI").
pub(super) struct Body<'a> {
    pub(super) id: Option<Str<'a>>,
    pub(super) model: Option<Str<'a>>,
    pub(super) choices: Option<Vec<Choice<'a>>>,
    /// Boxed: usually absent, and large enough to slow every chunk down.
    pub(super) usage: Option<Box<WireUsage>>,
    pub(super) error: Option<serde_json::Value>,
}

crate::serde_macros::json_struct! { Deserialize for Body<'a> { id, model, choices, usage, error } }

/// A choice of a chunk (its `delta`) or of a response (its `message`).
/// Each reader reads its own member and ignores the other, as an unknown
/// member would be.
pub(super) struct Choice<'a> {
    pub(super) index: Option<u64>,
    pub(super) delta: Option<Delta<'a>>,
    /// Boxed: a chunk never has one, and every chunk moves this struct.
    pub(super) message: Option<Box<Delta<'a>>>,
    pub(super) finish_reason: Option<Str<'a>>,
}

crate::serde_macros::json_struct! { Deserialize for Choice<'a> { index, delta, message, finish_reason } }

/// A streamed delta, or a whole response's message.
pub(super) struct Delta<'a> {
    pub(super) content: Option<Str<'a>>,
    pub(super) reasoning_content: Option<Str<'a>>,
    /// Lenient: some servers put an object here.
    pub(super) reasoning: Option<MaybeStr<'a>>,
    pub(super) tool_calls: Option<Vec<CallDelta<'a>>>,
    /// OpenRouter's reasoning blocks: only noted here (skipped as an
    /// unknown member would be), read in a second pass ([`OpaqueBody`]).
    pub(super) reasoning_details: Option<Seen>,
    /// Gemini's provider fields on the message: as `reasoning_details`.
    pub(super) extra_content: Option<Seen>,
}

crate::serde_macros::json_struct! { Deserialize for Delta<'a> { content, reasoning_content, reasoning, tool_calls, reasoning_details, extra_content } }

pub(super) struct CallDelta<'a> {
    pub(super) index: Option<u64>,
    pub(super) id: Option<Str<'a>>,
    pub(super) function: Option<FunctionDelta<'a>>,
    /// Gemini's provider fields on a call: noted, read in a second pass.
    pub(super) extra_content: Option<Seen>,
}

crate::serde_macros::json_struct! { Deserialize for CallDelta<'a> { index, id, function, extra_content } }

pub(super) struct FunctionDelta<'a> {
    pub(super) name: Option<Str<'a>>,
    pub(super) arguments: Option<Args<'a>>,
}

crate::serde_macros::json_struct! { Deserialize for FunctionDelta<'a> { name, arguments } }

pub(super) struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    prompt_tokens_details: Option<PromptDetails>,
    completion_tokens_details: Option<CompletionDetails>,
    /// Anthropic's name, at the top level.
    cache_creation_input_tokens: Option<u64>,
}

crate::serde_macros::json_struct! { Deserialize for WireUsage { prompt_tokens, completion_tokens, prompt_tokens_details, completion_tokens_details, cache_creation_input_tokens } }

#[allow(clippy::struct_field_names, reason = "the wire's names")]
struct PromptDetails {
    cached_tokens: Option<u64>,
    cache_creation_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    /// OpenRouter's name.
    cache_write_tokens: Option<u64>,
}

crate::serde_macros::json_struct! { Deserialize for PromptDetails { cached_tokens, cache_creation_tokens, cache_creation_input_tokens, cache_write_tokens } }

struct CompletionDetails {
    reasoning_tokens: Option<u64>,
}

crate::serde_macros::json_struct! { Deserialize for CompletionDetails { reasoning_tokens } }

impl WireUsage {
    /// Split OpenAI's `prompt_tokens` (which include cache reads and writes)
    /// into pikuri's exclusive `input` / `cached` / `cache_creation`.
    pub(super) fn to_usage(&self) -> Usage {
        let details = self.prompt_tokens_details.as_ref();
        let cached = details.and_then(|d| d.cached_tokens);
        let cache_creation = details
            .and_then(|d| {
                d.cache_creation_tokens
                    .or(d.cache_creation_input_tokens)
                    .or(d.cache_write_tokens)
            })
            .or(self.cache_creation_input_tokens);
        let input = self.prompt_tokens.map(|p| {
            p.saturating_sub(cached.unwrap_or(0))
                .saturating_sub(cache_creation.unwrap_or(0))
        });
        let thinking = self
            .completion_tokens_details
            .as_ref()
            .and_then(|d| d.reasoning_tokens);
        Usage::from_parts(
            input,
            self.completion_tokens,
            cached,
            cache_creation,
            thinking,
        )
    }
}

/// A JSON string, borrowed from the input when it has no escapes. The
/// other formats' shapes read their strings as this too: serde borrows a
/// bare `Cow<str>` only, never one in an `Option`.
pub(crate) struct Str<'a>(pub(crate) Cow<'a, str>);

impl std::ops::Deref for Str<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Str<'_> {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct StrVisitor;
        impl<'de> Visitor<'de> for StrVisitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            // A string with escapes (`\n`, `\"`) cannot be borrowed from
            // the input: unescaped, it is copied once.
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
        }
        deserializer.deserialize_str(StrVisitor).map(Str)
    }
}

/// A string, or `None` for any other JSON value.
pub(super) struct MaybeStr<'a>(pub(super) Option<Cow<'a, str>>);

impl<'de: 'a, 'a> Deserialize<'de> for MaybeStr<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct MaybeStrVisitor;
        impl<'de> Visitor<'de> for MaybeStrVisitor {
            type Value = Option<Cow<'de, str>>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("any value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Borrowed(v)))
            }
            // A string with escapes cannot be borrowed: copied.
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Some(Cow::Owned(v)))
            }
            fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_unit<E>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(None)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(None)
            }
        }
        deserializer.deserialize_any(MaybeStrVisitor).map(MaybeStr)
    }
}

/// Tool-call arguments: a JSON text in a string (the standard), or a JSON
/// value sent as is (some servers), serialized back to text.
pub(super) struct Args<'a>(pub(super) Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Args<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ArgsVisitor;
        impl<'de> Visitor<'de> for ArgsVisitor {
            type Value = Cow<'de, str>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON text or a JSON value")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Cow::Borrowed(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v))
            }
            fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(v.to_string()))
            }
            // Through `Value`, so the text is JSON's spelling of the number.
            fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
                Ok(Cow::Owned(json_text(&serde_json::Value::from(v))))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(Cow::Owned(json_text(&value)))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(Cow::Owned(json_text(&value)))
            }
        }
        deserializer.deserialize_any(ArgsVisitor).map(Args)
    }
}

/// A member that was there, its value skipped unread (as serde skips an
/// unknown member): `null` counts as absent.
pub(super) struct Seen;

impl<'de> Deserialize<'de> for Seen {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        IgnoredAny::deserialize(deserializer).map(|_| Seen)
    }
}

impl Delta<'_> {
    /// Whether the delta carries provider fields (on itself or a call).
    pub(super) fn has_opaque(&self) -> bool {
        self.reasoning_details.is_some()
            || self.extra_content.is_some()
            || self
                .tool_calls
                .iter()
                .flatten()
                .any(|c| c.extra_content.is_some())
    }
}

/// The provider fields of choice 0's delta (or message), read in a second
/// pass, only from a text whose first reading [`Seen`] one of them: the
/// shapes above, read for every delta, stay as small and fast as they were
/// (most streams never carry these). A plain [`Value`](serde_json::Value)
/// rather than shapes of its own: this rare path needs no speed, and each
/// derived shape is code in every binary (see BENCHMARKS.md, "the small
/// CLI").
pub(super) struct OpaqueDelta(pub(super) serde_json::Value);

impl OpaqueDelta {
    /// OpenRouter's reasoning blocks (a list; in a stream, each delta's
    /// list continues the last).
    pub(super) fn reasoning_details(&self) -> Option<&serde_json::Value> {
        self.0.get("reasoning_details")
    }

    /// Gemini's provider fields on the message.
    pub(super) fn extra_content(&self) -> Option<&serde_json::Value> {
        self.0.get("extra_content")
    }

    /// The `extra_content` of the `i`-th tool call (`google.thought_signature`),
    /// in the order of the delta's (or message's) `tool_calls`.
    pub(super) fn call_extra(&self, i: usize) -> Option<&serde_json::Value> {
        self.0.get("tool_calls")?.get(i)?.get("extra_content")
    }
}
