//! The crate's serde impls, written by `macro_rules!` instead of serde's
//! derive: pikuri takes no proc-macro crate (`serde` without its `derive`
//! feature), so a clean build compiles no `syn` and a type's impls are
//! plain code in the crate.
//!
//! A leaf: it imports no other crate module. Three macros cover the shapes
//! the crate uses, each as serde's derive would write them for JSON:
//!
//! - [`json_struct!`] for a struct with named fields;
//! - [`json_enum!`] for an enum of unit variants, each a string;
//! - [`json_tagged!`] for an internally tagged enum (`{"type": "...", ...}`)
//!   of struct and unit variants.
//!
//! The type is declared as usual; the macro names it and lists its fields
//! (or variants) again, each with the options serde's attributes gave:
//!
//! ```ignore
//! json_struct! {
//!     Serialize, Deserialize for Message {
//!         role,                              // required ("role")
//!         content [opt],                     // absent reads None, None is not written
//!         tool_calls [default, skip_if = Vec::is_empty],
//!         kind [rename = "type"],
//!         cache [skip],                      // neither read nor written (Default)
//!     }
//! }
//! ```
//!
//! A field the list leaves out does not compile on the `Deserialize` side
//! (the struct literal misses it); each side may be asked for alone.
//!
//! Field options, as serde's attributes of the same meaning:
//!
//! | option | serde | reads | writes |
//! |---|---|---|---|
//! | (none) | | absent: an error, or `None` for an `Option` | always |
//! | `default` | `default` | absent: `Default::default()` | always |
//! | `default = path` | `default = "path"` | absent: `path()` | always |
//! | `opt` | `default, skip_serializing_if = "Option::is_none"` | absent: `None` | not when `None` |
//! | `skip_if = path` | `skip_serializing_if = "path"` | | not when `path(&field)` |
//! | `rename = "k"` | `rename = "k"` | key `k` | key `k` |
//! | `alias = "k"` (any number) | `alias = "k"` | key `k` too (twice under any of its keys: `duplicate field`, named by its own key) | |
//! | `skip` | `skip` | never (`Default::default()`) | never |
//! | `skip_ser` | `default, skip_serializing` | absent: `Default::default()` | never |
//!
//! Reading follows serde's derive: unknown keys are skipped, a key given
//! twice is an error (`duplicate field`), a key is matched without
//! allocating. A raw identifier is its bare name (`r#type` is `type`).
//!
//! # Exported for `schema_type!`
//!
//! [`schema_type!`](crate::tool::schema_type) writes a user's argument
//! types' impls with `json_struct!` and `json_enum!`, so the user's crate
//! needs no serde derive. Both (and `json_field!`, their per-field rules)
//! are therefore `#[macro_export]`ed under hidden names (`__json_struct!`,
//! ...; `json_struct!` here is an alias), every path in them starts with
//! `$crate` (serde and the helpers below through the hidden
//! `crate::__private`), and the names they give their own items and
//! generic parameters start with `__`, so that a user's type named `S`,
//! `D` or `Fields` does not collide (serde's derive does the same).
//! Two options exist for it, each what serde's derive does where the
//! crate's own types chose otherwise:
//!
//! - `json_struct! { Serialize, Deserialize for S, seq { a, b } }` also
//!   reads an array as the fields in order (fields without options);
//! - `json_enum! { Serialize, Deserialize for E, as_enum { A = "a" } }`
//!   goes through serde's enum form (`serialize_unit_variant`,
//!   `deserialize_enum`: JSON also reads `{"a": null}`), not a plain
//!   string.

use std::fmt;
use std::marker::PhantomData;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, Visitor};

/// A field's key as serde spells it: a raw identifier without its `r#`.
pub const fn key(name: &'static str) -> &'static str {
    match name.as_bytes() {
        [b'r', b'#', ..] => match std::str::from_utf8(name.as_bytes().split_at(2).1) {
            Ok(bare) => bare,
            Err(_) => name,
        },
        _ => name,
    }
}

/// Reads a map key as a field's index, by the lookup the macro writes
/// for the type (a chain of comparisons with constant strings, which the
/// compiler turns into length and word compares), without allocating. An
/// unknown key is `usize::MAX`.
#[derive(Debug)]
pub struct Keys<F>(pub F);

impl<'de, F: Fn(&str) -> usize> DeserializeSeed<'de> for Keys<F> {
    type Value = usize;
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<F: Fn(&str) -> usize> Visitor<'_> for Keys<F> {
    type Value = usize;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
        Ok((self.0)(v))
    }
    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<usize, E> {
        Ok(std::str::from_utf8(v).map_or(usize::MAX, &self.0))
    }
    // Why: a format that numbers fields (not JSON) names them by index.
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
        Ok(usize::try_from(v).unwrap_or(usize::MAX))
    }
}

/// The value of an absent field: `None` for an `Option`, else serde's
/// `missing field` error (what serde's derive does).
pub fn missing<'de, T: Deserialize<'de>, E: de::Error>(key: &'static str) -> Result<T, E> {
    T::deserialize(Missing(key, PhantomData))
}

