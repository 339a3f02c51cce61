//! Schemas from Rust types: the [`JsonSchema`] trait, its impls for std
//! types, and the [`schema_type!`](crate::tool::schema_type) macro.
//!
//! The design and its limitations are documented on [`JsonSchema`], the
//! public home of this mechanism.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;

use serde_json::{Value, json};

/// A Rust type whose values the model can send: it knows its JSON Schema.
///
/// Implemented for `bool`, the integers (with their natural bounds), `f32`,
/// `f64`, `String`, `Option<T>` (nullable), `Vec<T>`, arrays `[T; N]`,
/// `Box`/`Rc`/`Arc<T>`, maps with `String` keys, and [`Value`] (any JSON).
/// Declare your own argument types with [`schema_type!`](crate::tool::schema_type),
/// or implement it by hand.
///
/// # Examples
///
/// ```
/// use pikuri::tool::JsonSchema;
/// use serde_json::json;
/// assert_eq!(u8::json_schema(), json!({"type": "integer", "minimum": 0, "maximum": 255}));
/// assert_eq!(Option::<String>::json_schema(), json!({"type": ["string", "null"]}));
/// assert_eq!(
///     Vec::<bool>::json_schema(),
///     json!({"type": "array", "items": {"type": "boolean"}})
/// );
/// ```
///
/// By hand:
///
/// ```
/// use pikuri::tool::{JsonSchema, Parameters};
/// use serde_json::{Value, json};
///
/// #[derive(serde::Deserialize)]
/// struct Search { query: String }
///
/// impl JsonSchema for Search {
///     fn json_schema() -> Value {
///         json!({
///             "type": "object",
///             "properties": {"query": String::json_schema()},
///             "required": ["query"],
///             "additionalProperties": false
///         })
///     }
/// }
/// assert!(Parameters::for_type::<Search>().validate(&json!({"query": "x"})).is_ok());
/// ```
/// # Design
///
/// rig and pydantic-ai derive a schema from a type with a procedural macro
/// (`schemars`, pydantic). pikuri takes no proc-macro dependency, so:
///
/// - **A trait of our own, returning a `Value`.** [`JsonSchema::json_schema`]
///   returns the schema as plain JSON, the one external type pikuri's API
///   allows. Implementing it by hand is one `json!` literal, and no schema
///   type of ours becomes a semver promise. `schemars` would be a
///   dependency (and its own proc macro) for what is a few dozen lines here.
/// - **Strict-mode schemas by construction.** Every generated object has
///   `"additionalProperties": false` and lists every field in `required`;
///   an `Option<T>` field is required but nullable (`"type": [T, "null"]`),
///   which is how OpenAI's strict mode spells "optional". Validation
///   forgives a model that leaves such a field out, and serde reads it as
///   `None`. Integers carry their natural bounds (`u8`: 0 to 255), so a
///   model that sends 300 is told why instead of getting a serde error.
/// - **A `macro_rules!` macro instead of a derive.** [`schema_type!`](crate::tool::schema_type)
///   declares the struct (or string enum) and implements [`JsonSchema`] in
///   one place, so fields and schema cannot drift apart; `///` comments on
///   the type and fields become `description`s.
/// - **serde's traits without serde's derive.** The macro also writes the
///   type's `Serialize` and `Deserialize` impls, through the `macro_rules!`
///   macros that write pikuri's own (its crate-private `serde_macros`
///   module, exported under hidden names), so **the crate that uses it
///   needs neither `serde` nor `serde_json` as a dependency**, and its
///   build compiles no proc macro (`serde_derive`, `syn`, `quote`,
///   `proc-macro2`) for its argument types. The impls read and write
///   what serde's derive would for the same declaration (field names,
///   absent `Option` fields as `None`, unknown keys skipped, a key twice
///   refused, serde's error messages, an array as the fields in order,
///   the enum forms), which tests pin. The expansion names serde through
///   a hidden `pikuri::__private` module, not part of the API: no path of
///   it is promised, and the user's code never names it. Emitting serde's
///   derive instead (as the macro first did) made every typed tool's
///   crate depend on `serde` with `derive` and on `serde_json` by name;
///   a `Deserialize` through `Value` would lose serde's field types, error
///   messages and speed.
///
/// # Limitations
///
/// - The macro takes plain structs with named fields and enums of unit
///   variants (sent as strings), without generics. Field attributes other
///   than doc comments pass through to the struct; `#[serde(...)]` on a field
///   is rejected, because renaming or defaulting a field would make the type
///   and its schema disagree.
/// - A recursive type (a field of type `Vec<Self>`) would make
///   `json_schema()` recurse forever: write its schema by hand with `$defs`
///   and `$ref`, which [`Parameters`](crate::tool::Parameters) validates.
/// - Maps (`BTreeMap<String, T>`, `HashMap<String, T>`) and
///   [`Value`] are valid tool parameters, but strict mode rejects them (an
///   object with open keys, a schema without a type);
///   [`Parameters::strict_violations`](crate::tool::Parameters::strict_violations)
///   says so.
pub trait JsonSchema {
    /// The JSON Schema of this type's JSON form (as serde serializes it).
    fn json_schema() -> Value;
}

