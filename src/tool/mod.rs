//! Tools: the [`Tool`] trait, [`ToolContext`], [`ToolError`], the
//! [`Parameters`] schema, closure tools ([`FnTool`]) and typed tools
//! ([`TypedTool`], with schemas from Rust types through [`JsonSchema`] and
//! [`schema_type!`](crate::schema_type)). Failures as observations are
//! documented on [`Tool`].

mod context;
mod exec;
mod json_schema;
mod schema;
mod typed;

pub use context::ToolContext;
pub(crate) use exec::{invoke, prepare, revalidate, unknown_tool};
pub use json_schema::JsonSchema;
pub use schema::{ItemType, Parameters, ParametersBuilder, SchemaError, ValidationError};
pub use typed::{IntoObservation, Json, TypedTool};

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

/// A tool the model can call.
///
/// # Examples
///
/// ```
/// use pikuri::{Tool, ToolContext, ToolError};
/// use pikuri::Parameters;
/// use serde_json::Value;
///
/// struct Shout { params: Parameters }
/// impl Tool for Shout {
///     fn name(&self) -> &str { "shout" }
///     fn description(&self) -> &str { "Upper-cases text." }
///     fn parameters(&self) -> &Parameters { &self.params }
///     fn call(&self, args: &Value, _cx: &ToolContext) -> Result<String, ToolError> {
///         Ok(args["text"].as_str().unwrap_or_default().to_uppercase())
///     }
/// }
/// let tool = Shout { params: Parameters::builder().required_string("text", "Text").build() };
/// let out = tool.call(&serde_json::json!({"text": "hi"}), &ToolContext::detached())?;
/// assert_eq!(out, "HI");
/// # Ok::<(), ToolError>(())
/// ```
///
/// # Contract
///
/// `call` receives arguments that already passed [`Parameters::validate`],
/// normalized as [`Parameters`](Parameters#differences-from-strict-json-schema)
/// describes: integer parameters are JSON integers, and an optional parameter the
/// model sent as `null` is absent. It returns the observation text (`Ok`), or
/// a [`ToolError`] the model sees as `"Error: ..."`. A panic in `call` is
/// caught and reported to the model the same way. A long tool should poll
/// [`ToolContext::is_cancelled`].
///
/// # Failures are observations
///
/// Everything that goes wrong with a tool call becomes an `"Error: ..."` tool
/// result bound to the same call id, and the run goes on so the model can try
/// again: malformed JSON arguments (quoted, bounded), arguments cut off by the
/// token limit, schema violations (every problem listed, the schema
/// reprinted), an unknown tool name, a [`ToolError`], and a panic inside the
/// tool. None of them is an [`Error`](crate::Error) of `run_loop`.
pub trait Tool: Send + Sync + 'static {
    /// The name the model calls it by (unique per agent).
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// Its parameter schema.
    fn parameters(&self) -> &Parameters;
    /// Run it.
    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError>;

    /// Whether it sends anything over the network (a leg of the lethal
    /// trifecta; see [`TrifectaPolicy`](crate::TrifectaPolicy)). Default:
    /// `false`.
    fn reaches_network(&self) -> bool {
        false
    }

    /// Whether it reads the user's private data: files, mail, databases (the
    /// other leg the trifecta check looks at). Default: `false`.
    fn reads_private_data(&self) -> bool {
        false
    }

    /// Whether a call changes the user's state (writes a file, sends a
    /// message, runs a command): [`StateChangingOnly`](crate::StateChangingOnly)
    /// asks its approver about these tools only. Default: `false` (a
    /// read-only tool).
    fn changes_user_state(&self) -> bool {
        false
    }
}

/// A recoverable tool failure, sent to the model as `"Error: <message>"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolError {
    message: String,
}