struct Missing<E>(&'static str, PhantomData<E>);

/// Serde's `invalid length` error for an array too short for a struct:
/// `expected struct S with 2 elements`, as serde's derive words it.
pub fn too_short<E: de::Error>(name: &'static str, read: usize, len: usize) -> E {
    struct Elements(&'static str, usize);
    impl de::Expected for Elements {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let s = if self.1 == 1 { "" } else { "s" };
            write!(f, "struct {} with {} element{s}", self.0, self.1)
        }
    }
    E::invalid_length(read, &Elements(name, len))
}

/// The index of a unit variant read from an enum, by its string (or
/// its index, in a format that numbers them), as serde's derive reads it.
pub fn unit_variant<'de, A: de::EnumAccess<'de>>(
    data: A,
    variants: &'static [&'static str],
) -> Result<usize, A::Error> {
    struct Variant(&'static [&'static str]);
    impl<'de> DeserializeSeed<'de> for Variant {
        type Value = usize;
        fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<usize, D::Error> {
            deserializer.deserialize_identifier(self)
        }
    }
    impl Visitor<'_> for Variant {
        type Value = usize;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("variant identifier")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<usize, E> {
            match usize::try_from(v) {
                Ok(i) if i < self.0.len() => Ok(i),
                _ => Err(E::invalid_value(
                    de::Unexpected::Unsigned(v),
                    &format!("variant index 0 <= i < {}", self.0.len()).as_str(),
                )),
            }
        }
        fn visit_str<E: de::Error>(self, v: &str) -> Result<usize, E> {
            self.0
                .iter()
                .position(|s| *s == v)
                .ok_or_else(|| E::unknown_variant(v, self.0))
        }
        fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<usize, E> {
            self.0
                .iter()
                .position(|s| s.as_bytes() == v)
                .ok_or_else(|| E::unknown_variant(&String::from_utf8_lossy(v), self.0))
        }
    }
    let (index, variant) = data.variant_seed(Variant(variants))?;
    de::VariantAccess::unit_variant(variant)?;
    Ok(index)
}

impl<'de, E: de::Error> Deserializer<'de> for Missing<E> {
    type Error = E;
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, E> {
        Err(E::missing_field(self.0))
    }
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }
    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
}

/// The entries of an object, read whole and in order (for an internally
/// tagged enum: the tag may come after the fields), as a deserializer of
/// any lifetime, its errors the caller's.
pub(crate) fn buffered<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<(String, serde_json::Value)>, D::Error> {
    struct Entries;
    impl<'de> Visitor<'de> for Entries {
        type Value = Vec<(String, serde_json::Value)>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(0).min(64));
            while let Some(entry) = map.next_entry()? {
                entries.push(entry);
            }
            Ok(entries)
        }
    }
    deserializer.deserialize_map(Entries)
}

/// The tag of buffered entries, removed from them: absent, given twice or
/// not a string is an error, as with serde's derive.
pub(crate) fn take_tag<E: de::Error>(
    entries: &mut Vec<(String, serde_json::Value)>,
    tag: &'static str,
) -> Result<String, E> {
    let mut found = None;
    for (i, (key, _)) in entries.iter().enumerate() {
        if key == tag {
            if found.is_some() {
                return Err(E::duplicate_field(tag));
            }
            found = Some(i);
        }
    }
    let Some(i) = found else {
        return Err(E::missing_field(tag));
    };
    match entries.remove(i).1 {
        serde_json::Value::String(s) => Ok(s),
        _ => Err(E::custom(format_args!("`{tag}` is not a string"))),
    }
}

/// Buffered entries as a map to visit (what is left after the tag).
pub(crate) fn entries(
    entries: Vec<(String, serde_json::Value)>,
) -> de::value::MapDeserializer<
    'static,
    std::vec::IntoIter<(String, serde_json::Value)>,
    serde_json::Error,
> {
    de::value::MapDeserializer::new(entries.into_iter())
}

/// A serde error of one deserializer as another's.
pub(crate) fn recast<E: de::Error>(e: serde_json::Error) -> E {
    E::custom(e)
}

