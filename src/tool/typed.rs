//! Typed tools: [`TypedTool`] deserializes the arguments into a Rust type
//! and turns the handler's result into observation text
//! ([`IntoObservation`], [`Json`]).

use std::fmt;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{FnTool, JsonSchema, Parameters, Tool, ToolContext, ToolError};

/// What a [`TypedTool`] handler returns: anything that becomes the
/// observation text.
///
/// A string is the text as is (not JSON-quoted); [`Json`] wraps any
/// `Serialize` value, sent as compact JSON (a value that serializes to a
/// JSON string is sent as that text, too). [`Value`] follows the same rule.
///
/// # Examples
///
/// ```
/// use pikuri::tool::{IntoObservation, Json};
/// use serde_json::json;
/// assert_eq!("sunny".into_observation().unwrap(), "sunny");
/// assert_eq!(Json(vec![1, 2]).into_observation().unwrap(), "[1,2]");
/// assert_eq!(Json("plain").into_observation().unwrap(), "plain");
/// assert_eq!(json!({"ok": true}).into_observation().unwrap(), r#"{"ok":true}"#);
/// ```
pub trait IntoObservation {
    /// The observation text, or a [`ToolError`] if the value cannot be
    /// rendered (a `Serialize` impl that fails).
    fn into_observation(self) -> Result<String, ToolError>;
}

impl IntoObservation for String {
    fn into_observation(self) -> Result<String, ToolError> {
        Ok(self)
    }
}

impl IntoObservation for &str {
    fn into_observation(self) -> Result<String, ToolError> {
        Ok(self.to_string())
    }
}

impl IntoObservation for Value {
    fn into_observation(self) -> Result<String, ToolError> {
        Ok(match self {
            Value::String(s) => s,
            other => other.to_string(),
        })
    }
}

/// Sends a `Serialize` value to the model as compact JSON; see
/// [`IntoObservation`].
///
/// # Examples
///
/// ```
/// use pikuri::tool::{IntoObservation, Json};
/// #[derive(serde::Serialize)]
/// struct Forecast { celsius: f64, sky: &'static str }
/// let text = Json(Forecast { celsius: 4.5, sky: "cloudy" }).into_observation()?;
/// assert_eq!(text, r#"{"celsius":4.5,"sky":"cloudy"}"#);
/// # Ok::<(), pikuri::ToolError>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Json<T>(pub T);

impl<T: Serialize> IntoObservation for Json<T> {
    fn into_observation(self) -> Result<String, ToolError> {
        match serde_json::to_value(&self.0) {
            Ok(value) => value.into_observation(),
            Err(e) => Err(ToolError::new(format!(
                "the tool's result could not be serialized: {e}"
            ))),
        }
    }
}

/// A tool whose handler takes its arguments as a Rust value; the schema
/// comes from the type.
///
/// The argument type implements [`JsonSchema`] and `Deserialize`:
/// [`schema_type!`](crate::tool::schema_type) writes both, so its crate
/// needs no serde of its own. The agent loop
/// validates the model's arguments against the type's schema first, so a
/// malformed call gets an `"Error: ..."` observation that lists *every*
/// problem (serde would stop at the first), bound to the call id like any
/// tool failure; the handler only ever sees a well-formed value. The
/// handler returns anything [`IntoObservation`]: text, or [`Json`] of a
/// `Serialize` value.
///
/// # Examples
///
/// ```
/// use pikuri::tool::{Json, TypedTool};
/// use pikuri::{Tool, ToolContext, ToolError};
/// use serde_json::json;
///
/// pikuri::tool::schema_type! {
///     /// One order line.
///     pub struct Line {
///         /// Article number.
///         pub sku: String,
///         pub qty: u32,
///     }
/// }
/// pikuri::tool::schema_type! {
///     pub struct Order {
///         pub lines: Vec<Line>,
///         /// Gift wrap, if wanted.
///         pub gift: Option<bool>,
///     }
/// }
///
/// let tool = TypedTool::new("order", "Places an order.", |order: Order, _cx: &ToolContext| {
///     let items: u32 = order.lines.iter().map(|l| l.qty).sum();
///     Ok::<_, ToolError>(Json(json!({"items": items, "gift": order.gift.unwrap_or(false)})))
/// });
/// assert_eq!(tool.parameters().to_json()["required"], json!(["lines", "gift"]));
///
/// let cx = ToolContext::detached();
/// let out = tool.call(&json!({"lines": [{"sku": "A", "qty": 2}, {"sku": "B", "qty": 1}]}), &cx)?;
/// assert_eq!(out, r#"{"gift":false,"items":3}"#);
///
/// let err = tool.call(&json!({"lines": [{"sku": 1, "qty": -1}]}), &cx).unwrap_err();
/// assert!(err.message().starts_with(
///     "invalid arguments:\n\
///      - `/lines/0/qty`: expected at least 0, got -1\n\
///      - `/lines/0/sku`: expected string, got integer 1\n"
/// ));
/// # Ok::<(), ToolError>(())
/// ```
#[derive(Clone)]
pub struct TypedTool {
    /// The untyped tool that holds the declaration and runs the handler.
    inner: FnTool,
    args_type: &'static str,
}