impl JsonSchema for bool {
    fn json_schema() -> Value {
        json!({"type": "boolean"})
    }
}

macro_rules! integer_schemas {
    ($($t:ty),*) => {$(
        impl JsonSchema for $t {
            fn json_schema() -> Value {
                json!({"type": "integer", "minimum": <$t>::MIN, "maximum": <$t>::MAX})
            }
        }
    )*};
}

integer_schemas!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl JsonSchema for f32 {
    fn json_schema() -> Value {
        json!({"type": "number"})
    }
}

impl JsonSchema for f64 {
    fn json_schema() -> Value {
        json!({"type": "number"})
    }
}

impl JsonSchema for String {
    fn json_schema() -> Value {
        json!({"type": "string"})
    }
}

impl JsonSchema for str {
    fn json_schema() -> Value {
        json!({"type": "string"})
    }
}

/// Any JSON value: the empty schema `{}`.
impl JsonSchema for Value {
    fn json_schema() -> Value {
        json!({})
    }
}

/// `T`'s schema, made nullable: `"type": [T, "null"]` (with `null` added to
/// an `enum`), or `anyOf` with `{"type": "null"}` when `T` has no `type`.
impl<T: JsonSchema> JsonSchema for Option<T> {
    fn json_schema() -> Value {
        nullable(T::json_schema())
    }
}

impl<T: JsonSchema> JsonSchema for Vec<T> {
    fn json_schema() -> Value {
        json!({"type": "array", "items": T::json_schema()})
    }
}

/// An array of exactly `N` items.
impl<T: JsonSchema, const N: usize> JsonSchema for [T; N] {
    fn json_schema() -> Value {
        json!({"type": "array", "items": T::json_schema(), "minItems": N, "maxItems": N})
    }
}

impl<T: JsonSchema + ?Sized> JsonSchema for Box<T> {
    fn json_schema() -> Value {
        T::json_schema()
    }
}

impl<T: JsonSchema + ?Sized> JsonSchema for Rc<T> {
    fn json_schema() -> Value {
        T::json_schema()
    }
}

impl<T: JsonSchema + ?Sized> JsonSchema for Arc<T> {
    fn json_schema() -> Value {
        T::json_schema()
    }
}

/// An object with any keys, each value a `T` (not strict-mode compatible).
impl<T: JsonSchema> JsonSchema for BTreeMap<String, T> {
    fn json_schema() -> Value {
        json!({"type": "object", "additionalProperties": T::json_schema()})
    }
}

/// An object with any keys, each value a `T` (not strict-mode compatible).
impl<T: JsonSchema, S> JsonSchema for HashMap<String, T, S> {
    fn json_schema() -> Value {
        json!({"type": "object", "additionalProperties": T::json_schema()})
    }
}