/// `Serialize` and/or `Deserialize` for a struct with named fields; see
/// the [module docs](self) for the field options. `seq` after the name
/// (fields without options only) also reads an array, its items the
/// fields in order, as serde's derive does.
///
/// Exported (hidden) for [`schema_type!`](crate::tool::schema_type), whose
/// expansion in the user's crate names it `$crate::__json_struct!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __json_struct {
    ($($tr:ident),+ for $name:ident<$lt:lifetime> { $($body:tt)* }) => {
        $crate::__json_struct!(@impls [$lt] [] $name { $($body)* } $($tr)+);
    };
    ($($tr:ident),+ for $name:ident, seq { $($body:tt)* }) => {
        $crate::__json_struct!(@impls [] [seq] $name { $($body)* } $($tr)+);
    };
    ($($tr:ident),+ for $name:ident { $($body:tt)* }) => {
        $crate::__json_struct!(@impls [] [] $name { $($body)* } $($tr)+);
    };
    (@impls [$($lt:lifetime)?] $seq:tt $name:ident $body:tt) => {};
    (@impls [$($lt:lifetime)?] $seq:tt $name:ident $body:tt Serialize $($rest:ident)*) => {
        $crate::__json_struct!(@ser [$($lt)?] $name $body);
        $crate::__json_struct!(@impls [$($lt)?] $seq $name $body $($rest)*);
    };
    (@impls [$($lt:lifetime)?] $seq:tt $name:ident $body:tt Deserialize $($rest:ident)*) => {
        $crate::__json_struct!(@de [$($lt)?] $seq $name $body);
        $crate::__json_struct!(@impls [$($lt)?] $seq $name $body $($rest)*);
    };

    (@ser [$($lt:lifetime)?] $name:ident { $($f:ident $([$($opt:tt)*])?),* $(,)? }) => {
        impl<$($lt)?> $crate::__private::serde::Serialize for $name<$($lt)?> {
            #[allow(unused_mut, reason = "a struct without fields")]
            fn serialize<__S: $crate::__private::serde::Serializer>(&self, serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                use $crate::__private::serde::ser::SerializeStruct as _;
                let len = 0 $(+ usize::from(!$crate::__json_field!(@skip self.$f; $($($opt)*)?)))*;
                let mut out = serializer.serialize_struct(::core::stringify!($name), len)?;
                $(
                    if !$crate::__json_field!(@skip self.$f; $($($opt)*)?) {
                        out.serialize_field($crate::__json_field!(@key $f; $($($opt)*)?), &self.$f)?;
                    }
                )*
                out.end()
            }
        }
    };

    (@de [$($lt:lifetime)?] $seq:tt $name:ident { $($f:ident $([$($opt:tt)*])?),* $(,)? }) => {
        impl<'de $(: $lt, $lt)?> $crate::__private::serde::Deserialize<'de> for $name<$($lt)?> {
            fn deserialize<__D: $crate::__private::serde::Deserializer<'de>>(deserializer: __D) -> ::core::result::Result<Self, __D::Error> {
                const FIELDS: &[&str] = &[$($crate::__json_field!(@key $f; $($($opt)*)?)),*];
                struct __Fields<$($lt)?>(::core::marker::PhantomData<$name<$($lt)?>>);
                impl<'de $(: $lt, $lt)?> $crate::__private::serde::de::Visitor<'de> for __Fields<$($lt)?> {
                    type Value = $name<$($lt)?>;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(::core::concat!("struct ", ::core::stringify!($name)))
                    }
                    #[allow(unused_mut, reason = "a struct without fields")]
                    fn visit_map<__A: $crate::__private::serde::de::MapAccess<'de>>(self, mut map: __A) -> ::core::result::Result<Self::Value, __A::Error> {
                        $crate::__json_field!(@read_map map, FIELDS, $($f $([$($opt)*])?),*);
                        ::core::result::Result::Ok($name {
                            $($f: $crate::__json_field!(@init $f; $($($opt)*)?),)*
                        })
                    }
                    $crate::__json_struct!(@seq $seq $name { $($f $([$($opt)*])?),* });
                }
                deserializer.deserialize_struct(::core::stringify!($name), FIELDS, __Fields(::core::marker::PhantomData))
            }
        }
    };

    // An array as the fields in order (`seq`): too few items is serde's
    // `invalid length` error, naming how many the struct has.
    (@seq [] $name:ident $body:tt) => {};
    (@seq [seq] $name:ident { $($f:ident),* }) => {
        #[allow(unused_mut, unused_variables, dead_code, reason = "a struct without fields")]
        fn visit_seq<__A: $crate::__private::serde::de::SeqAccess<'de>>(self, mut seq: __A) -> ::core::result::Result<Self::Value, __A::Error> {
            const LEN: usize = <[&str]>::len(&[$(::core::stringify!($f)),*]);
            let mut read = 0usize;
            $(
                let ::core::option::Option::Some($f) = seq.next_element()? else {
                    return ::core::result::Result::Err($crate::__private::too_short(::core::stringify!($name), read, LEN));
                };
                read += 1;
            )*
            let _ = read;
            ::core::result::Result::Ok($name { $($f),* })
        }
    };
}