impl TypedTool {
    /// A tool named `name` that deserializes its arguments into `A` and runs
    /// `f` on them.
    ///
    /// # Panics
    ///
    /// If `A`'s schema is not an object schema (see [`Parameters::for_type`]).
    pub fn new<A, O, F>(name: impl Into<String>, description: impl Into<String>, f: F) -> TypedTool
    where
        A: DeserializeOwned + JsonSchema + 'static,
        O: IntoObservation,
        F: Fn(A, &ToolContext) -> Result<O, ToolError> + Send + Sync + 'static,
    {
        let parameters = Parameters::for_type::<A>();
        let for_errors = parameters.clone();
        let handler = move |args: &Value, cx: &ToolContext| {
            let typed = match A::deserialize(args) {
                Ok(typed) => typed,
                Err(e) => {
                    // Called without the loop's validation (or a hand-written
                    // schema that disagrees with the type): list every
                    // problem if the schema sees them, else serde's one.
                    return Err(match for_errors.validate(args) {
                        Err(invalid) => ToolError::new(invalid.to_string()),
                        Ok(()) => ToolError::new(format!("invalid arguments: {e}")),
                    });
                }
            };
            f(typed, cx)?.into_observation()
        };
        TypedTool {
            inner: FnTool::new(name, description, parameters, handler),
            args_type: std::any::type_name::<A>(),
        }
    }

    /// A copy that declares it changes the user's state
    /// ([`Tool::changes_user_state`]), as [`FnTool::state_changing`](crate::tool::FnTool::state_changing).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Tool, ToolContext};
    /// use pikuri::tool::TypedTool;
    /// pikuri::tool::schema_type! {
    ///     /// A path.
    ///     struct Target { path: String }
    /// }
    /// let rm = TypedTool::new("rm", "Deletes a file.", |t: Target, _cx: &ToolContext| Ok(format!("deleted {}", t.path)));
    /// assert!(!rm.changes_user_state());
    /// let rm = rm.state_changing().reading_private_data();
    /// assert!(rm.changes_user_state() && rm.reads_private_data() && !rm.reaches_network());
    /// assert!(TypedTool::new("get", "Fetches.", |t: Target, _cx: &ToolContext| Ok(t.path))
    ///     .reaching_network()
    ///     .reaches_network());
    /// ```
    #[must_use]
    pub fn state_changing(mut self) -> TypedTool {
        self.inner = self.inner.state_changing();
        self
    }

    /// A copy that declares it reaches the network ([`Tool::reaches_network`]).
    #[must_use]
    pub fn reaching_network(mut self) -> TypedTool {
        self.inner = self.inner.reaching_network();
        self
    }

    /// A copy that declares it reads private data ([`Tool::reads_private_data`]).
    #[must_use]
    pub fn reading_private_data(mut self) -> TypedTool {
        self.inner = self.inner.reading_private_data();
        self
    }

    /// A copy that declares a second run of a call harmless
    /// ([`Tool::idempotent`]), as [`FnTool::idempotent_calls`](crate::tool::FnTool::idempotent_calls).
    #[must_use]
    pub fn idempotent_calls(mut self) -> TypedTool {
        self.inner = self.inner.idempotent_calls();
        self
    }
}

impl Tool for TypedTool {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn description(&self) -> &str {
        self.inner.description()
    }
    fn parameters(&self) -> &Parameters {
        self.inner.parameters()
    }
    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError> {
        self.inner.call(args, cx)
    }
    fn reaches_network(&self) -> bool {
        self.inner.reaches_network()
    }
    fn reads_private_data(&self) -> bool {
        self.inner.reads_private_data()
    }
    fn changes_user_state(&self) -> bool {
        self.inner.changes_user_state()
    }
    fn idempotent(&self) -> bool {
        self.inner.idempotent()
    }
}

impl fmt::Debug for TypedTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TypedTool")
            .field("name", &self.inner.name())
            .field("args", &self.args_type)
            .finish_non_exhaustive()
    }
}
