//! Helpers for writing tools: closure tools ([`FnTool`]), typed tools
//! ([`TypedTool`], with schemas from Rust types through [`JsonSchema`] and
//! [`schema_type!`](schema_type)), the [`Parameters`] schema and its
//! errors, and the [`TrifectaPolicy`] the agent applies to its tools.
//!
//! The [`Tool`] trait itself, [`ToolContext`] and [`ToolError`] are at the
//! crate root; failures as observations are documented on [`Tool`].
//!
//! # Examples
//!
//! ```
//! use pikuri::tool::{FnTool, Parameters};
//! use pikuri::{Tool, ToolContext};
//!
//! let params = Parameters::builder().required_string("text", "Text").build();
//! let shout = FnTool::new("shout", "Upper-cases text.", params, |args, _cx| {
//!     Ok(args["text"].as_str().unwrap_or_default().to_uppercase())
//! });
//! let out = shout.call(&serde_json::json!({"text": "hi"}), &ToolContext::detached())?;
//! assert_eq!(out, "HI");
//! # Ok::<(), pikuri::ToolError>(())
//! ```

// `base` and `context` hold the root types (`Tool`, `ToolError`,
// `ToolContext`): crate-visible only, so the crate root is their one path.
pub(crate) mod base;
pub(crate) mod context;
mod exec;
mod json_schema;
pub(crate) mod name;
mod schema;
mod trifecta;
mod typed;

#[doc(inline)]
pub use crate::__schema_type as schema_type;
pub(crate) use exec::{invoke, prepare, revalidate, unknown_tool};
pub use json_schema::JsonSchema;
pub(crate) use name::check_name;
#[cfg(any(feature = "mcp", feature = "anthropic"))]
pub(crate) use name::fnv1a;
#[cfg(feature = "mcp")]
pub(crate) use name::{MAX_NAME_LEN, hashed, sanitize};
pub use schema::{ItemType, Parameters, ParametersBuilder, SchemaError, ValidationError};
pub use trifecta::TrifectaPolicy;
pub use typed::{IntoObservation, Json, TypedTool};

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use base::{Tool, ToolError};
use context::ToolContext;

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
#[allow(clippy::struct_excessive_bools, reason = "independent declarations")]
pub(crate) struct Declared {
    pub(crate) network: bool,
    pub(crate) private_data: bool,
    pub(crate) changes_user_state: bool,
    pub(crate) idempotent: bool,
}

impl FnTool {
    /// A tool named `name` that runs `f` on validated arguments.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::tool::{FnTool, Parameters};
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
    /// use pikuri::Tool;
    /// use pikuri::tool::{FnTool, Parameters};
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
    /// use pikuri::Tool;
    /// use pikuri::tool::{FnTool, Parameters};
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

    /// A copy that declares a second run of a call harmless
    /// ([`Tool::idempotent`]): a [journaled](crate::journal) run cut off
    /// while it ran runs it again on resume.
    ///
    /// ```
    /// use pikuri::Tool;
    /// use pikuri::tool::{FnTool, Parameters};
    /// let get = FnTool::new("get", "Reads a key.", Parameters::empty(), |_, _| Ok("v".into()));
    /// assert!(!get.idempotent());
    /// assert!(get.idempotent_calls().idempotent());
    /// ```
    #[must_use]
    pub fn idempotent_calls(mut self) -> FnTool {
        self.declared.idempotent = true;
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
    fn idempotent(&self) -> bool {
        self.declared.idempotent
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