/// The per-field pieces of [`json_struct!`] and [`json_tagged!`]: each
/// rule reads a field's option list (`[default, rename = "k"]`) for what
/// it needs and skips the rest. Exported (hidden) with `json_struct!`.
#[doc(hidden)]
#[macro_export]
macro_rules! __json_field {
    // The key.
    (@key $f:ident;) => { const { $crate::__private::key(::core::stringify!($f)) } };
    (@key $f:ident; rename = $k:literal $(, $($r:tt)*)?) => { $k };
    (@key $f:ident; $o:ident $(= $x:expr)? $(, $($r:tt)*)?) => {
        $crate::__json_field!(@key $f; $($($r)*)?)
    };

    // Whether the key is one of the field's other names (read only).
    (@alias $k:ident;) => { false };
    (@alias $k:ident; alias = $a:literal $(, $($r:tt)*)?) => {
        $k == $a || $crate::__json_field!(@alias $k; $($($r)*)?)
    };
    (@alias $k:ident; $o:ident $(= $x:expr)? $(, $($r:tt)*)?) => {
        $crate::__json_field!(@alias $k; $($($r)*)?)
    };

    // Whether the value is left out when writing.
    (@skip $v:expr;) => { false };
    (@skip $v:expr; skip $(, $($r:tt)*)?) => { true };
    (@skip $v:expr; skip_ser $(, $($r:tt)*)?) => { true };
    (@skip $v:expr; opt $(, $($r:tt)*)?) => { ::core::option::Option::is_none(&$v) };
    (@skip $v:expr; skip_if = $p:expr $(, $($r:tt)*)?) => { ($p)(&$v) };
    (@skip $v:expr; $o:ident $(= $x:expr)? $(, $($r:tt)*)?) => {
        $crate::__json_field!(@skip $v; $($($r)*)?)
    };

    // One entry of a known key: into the field's `Option` (a key twice is
    // an error), or skipped for a field never read (whose type then need
    // not be `Deserialize`).
    (@read_one $map:ident, $fields:ident, $i:ident, $f:ident;) => {
        if $f.is_some() {
            return ::core::result::Result::Err(
                <__A::Error as $crate::__private::serde::de::Error>::duplicate_field($fields[$i]),
            );
        }
        $f = ::core::option::Option::Some($map.next_value()?);
    };
    (@read_one $map:ident, $fields:ident, $i:ident, $f:ident; skip $(, $($r:tt)*)?) => {
        $map.next_value::<$crate::__private::serde::de::IgnoredAny>()?;
    };
    (@read_one $map:ident, $fields:ident, $i:ident, $f:ident; $o:ident $(= $x:expr)? $(, $($r:tt)*)?) => {
        $crate::__json_field!(@read_one $map, $fields, $i, $f; $($($r)*)?)
    };

    // The field's value from what was read (`$f`, an `Option`).
    (@init $f:ident;) => {
        match $f {
            ::core::option::Option::Some(v) => v,
            ::core::option::Option::None => $crate::__private::missing($crate::__private::key(::core::stringify!($f)))?,
        }
    };
    (@init $f:ident; $($r:tt)*) => {
        $crate::__json_field!(@init_as $f ($crate::__private::key(::core::stringify!($f))); $($r)*)
    };
    (@init_as $f:ident $k:tt; rename = $k2:literal $(, $($r:tt)*)?) => {
        $crate::__json_field!(@init_as $f $k2; $($($r)*)?)
    };
    (@init_as $f:ident $k:tt;) => {
        match $f {
            ::core::option::Option::Some(v) => v,
            ::core::option::Option::None => $crate::__private::missing($k)?,
        }
    };
    (@init_as $f:ident $k:tt; default = $p:expr $(, $($r:tt)*)?) => { $f.unwrap_or_else($p) };
    (@init_as $f:ident $k:tt; default $(, $($r:tt)*)?) => { $f.unwrap_or_default() };
    (@init_as $f:ident $k:tt; opt $(, $($r:tt)*)?) => { $f.unwrap_or_default() };
    (@init_as $f:ident $k:tt; skip $(, $($r:tt)*)?) => { $f.unwrap_or_default() };
    (@init_as $f:ident $k:tt; skip_ser $(, $($r:tt)*)?) => { $f.unwrap_or_default() };
    (@init_as $f:ident $k:tt; $o:ident $(= $x:expr)? $(, $($r:tt)*)?) => {
        $crate::__json_field!(@init_as $f $k; $($($r)*)?)
    };

    // The loop over a map's entries: each known key into its field's
    // `Option`, unknown keys skipped, a key twice an error.
    (@read_map $map:ident, $fields:ident, $($f:ident $([$($opt:tt)*])?),*) => {
        $(
            #[allow(unused_mut, reason = "a skipped field is never read")]
            let mut $f = ::core::option::Option::None;
        )*
        let lookup = |key: &str| -> usize {
            let mut index = 0usize;
            $(
                if key == $crate::__json_field!(@key $f; $($($opt)*)?)
                    || $crate::__json_field!(@alias key; $($($opt)*)?)
                {
                    return index;
                }
                index += 1;
            )*
            // Why: a type without fields reads neither.
            let _ = (key, &mut index);
            usize::MAX
        };
        while let ::core::option::Option::Some(index) =
            $map.next_key_seed($crate::__private::Keys(&lookup))?
        {
            let mut rest = index;
            $(
                if rest == 0 {
                    $crate::__json_field!(@read_one $map, $fields, index, $f; $($($opt)*)?);
                    continue;
                }
                rest -= 1;
            )*
            let _ = rest;
            $map.next_value::<$crate::__private::serde::de::IgnoredAny>()?;
        }
    };
}