fn nullable(mut schema: Value) -> Value {
    let Some(obj) = schema.as_object_mut() else {
        return schema;
    };
    let types = match obj.get("type") {
        Some(Value::String(t)) => Some(vec![Value::from(t.as_str())]),
        Some(Value::Array(ts)) => Some(ts.clone()),
        _ => None,
    };
    let Some(mut types) = types else {
        if obj.is_empty() {
            // `{}` already accepts null.
            return schema;
        }
        return json!({"anyOf": [schema, {"type": "null"}]});
    };
    if !types.iter().any(|t| t == "null") {
        types.push(Value::from("null"));
    }
    obj.insert("type".to_string(), Value::Array(types));
    if let Some(Value::Array(values)) = obj.get_mut("enum")
        && !values.iter().any(Value::is_null)
    {
        values.push(Value::Null);
    }
    schema
}

/// Declares a struct, or an enum of strings, together with its
/// [`JsonSchema`](crate::tool::JsonSchema) impl; `///` comments become
/// `description`s.
///
/// A struct gets `#[derive(Debug, Clone)]`, serde's `Serialize` and
/// `Deserialize`, and a strict-mode object schema: every field required,
/// `Option` fields nullable, `"additionalProperties": false`. An enum gets
/// `#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]`, serde's
/// `Serialize` and `Deserialize`, and is sent as a string: the variant's
/// name, or the string after `=`; variant comments are listed in the
/// enum's description. Further attributes after the doc comment (say
/// `#[derive(PartialEq)]`) are passed through.
///
/// The serde impls are written by the macro itself, reading and writing
/// what serde's derive would for the same declaration, so the crate that
/// uses the macro needs only `pikuri` as a dependency: no `serde`, no
/// `serde_json`, no proc macro. (A crate that reads the types with
/// `serde_json` itself, as the examples below do, depends on it for that.)
/// See the [design notes](crate::tool::JsonSchema) for why, and for the
/// limitations.
///
/// # What it takes
///
/// | Input | Supported |
/// |---|---|
/// | a struct with named fields (`struct S { a: u8 }`) | yes; a raw identifier (`r#type`) is the field `type`, in the schema as in serde |
/// | an enum of unit variants (`enum E { A, B = "b" }`) | yes, sent as strings |
/// | an enum whose variants carry data (`A(u8)`, `B { x: u8 }`) | no: a compile error says so; use a struct with an enum field, or implement [`JsonSchema`](crate::tool::JsonSchema) by hand |
/// | a tuple or unit struct, generics, `where` clauses | no: a compile error says so |
/// | `#[serde(...)]` on a field | no: a compile error (renames and defaults would make the type and its schema disagree) |
///
/// # Examples
///
/// ```
/// use pikuri::tool::{JsonSchema, Parameters};
/// use serde_json::json;
///
/// pikuri::tool::schema_type! {
///     /// Temperature unit.
///     pub enum Unit {
///         /// Degrees Celsius.
///         Celsius = "celsius",
///         Fahrenheit = "fahrenheit",
///     }
/// }
///
/// pikuri::tool::schema_type! {
///     /// Where and how.
///     #[derive(PartialEq)]
///     pub struct WeatherArgs {
///         /// The city, e.g. `Oslo`.
///         pub city: String,
///         /// Days ahead, 0 for today.
///         pub days: Option<u8>,
///         pub unit: Unit,
///     }
/// }
///
/// assert_eq!(
///     WeatherArgs::json_schema(),
///     json!({
///         "type": "object",
///         "description": "Where and how.",
///         "properties": {
///             "city": {"type": "string", "description": "The city, e.g. `Oslo`."},
///             "days": {
///                 "type": ["integer", "null"],
///                 "minimum": 0,
///                 "maximum": 255,
///                 "description": "Days ahead, 0 for today."
///             },
///             "unit": {
///                 "type": "string",
///                 "enum": ["celsius", "fahrenheit"],
///                 "description": "Temperature unit.\n- `celsius`: Degrees Celsius."
///             }
///         },
///         "required": ["city", "days", "unit"],
///         "additionalProperties": false
///     })
/// );
/// let args: WeatherArgs = serde_json::from_value(json!({"city": "Oslo", "unit": "celsius"}))?;
/// assert_eq!(args, WeatherArgs { city: "Oslo".into(), days: None, unit: Unit::Celsius });
/// assert!(Parameters::for_type::<WeatherArgs>().strict_violations().is_empty());
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// A serde attribute that would make the type and its schema disagree does
/// not compile:
///
/// ```compile_fail
/// pikuri::tool::schema_type! {
///     struct Renamed {
///         #[serde(rename = "b")]
///         a: u8,
///     }
/// }
/// ```
///
/// Nor does an enum whose variants carry data (the error says what is
/// supported):
///
/// ```compile_fail
/// pikuri::tool::schema_type! {
///     enum Shape {
///         Circle(f64),
///         Square { side: f64 },
///     }
/// }
/// ```
///
/// A raw identifier names the field as serde does, without `r#`:
///
/// ```
/// use pikuri::tool::JsonSchema;
/// pikuri::tool::schema_type! {
///     struct Filter {
///         r#type: String,
///     }
/// }
/// assert_eq!(Filter::json_schema()["required"], serde_json::json!(["type"]));
/// let f: Filter = serde_json::from_value(serde_json::json!({"type": "file"}))?;
/// assert_eq!(f.r#type, "file");
/// # Ok::<(), serde_json::Error>(())
/// ```
// Exported under a hidden name and re-exported as `tool::schema_type`: a
// `macro_export` macro always lands at the crate root, and the root keeps
// core types only.
#[doc(hidden)]
#[macro_export]
macro_rules! __schema_type {
    // The doc lines of a list of attributes, as `&[&str]`.
    (@docs [$($acc:expr,)*]) => { &[$($acc),*] as &[&str] };
    (@docs [$($acc:expr,)*] #[doc = $doc:expr] $($rest:tt)*) => {
        $crate::__schema_type!(@docs [$($acc,)* $doc,] $($rest)*)
    };
    (@docs [$($acc:expr,)*] #[serde $($attr:tt)*] $($rest:tt)*) => {
        ::core::compile_error!(
            "schema_type!: #[serde(...)] attributes would make the type and its schema disagree"
        )
    };
    (@docs [$($acc:expr,)*] #[$($attr:tt)*] $($rest:tt)*) => {
        $crate::__schema_type!(@docs [$($acc,)*] $($rest)*)
    };
    // A variant's string: the one given, or its name.
    (@wire $variant:ident $wire:literal) => { $wire };
    (@wire $variant:ident) => { $crate::__schema_type!(@name $variant) };
    // A field's or variant's name as serde spells it: without the `r#` of
    // a raw identifier (`r#type` is the field `type`).
    (@name $ident:ident) => {
        $crate::__private::key(::core::stringify!($ident))
    };

    (
        $(#[$($attr:tt)*])*
        $vis:vis struct $name:ident {
            $(
                $(#[$($field_attr:tt)*])*
                $field_vis:vis $field:ident : $field_ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$($attr)*])*
        #[derive(::core::fmt::Debug, ::core::clone::Clone)]
        $vis struct $name {
            $(
                $(#[$($field_attr)*])*
                $field_vis $field: $field_ty,
            )*
        }

        $crate::__json_struct! { Serialize, Deserialize for $name, seq { $($field),* } }

        impl $crate::tool::JsonSchema for $name {
            fn json_schema() -> $crate::__private::Value {
                fn describe(schema: &mut $crate::__private::Value, lines: &[&str]) {
                    let text = lines
                        .iter()
                        .map(|line| line.strip_prefix(' ').unwrap_or(line))
                        .collect::<::std::vec::Vec<_>>()
                        .join("\n");
                    let text = text.trim();
                    if let (Some(obj), false) = (schema.as_object_mut(), text.is_empty()) {
                        obj.insert("description".into(), $crate::__private::Value::from(text));
                    }
                }
                #[allow(unused_mut)] // a struct without fields
                let mut properties = $crate::__private::Map::new();
                $(
                    let mut field = <$field_ty as $crate::tool::JsonSchema>::json_schema();
                    describe(&mut field, $crate::__schema_type!(@docs [] $(#[$($field_attr)*])*));
                    properties.insert($crate::__schema_type!(@name $field).into(), field);
                )*
                let mut schema = $crate::__private::json!({
                    "type": "object",
                    "properties": properties,
                    "required": [$($crate::__schema_type!(@name $field)),*],
                    "additionalProperties": false,
                });
                describe(&mut schema, $crate::__schema_type!(@docs [] $(#[$($attr)*])*));
                schema
            }
        }
    };

    (
        $(#[$($attr:tt)*])*
        $vis:vis enum $name:ident {
            $(
                $(#[$($variant_attr:tt)*])*
                $variant:ident $(= $wire:literal)?
            ),+ $(,)?
        }
    ) => {
        $(#[$($attr)*])*
        #[derive(
            ::core::fmt::Debug, ::core::clone::Clone, ::core::marker::Copy,
            ::core::cmp::PartialEq, ::core::cmp::Eq, ::core::hash::Hash,
        )]
        $vis enum $name {
            $(
                $(#[$($variant_attr)*])*
                $variant,
            )+
        }

        $crate::__json_enum! {
            Serialize, Deserialize for $name, as_enum {
                $($variant = $crate::__schema_type!(@wire $variant $($wire)?)),+
            }
        }

        impl $crate::tool::JsonSchema for $name {
            fn json_schema() -> $crate::__private::Value {
                let mut lines: ::std::vec::Vec<::std::string::String> =
                    $crate::__schema_type!(@docs [] $(#[$($attr)*])*)
                        .iter()
                        .map(|line| line.strip_prefix(' ').unwrap_or(line).to_string())
                        .collect();
                $(
                    let doc: &[&str] = $crate::__schema_type!(@docs [] $(#[$($variant_attr)*])*);
                    if !doc.is_empty() {
                        let doc: ::std::vec::Vec<&str> = doc.iter().map(|l| l.trim()).collect();
                        lines.push(::std::format!(
                            "- `{}`: {}",
                            $crate::__schema_type!(@wire $variant $($wire)?),
                            doc.join(" ").trim()
                        ));
                    }
                )+
                let mut schema = $crate::__private::json!({
                    "type": "string",
                    "enum": [$($crate::__schema_type!(@wire $variant $($wire)?)),+],
                });
                let text = lines.join("\n");
                let text = text.trim();
                if let (Some(obj), false) = (schema.as_object_mut(), text.is_empty()) {
                    obj.insert("description".into(), $crate::__private::Value::from(text));
                }
                schema
            }
        }
    };

    // What the arms above do not take, with what to do instead (rather
    // than macro_rules' bare `no rules expected the token`).
    (
        $(#[$($attr:tt)*])*
        $vis:vis enum $($rest:tt)*
    ) => {
        ::core::compile_error!(
            "schema_type!: an enum must have unit variants only (each sent as a string, \
             optionally `Variant = \"wire\"`), without generics; for a variant with data, \
             use a struct with an enum field and Option fields, or implement \
             pikuri::tool::JsonSchema by hand"
        );
    };
    (
        $(#[$($attr:tt)*])*
        $vis:vis struct $($rest:tt)*
    ) => {
        ::core::compile_error!(
            "schema_type!: a struct must have named fields (`struct S { a: u8 }`), without \
             generics; for anything else implement pikuri::tool::JsonSchema by hand"
        );
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::Parameters;

    crate::tool::schema_type! {
        /// Size of a cup.
        enum Size {
            /// 200 ml.
            Small = "small",
            Large = "large",
        }
    }

    crate::tool::schema_type! {
        /// An order line.
        #[derive(PartialEq)]
        struct Line {
            /// Article number.
            sku: String,
            /// How many;
            /// at least one.
            qty: u16,
            size: Option<Size>,
            sizes: Vec<Size>,
        }
    }

    crate::tool::schema_type! {
        struct Address {
            street: String,
            zip: Option<String>,
        }
    }

    crate::tool::schema_type! {
        /// A whole order.
        struct Order {
            lines: Vec<Line>,
            ship_to: Option<Address>,
            bill_to: Box<Address>,
            rush: bool,
            weights: [f64; 2],
            nested: Vec<Vec<Option<i64>>>,
        }
    }

    crate::tool::schema_type! {
        struct Empty {}
    }

    crate::tool::schema_type! {
        struct Loose {
            extra: BTreeMap<String, u8>,
            any: Value,
        }
    }

    #[test]
    fn generated_schemas_pass_strict_mode() {
        for (name, params) in [
            ("Line", Parameters::for_type::<Line>()),
            ("Address", Parameters::for_type::<Address>()),
            ("Order", Parameters::for_type::<Order>()),
            ("Empty", Parameters::for_type::<Empty>()),
        ] {
            assert_eq!(params.strict_violations(), Vec::<String>::new(), "{name}");
        }
        // Maps and `Value` are fine parameters, but not strict.
        assert_eq!(
            Parameters::for_type::<Loose>().strict_violations(),
            [
                "/properties/any: every schema needs a `type` (or `anyOf`, `$ref`, `enum`)",
                "/properties/extra: objects need \"additionalProperties\": false",
            ]
        );
    }

    #[test]
    fn struct_schema_has_docs_bounds_and_nullable_fields() {
        assert_eq!(
            Line::json_schema(),
            json!({
                "type": "object",
                "description": "An order line.",
                "properties": {
                    "sku": {"type": "string", "description": "Article number."},
                    "qty": {
                        "type": "integer", "minimum": 0, "maximum": 65535,
                        "description": "How many;\nat least one."
                    },
                    "size": {
                        "type": ["string", "null"],
                        "enum": ["small", "large", null],
                        "description": "Size of a cup.\n- `small`: 200 ml."
                    },
                    "sizes": {
                        "type": "array",
                        "items": {
                            "type": "string",
                            "enum": ["small", "large"],
                            "description": "Size of a cup.\n- `small`: 200 ml."
                        }
                    }
                },
                "required": ["sku", "qty", "size", "sizes"],
                "additionalProperties": false
            })
        );
        assert_eq!(
            Order::json_schema()["properties"]["ship_to"]["type"],
            json!(["object", "null"])
        );
        assert_eq!(Empty::json_schema()["required"], json!([]));
    }

    #[test]
    fn validation_and_serde_agree() {
        let params = Parameters::for_type::<Line>();
        let good = json!({"sku": "a", "qty": 2.0, "size": null, "sizes": ["large"]});
        params.validate(&good).unwrap();
        let line: Line = serde_json::from_value(params.normalize(good)).unwrap();
        assert_eq!(
            line,
            Line {
                sku: "a".into(),
                qty: 2,
                size: None,
                sizes: vec![Size::Large]
            }
        );
        // An omitted `Option` field passes validation and reads as `None`.
        let omitted = json!({"sku": "a", "qty": 1, "sizes": []});
        params.validate(&omitted).unwrap();
        assert_eq!(serde_json::from_value::<Line>(omitted).unwrap().size, None);
        let err = params
            .validate(&json!({"sku": "a", "qty": 70000, "size": "huge", "sizes": ["small", 1]}))
            .unwrap_err();
        assert_eq!(
            err.problems(),
            [
                "parameter `qty`: expected at most 65535, got 70000",
                "parameter `size`: \"huge\" is not one of \"small\", \"large\", null",
                "parameter `sizes`: item [1]: expected one of \"small\", \"large\", got integer 1",
            ]
        );
    }

    #[test]
    fn std_types_have_their_natural_schemas() {
        assert_eq!(
            i8::json_schema(),
            json!({"type": "integer", "minimum": -128, "maximum": 127})
        );
        assert_eq!(u64::json_schema()["maximum"], json!(u64::MAX));
        assert_eq!(i64::json_schema()["minimum"], json!(i64::MIN));
        assert_eq!(<[u8; 3]>::json_schema()["minItems"], 3);
        assert_eq!(
            Option::<Option<bool>>::json_schema(),
            json!({"type": ["boolean", "null"]})
        );
        assert_eq!(Option::<Value>::json_schema(), json!({}));
        assert_eq!(
            nullable(json!({"$ref": "#/$defs/x"})),
            json!({"anyOf": [{"$ref": "#/$defs/x"}, {"type": "null"}]})
        );
        assert_eq!(Arc::<str>::json_schema(), json!({"type": "string"}));
        assert_eq!(
            HashMap::<String, f32>::json_schema(),
            json!({"type": "object", "additionalProperties": {"type": "number"}})
        );
    }

    #[test]
    #[should_panic(expected = "Parameters::for_type::<u8>: not a tool parameter schema")]
    fn a_scalar_is_not_a_parameter_schema() {
        let _ = Parameters::for_type::<u8>();
    }
}
