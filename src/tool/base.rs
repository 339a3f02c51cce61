//! The [`Tool`] trait and [`ToolError`], re-exported at the crate root (the
//! helpers around them are the `pikuri::tool` namespace).

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use super::context::ToolContext;
use super::schema::Parameters;

/// A tool the model can call.
///
/// # Examples
///
/// ```
/// use pikuri::{Tool, ToolContext, ToolError};
/// use pikuri::tool::Parameters;
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
    /// The name the model calls it by: unique per agent, and 1 to 64
    /// characters from `[a-zA-Z0-9_-]` starting with a letter or `_` (the
    /// names OpenAI, Anthropic and Gemini all accept). An agent refuses any
    /// other name with [`Error::InvalidInput`](crate::Error::InvalidInput)
    /// at [`build`](crate::Configurator::build) or
    /// [`ExtensionContext::add_tool`](crate::extension::ExtensionContext::add_tool);
    /// MCP tools are renamed to fit (see [`mcp`](crate::mcp#names)).
    fn name(&self) -> &str;
    /// What it does, for the model.
    fn description(&self) -> &str;
    /// Its parameter schema.
    fn parameters(&self) -> &Parameters;
    /// Run it.
    fn call(&self, args: &Value, cx: &ToolContext) -> Result<String, ToolError>;

    /// Whether it sends anything over the network (a leg of the lethal
    /// trifecta; see [`TrifectaPolicy`](crate::tool::TrifectaPolicy)). Default:
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
    /// message, runs a command): [`StateChangingOnly`](crate::approval::StateChangingOnly)
    /// asks its approver about these tools only. Default: `false` (a
    /// read-only tool).
    fn changes_user_state(&self) -> bool {
        false
    }

    /// Whether running a call twice with the same arguments does no harm
    /// (a read, a lookup, a write keyed by
    /// [`ToolContext::idempotency_key`]). A [journaled](crate::journal) run
    /// that a crash cut off while this tool ran runs the call again on
    /// resume when this is `true` (at least once); otherwise the model gets
    /// an "interrupted" observation for it (at most once). Default: `false`.
    fn idempotent(&self) -> bool {
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

/// A pikuri error inside a tool (an [`Image`](crate::Image) that would
/// not load, a sub-agent's failure) becomes the observation, so `?` works
/// in a tool body.
impl From<crate::Error> for ToolError {
    fn from(error: crate::Error) -> ToolError {
        ToolError {
            message: error.to_string(),
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
    fn idempotent(&self) -> bool {
        (**self).idempotent()
    }
}