/// `Serialize` and/or `Deserialize` for an enum of unit variants, each
/// written as its string: `json_enum! { Serialize, Deserialize for Role {
/// System = "system", User = "user" } }`. A variant's string is any
/// constant `&str` expression.
///
/// `as_enum` after the name reads and writes it as serde's derive does
/// instead: through the serializer's unit variant and the deserializer's
/// enum, so JSON also reads `{"user": null}`, and a wrong type's error is
/// the format's (`expected string or map`).
///
/// A doc comment and `pub fn as_str;` after the braces also give the type
/// an `as_str(self) -> &'static str` with the same strings, so a name is
/// written once for the wire and for the code that prints it.
///
/// Exported (hidden) for [`schema_type!`](crate::tool::schema_type).
#[doc(hidden)]
#[macro_export]
macro_rules! __json_enum {
    (
        $($tr:ident),+ for $name:ident { $($v:ident = $s:expr),* $(,)? }
        $(#[$m:meta])* $vis:vis fn $f:ident;
    ) => {
        $crate::__json_enum!(@impls [] $name { $($v = $s),* } $($tr)+);
        impl $name {
            $(#[$m])*
            $vis fn $f(self) -> &'static str {
                match self { $(Self::$v => $s,)* }
            }
        }
    };
    ($($tr:ident),+ for $name:ident, as_enum { $($v:ident = $s:expr),* $(,)? }) => {
        $crate::__json_enum!(@impls [as_enum] $name { $($v = $s),* } $($tr)+);
    };
    ($($tr:ident),+ for $name:ident { $($v:ident = $s:expr),* $(,)? }) => {
        $crate::__json_enum!(@impls [] $name { $($v = $s),* } $($tr)+);
    };
    (@impls $mode:tt $name:ident $body:tt) => {};
    (@impls $mode:tt $name:ident $body:tt Serialize $($rest:ident)*) => {
        $crate::__json_enum!(@ser $mode $name $body);
        $crate::__json_enum!(@impls $mode $name $body $($rest)*);
    };
    (@impls $mode:tt $name:ident $body:tt Deserialize $($rest:ident)*) => {
        $crate::__json_enum!(@de $mode $name $body);
        $crate::__json_enum!(@impls $mode $name $body $($rest)*);
    };

    (@ser [] $name:ident { $($v:ident = $s:expr),* }) => {
        impl $crate::__private::serde::Serialize for $name {
            fn serialize<__S: $crate::__private::serde::Serializer>(&self, serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                serializer.serialize_str(match self { $(Self::$v => $s,)* })
            }
        }
    };
    (@ser [as_enum] $name:ident { $($v:ident = $s:expr),* }) => {
        impl $crate::__private::serde::Serialize for $name {
            fn serialize<__S: $crate::__private::serde::Serializer>(&self, serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                // The variant's index, as serde's derive passes it.
                let mut index = 0u32;
                $(
                    if let Self::$v = self {
                        return serializer.serialize_unit_variant(::core::stringify!($name), index, $s);
                    }
                    index += 1;
                )*
                ::core::unreachable!("{index} variants, none matched")
            }
        }
    };

    (@de [] $name:ident { $($v:ident = $s:expr),* }) => {
        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<__D: $crate::__private::serde::Deserializer<'de>>(deserializer: __D) -> ::core::result::Result<Self, __D::Error> {
                const VARIANTS: &[&str] = &[$($s),*];
                struct __Variant;
                impl $crate::__private::serde::de::Visitor<'_> for __Variant {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(::core::concat!("a ", ::core::stringify!($name), " name"))
                    }
                    fn visit_str<__E: $crate::__private::serde::de::Error>(self, v: &str) -> ::core::result::Result<$name, __E> {
                        $(
                            if v == $s {
                                return ::core::result::Result::Ok($name::$v);
                            }
                        )*
                        ::core::result::Result::Err(__E::unknown_variant(v, VARIANTS))
                    }
                }
                deserializer.deserialize_str(__Variant)
            }
        }
    };
    (@de [as_enum] $name:ident { $($v:ident = $s:expr),* }) => {
        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<__D: $crate::__private::serde::Deserializer<'de>>(deserializer: __D) -> ::core::result::Result<Self, __D::Error> {
                const VARIANTS: &[&str] = &[$($s),*];
                struct __Visitor;
                impl<'de> $crate::__private::serde::de::Visitor<'de> for __Visitor {
                    type Value = $name;
                    fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                        f.write_str(::core::concat!("enum ", ::core::stringify!($name)))
                    }
                    fn visit_enum<__A: $crate::__private::serde::de::EnumAccess<'de>>(self, data: __A) -> ::core::result::Result<$name, __A::Error> {
                        let index = $crate::__private::unit_variant(data, VARIANTS)?;
                        ::core::iter::IntoIterator::into_iter([$($name::$v),*])
                            .nth(index)
                            .ok_or_else(|| <__A::Error as $crate::__private::serde::de::Error>::custom("variant index out of range"))
                    }
                }
                deserializer.deserialize_enum(::core::stringify!($name), VARIANTS, __Visitor)
            }
        }
    };
}