impl ToolError {
    /// A tool error with this message.
    pub fn new(message: impl Into<String>) -> ToolError {
        ToolError {
            message: message.into(),
        }
    }
    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ToolError {}

impl From<String> for ToolError {
    fn from(message: String) -> ToolError {
        ToolError { message }
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> ToolError {
        ToolError {
            message: message.to_string(),
        }
    }
}

/// A shared tool (`Arc<dyn Tool>`, as [`builtin::all`](crate::builtin::all)
/// returns) is a tool: hand it to
/// [`Configurator::add_tool`](crate::Configurator::add_tool) as is.
impl Tool for Arc<dyn Tool> {
    fn name(&self) -> &str {
        (**self).name()
    }
    fn description(&self) -> &str {
        (**self).description()
    }
    fn parameters(&self) -> &Parameters {
        (**self).parameters()
    }
    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError> {
        (**self).call(args, cx)
    }
    fn reaches_network(&self) -> bool {
        (**self).reaches_network()
    }
    fn reads_private_data(&self) -> bool {
        (**self).reads_private_data()
    }
    fn changes_user_state(&self) -> bool {
        (**self).changes_user_state()
    }
}

type ToolFn = dyn Fn(&Value, &ToolContext) -> Result<String, ToolError> + Send + Sync;

/// A tool made of a closure; see [`FnTool::new`].
#[derive(Clone)]
pub struct FnTool {
    name: String,
    description: String,
    parameters: Parameters,
    f: Arc<ToolFn>,
    declared: Declared,
}

/// What a closure tool ([`FnTool`], [`TypedTool`]) declares about itself:
/// the answers of [`Tool::reaches_network`], [`Tool::reads_private_data`] and
/// [`Tool::changes_user_state`], set with their builder methods.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Declared {
    pub(crate) network: bool,
    pub(crate) private_data: bool,
    pub(crate) changes_user_state: bool,
}

impl FnTool {
    /// A tool named `name` that runs `f` on validated arguments.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{FnTool, Parameters};
    /// use pikuri::{Tool, ToolContext};
    /// let add = FnTool::new(
    ///     "add",
    ///     "Adds two integers.",
    ///     Parameters::builder().required_integer("a", "first").required_integer("b", "second").build(),
    ///     |args, _cx| Ok((args["a"].as_i64().unwrap() + args["b"].as_i64().unwrap()).to_string()),
    /// );
    /// let out = add.call(&serde_json::json!({"a": 2, "b": 3}), &ToolContext::detached()).unwrap();
    /// assert_eq!(out, "5");
    /// ```
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Parameters,
        f: impl Fn(&Value, &ToolContext) -> Result<String, ToolError> + Send + Sync + 'static,
    ) -> FnTool {
        FnTool {
            name: name.into(),
            description: description.into(),
            parameters,
            f: Arc::new(f),
            declared: Declared::default(),
        }
    }

    /// A copy that declares it changes the user's state (see
    /// [`Tool::changes_user_state`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{FnTool, Parameters, Tool};
    /// let rm = FnTool::new("rm", "Deletes a file.", Parameters::empty(), |_, _| Ok("gone".into()));
    /// assert!(!rm.changes_user_state());
    /// assert!(rm.state_changing().changes_user_state());
    /// ```
    #[must_use]
    pub fn state_changing(mut self) -> FnTool {
        self.declared.changes_user_state = true;
        self
    }

    /// A copy that declares it reaches the network ([`Tool::reaches_network`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{FnTool, Parameters, Tool};
    /// let ping = FnTool::new("ping", "Pings a host.", Parameters::empty(), |_, _| Ok("pong".into()))
    ///     .reaching_network();
    /// assert!(ping.reaches_network());
    /// assert!(!ping.reads_private_data());
    /// ```
    #[must_use]
    pub fn reaching_network(mut self) -> FnTool {
        self.declared.network = true;
        self
    }

    /// A copy that declares it reads private data ([`Tool::reads_private_data`]).
    #[must_use]
    pub fn reading_private_data(mut self) -> FnTool {
        self.declared.private_data = true;
        self
    }
}

impl Tool for FnTool {
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn parameters(&self) -> &Parameters {
        &self.parameters
    }
    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError> {
        (self.f)(args, cx)
    }
    fn reaches_network(&self) -> bool {
        self.declared.network
    }
    fn reads_private_data(&self) -> bool {
        self.declared.private_data
    }
    fn changes_user_state(&self) -> bool {
        self.declared.changes_user_state
    }
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

pub(crate) use crate::util::excerpt;