/// `Serialize` and/or `Deserialize` for an internally tagged enum of
/// struct and unit variants: `{"type": "user_turn", "content": ...}`.
///
/// ```ignore
/// json_tagged! {
///     Serialize, Deserialize for Event, tag = "type" {
///         UserTurn = "user_turn" { agent, content, mid_loop },
///         Done = "done" {},
///     }
/// }
/// ```
///
/// Reading buffers the object (the tag may come last) and reads the
/// variant's fields from it, so a borrowed field (`Cow`) reads owned.
/// `deny` after the tag makes an unknown key an error, as serde's
/// `deny_unknown_fields`.
macro_rules! json_tagged {
    ($($tr:ident),+ for $name:ident<$lt:lifetime>, tag = $tag:literal $(, $deny:ident)? { $($body:tt)* }) => {
        $crate::serde_macros::json_tagged!(@impls [$lt] $name $tag [$($deny)?] { $($body)* } $($tr)+);
    };
    ($($tr:ident),+ for $name:ident, tag = $tag:literal $(, $deny:ident)? { $($body:tt)* }) => {
        $crate::serde_macros::json_tagged!(@impls [] $name $tag [$($deny)?] { $($body)* } $($tr)+);
    };
    (@impls [$($lt:lifetime)?] $name:ident $tag:literal $deny:tt $body:tt) => {};
    (@impls [$($lt:lifetime)?] $name:ident $tag:literal $deny:tt $body:tt Serialize $($rest:ident)*) => {
        $crate::serde_macros::json_tagged!(@ser [$($lt)?] $name $tag $body);
        $crate::serde_macros::json_tagged!(@impls [$($lt)?] $name $tag $deny $body $($rest)*);
    };
    (@impls [$($lt:lifetime)?] $name:ident $tag:literal $deny:tt $body:tt Deserialize $($rest:ident)*) => {
        $crate::serde_macros::json_tagged!(@de [$($lt)?] [$($lt)?] $name $tag $deny $body);
        $crate::serde_macros::json_tagged!(@impls [$($lt)?] $name $tag $deny $body $($rest)*);
    };

    (@ser [$($lt:lifetime)?] $name:ident $tag:literal {
        $($v:ident = $s:literal { $($f:ident $([$($opt:tt)*])?),* $(,)? }),* $(,)?
    }) => {
        impl<$($lt)?> $crate::__private::serde::Serialize for $name<$($lt)?> {
            #[allow(unused_variables, reason = "a unit variant binds nothing")]
            fn serialize<__S: $crate::__private::serde::Serializer>(&self, serializer: __S) -> ::core::result::Result<__S::Ok, __S::Error> {
                use $crate::__private::serde::ser::SerializeStruct as _;
                match self {
                    $(
                        Self::$v { $($f),* } => {
                            let len = 1 $(+ usize::from(!$crate::__json_field!(@skip *$f; $($($opt)*)?)))*;
                            let mut out = serializer.serialize_struct(::core::stringify!($name), len)?;
                            out.serialize_field($tag, $s)?;
                            $(
                                if !$crate::__json_field!(@skip *$f; $($($opt)*)?) {
                                    out.serialize_field($crate::__json_field!(@key $f; $($($opt)*)?), $f)?;
                                }
                            )*
                            out.end()
                        }
                    )*
                }
            }
        }
    };

    (@de [$($lt:lifetime)?] $lts:tt $name:ident $tag:literal $deny:tt {
        $($v:ident = $s:literal { $($fields:tt)* }),* $(,)?
    }) => {
        impl<'de $(: $lt, $lt)?> $crate::__private::serde::Deserialize<'de> for $name<$($lt)?> {
            fn deserialize<__D: $crate::__private::serde::Deserializer<'de>>(deserializer: __D) -> ::core::result::Result<Self, __D::Error> {
                const VARIANTS: &[&str] = &[$($s),*];
                let mut object = $crate::serde_macros::buffered(deserializer)?;
                let tag = $crate::serde_macros::take_tag::<__D::Error>(&mut object, $tag)?;
                match tag.as_str() {
                    $($s => $crate::serde_macros::json_tagged!(@arm $lts $name $v $s $deny object { $($fields)* }),)*
                    other => ::core::result::Result::Err(<__D::Error as $crate::__private::serde::de::Error>::unknown_variant(other, VARIANTS)),
                }
            }
        }
    };
    // One variant's fields, read from the buffered object.
    (@arm [$($lt:lifetime)?] $name:ident $v:ident $s:literal $deny:tt $object:ident {
        $($f:ident $([$($opt:tt)*])?),* $(,)?
    }) => {{
        #[allow(dead_code, reason = "a unit variant reads no field")]
        const FIELDS: &[&str] = &[$($crate::__json_field!(@key $f; $($($opt)*)?)),*];
        struct __Fields<$($lt)?>(::core::marker::PhantomData<$name<$($lt)?>>);
        impl<'de $(: $lt, $lt)?> $crate::__private::serde::de::Visitor<'de> for __Fields<$($lt)?> {
            type Value = $name<$($lt)?>;
            fn expecting(&self, f: &mut ::core::fmt::Formatter<'_>) -> ::core::fmt::Result {
                f.write_str(::core::concat!("variant ", $s))
            }
            #[allow(unused_mut, reason = "a unit variant reads no field")]
            fn visit_map<__A: $crate::__private::serde::de::MapAccess<'de>>(self, mut map: __A) -> ::core::result::Result<Self::Value, __A::Error> {
                $crate::__json_field!(@read_map map, FIELDS, $($f $([$($opt)*])?),*);
                ::core::result::Result::Ok($name::$v {
                    $($f: $crate::__json_field!(@init $f; $($($opt)*)?),)*
                })
            }
        }
        $crate::serde_macros::json_tagged!(@deny $deny $object, FIELDS);
        let mut access = $crate::serde_macros::entries($object);
        $crate::__private::serde::de::Visitor::visit_map(__Fields(::core::marker::PhantomData), &mut access)
            .and_then(|value| access.end().map(|()| value))
            .map_err($crate::serde_macros::recast::<__D::Error>)
    }};
    (@deny [] $object:ident, $fields:ident) => {};
    (@deny [deny] $object:ident, $fields:ident) => {
        if let ::core::option::Option::Some((unknown, _)) =
            $object.iter().find(|(k, _)| !$fields.contains(&k.as_str()))
        {
            return ::core::result::Result::Err(
                <__D::Error as $crate::__private::serde::de::Error>::unknown_field(unknown, $fields),
            );
        }
    };
}

pub(crate) use json_tagged;
pub(crate) use {crate::__json_enum as json_enum, crate::__json_struct as json_struct};

#[cfg(test)]
mod tests {
    #![allow(unused_imports, reason = "the macros are used through their paths too")]
    use std::borrow::Cow;

    use serde_json::json;

    use super::{json_enum, json_struct, json_tagged};

    #[derive(Debug, Default, PartialEq)]
    struct All {
        plain: u32,
        maybe: Option<u32>,
        opt: Option<String>,
        list: Vec<u8>,
        r#type: String,
        renamed: bool,
        fallback: u32,
        never: u8,
        read_only: bool,
    }

    fn seven() -> u32 {
        7
    }

    json_struct! {
        Serialize, Deserialize for All {
            plain,
            maybe,
            opt [opt],
            list [default, skip_if = Vec::is_empty],
            r#type,
            renamed [rename = "other"],
            fallback [default = seven],
            never [skip],
            read_only [skip_ser],
        }
    }

    #[test]
    fn a_struct_reads_and_writes_as_serde_derive_would() {
        let all = All {
            plain: 1,
            maybe: None,
            opt: Some("o".into()),
            list: vec![],
            r#type: "t".into(),
            renamed: true,
            fallback: 2,
            never: 9,
            read_only: true,
        };
        assert_eq!(
            serde_json::to_value(&all).unwrap(),
            json!({"plain": 1, "maybe": null, "opt": "o", "type": "t", "other": true, "fallback": 2})
        );
        let back: All = serde_json::from_value(json!({
            "plain": 1, "type": "t", "other": true, "unknown": [1, {"x": 2}], "never": 5, "read_only": true
        }))
        .unwrap();
        assert_eq!(
            back,
            All {
                plain: 1,
                r#type: "t".into(),
                renamed: true,
                fallback: 7,
                read_only: true,
                ..All::default()
            }
        );
    }

    #[test]
    fn a_missing_field_and_a_duplicate_key_are_errors() {
        let missing = serde_json::from_str::<All>(r#"{"type": "t", "other": true}"#).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "missing field `plain` at line 1 column 28"
        );
        let twice =
            serde_json::from_str::<All>(r#"{"plain": 1, "plain": 2, "type": "t"}"#).unwrap_err();
        assert!(
            twice.to_string().starts_with("duplicate field `plain`"),
            "{twice}"
        );
        let wrong = serde_json::from_str::<All>("[1]").unwrap_err();
        assert!(wrong.to_string().contains("expected struct All"), "{wrong}");
    }

    struct Borrowed<'a> {
        text: &'a str,
        owned: Option<Cow<'a, str>>,
    }

    json_struct! { Deserialize for Borrowed<'a> { text, owned } }

    #[test]
    fn a_borrowed_field_borrows_from_the_input() {
        let input = r#"{"text": "plain"}"#.to_string();
        let b: Borrowed<'_> = serde_json::from_str(&input).unwrap();
        assert_eq!(b.text, "plain");
        assert!(b.owned.is_none());
        // An escaped key still matches (serde_json hands it over owned).
        let b: Borrowed<'_> =
            serde_json::from_str(r#"{"te\u0078t": "x", "owned": "a\nb"}"#).unwrap();
        assert_eq!((b.text, b.owned.as_deref()), ("x", Some("a\nb")));
    }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Color {
        Red,
        DarkBlue,
    }

    json_enum! { Serialize, Deserialize for Color { Red = "red", DarkBlue = "dark_blue" } }

    #[test]
    fn a_unit_enum_is_its_string() {
        assert_eq!(
            serde_json::to_string(&Color::DarkBlue).unwrap(),
            r#""dark_blue""#
        );
        assert_eq!(
            serde_json::from_str::<Color>(r#""red""#).unwrap(),
            Color::Red
        );
        let e = serde_json::from_str::<Color>(r#""green""#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown variant `green`, expected `red` or `dark_blue`"),
            "{e}"
        );
    }

    #[derive(Debug, PartialEq)]
    enum Shape {
        Circle { radius: u32, label: Option<String> },
        Dot {},
        Pinned { at: Color },
    }

    json_tagged! {
        Serialize, Deserialize for Shape, tag = "kind", deny {
            Circle = "circle" { radius, label [opt] },
            Dot = "dot" {},
            Pinned = "pinned" { at },
        }
    }

    #[test]
    fn a_tagged_enum_puts_its_tag_first_and_reads_it_anywhere() {
        let c = Shape::Circle {
            radius: 2,
            label: None,
        };
        assert_eq!(
            serde_json::to_string(&c).unwrap(),
            r#"{"kind":"circle","radius":2}"#
        );
        assert_eq!(
            serde_json::to_string(&Shape::Dot {}).unwrap(),
            r#"{"kind":"dot"}"#
        );
        let back: Shape = serde_json::from_str(r#"{"radius": 2, "kind": "circle"}"#).unwrap();
        assert_eq!(back, c);
        let p: Shape = serde_json::from_str(r#"{"kind": "pinned", "at": "red"}"#).unwrap();
        assert_eq!(p, Shape::Pinned { at: Color::Red });
        assert_eq!(
            serde_json::from_str::<Shape>(r#"{"kind":"dot"}"#).unwrap(),
            Shape::Dot {}
        );
    }

    #[test]
    fn a_tagged_enum_refuses_what_serde_derive_refuses() {
        let unknown = serde_json::from_str::<Shape>(r#"{"kind": "square"}"#).unwrap_err();
        assert!(
            unknown.to_string().starts_with("unknown variant `square`"),
            "{unknown}"
        );
        let untagged = serde_json::from_str::<Shape>(r#"{"radius": 2}"#).unwrap_err();
        assert!(
            untagged.to_string().starts_with("missing field `kind`"),
            "{untagged}"
        );
        let extra = serde_json::from_str::<Shape>(r#"{"kind": "pinned", "at": "red", "x": 1}"#)
            .unwrap_err();
        assert!(
            extra.to_string().starts_with("unknown field `x`"),
            "{extra}"
        );
        let missing = serde_json::from_str::<Shape>(r#"{"kind": "pinned"}"#).unwrap_err();
        assert!(
            missing.to_string().starts_with("missing field `at`"),
            "{missing}"
        );
    }

    #[test]
    fn a_tagged_enum_refuses_a_key_twice_and_names_the_first_unknown_key() {
        let field =
            serde_json::from_str::<Shape>(r#"{"kind": "pinned", "at": "red", "at": "red"}"#)
                .unwrap_err();
        assert!(
            field.to_string().starts_with("duplicate field `at`"),
            "{field}"
        );
        let tag = serde_json::from_str::<Shape>(r#"{"kind": "dot", "kind": "dot"}"#).unwrap_err();
        assert!(
            tag.to_string().starts_with("duplicate field `kind`"),
            "{tag}"
        );
        let first =
            serde_json::from_str::<Shape>(r#"{"kind": "dot", "z": 1, "a": 2}"#).unwrap_err();
        assert!(
            first.to_string().starts_with("unknown field `z`"),
            "{first}"
        );
    }

    #[derive(Debug, PartialEq)]
    struct Pair {
        a: u8,
        b: Option<u8>,
    }

    json_struct! { Serialize, Deserialize for Pair, seq { a, b } }

    #[derive(Clone, Copy, Debug, PartialEq)]
    enum Dir {
        Up,
        Down,
    }

    // A variant's string as any constant expression (what schema_type!
    // passes for a variant without `= "..."`).
    json_enum! { Serialize, Deserialize for Dir, as_enum { Up = "up", Down = super::key("r#Down") } }

    #[test]
    fn seq_also_reads_an_array_and_without_it_an_array_is_refused() {
        let p: Pair = serde_json::from_str("[1, 2]").unwrap();
        assert_eq!(p, Pair { a: 1, b: Some(2) });
        let p: Pair = serde_json::from_str(r#"{"a": 1}"#).unwrap();
        assert_eq!(p, Pair { a: 1, b: None });
        let short = serde_json::from_str::<Pair>("[1]").unwrap_err();
        assert_eq!(
            short.to_string(),
            "invalid length 1, expected struct Pair with 2 elements at line 1 column 3"
        );
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"a":1,"b":null}"#);
        // The crate's own types keep refusing arrays.
        let all = serde_json::from_str::<All>("[1]").unwrap_err();
        assert!(
            all.to_string().starts_with("invalid type: sequence"),
            "{all}"
        );
    }

    #[test]
    fn the_fn_form_names_each_variant_as_the_wire_does() {
        #[derive(Clone, Copy, Debug, PartialEq)]
        enum Speed {
            Slow,
            Fast,
        }
        json_enum! {
            Serialize, Deserialize for Speed { Slow = "slow", Fast = "very_fast" }
            /// The name.
            fn label;
        }
        for speed in [Speed::Slow, Speed::Fast] {
            assert_eq!(serde_json::to_value(speed).unwrap(), json!(speed.label()));
            let back: Speed = serde_json::from_value(json!(speed.label())).unwrap();
            assert_eq!(back, speed);
        }
        assert_eq!(Speed::Fast.label(), "very_fast");
    }

    #[test]
    fn as_enum_goes_through_serdes_enum_form_and_the_plain_form_does_not() {
        assert_eq!(serde_json::to_string(&Dir::Down).unwrap(), r#""Down""#);
        assert_eq!(serde_json::from_str::<Dir>(r#""up""#).unwrap(), Dir::Up);
        assert_eq!(
            serde_json::from_str::<Dir>(r#"{"Down": null}"#).unwrap(),
            Dir::Down
        );
        let e = serde_json::from_str::<Dir>(r#"{"Down": 1}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid type: integer `1`, expected unit"),
            "{e}"
        );
        let e = serde_json::from_str::<Dir>("[]").unwrap_err();
        assert!(e.to_string().starts_with("expected value"), "{e}");
        // A plain json_enum! is a string only.
        let e = serde_json::from_str::<Color>(r#"{"red": null}"#).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("invalid type: map, expected a Color name"),
            "{e}"
        );
    }

    /// Not `Deserialize`: a skipped field's type need not be.
    #[derive(Default)]
    struct Opaque;

    struct WithSkipped {
        name: String,
        cache: Opaque,
    }

    json_struct! { Deserialize for WithSkipped { name, cache [skip] } }

    #[test]
    fn a_skipped_field_needs_no_deserialize_and_its_key_is_ignored() {
        let w: WithSkipped = serde_json::from_str(r#"{"name": "n", "cache": 1}"#).unwrap();
        assert_eq!(w.name, "n");
        let Opaque = w.cache;
    }
}
