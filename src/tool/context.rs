use std::fmt;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::{Cancellable, Image};

/// What a tool call gets besides its arguments: the run's [`Cancellable`], the
/// calling agent's id and the call id. Grows by fields, never by signature
/// changes.
#[derive(Clone)]
pub struct ToolContext {
    cancellable: Option<Cancellable>,
    agent_id: Arc<str>,
    call_id: String,
    idempotency_key: Option<Arc<str>>,
    /// Images the tool attached to its result (shared by clones: a tool
    /// may hand its context to a helper thread).
    images: Arc<Mutex<Vec<Image>>>,
    traceparent: Option<Arc<str>>,
}

impl ToolContext {
    pub(crate) fn new(
        cancellable: Option<Cancellable>,
        agent_id: Arc<str>,
        call_id: String,
    ) -> ToolContext {
        ToolContext {
            cancellable,
            agent_id,
            call_id,
            idempotency_key: None,
            images: Arc::default(),
            traceparent: None,
        }
    }

    /// This context with the run's trace context for the call.
    pub(crate) fn with_traceparent(mut self, traceparent: Option<String>) -> ToolContext {
        self.traceparent = traceparent.map(Arc::from);
        self
    }

    /// This context with the journal's key for the call.
    pub(crate) fn with_idempotency_key(mut self, key: Option<Arc<str>>) -> ToolContext {
        self.idempotency_key = key;
        self
    }

    /// A context outside any agent (for calling a tool directly, in tests).
    pub fn detached() -> ToolContext {
        ToolContext {
            cancellable: None,
            agent_id: Arc::from(""),
            call_id: String::new(),
            idempotency_key: None,
            images: Arc::default(),
            traceparent: None,
        }
    }

    /// A detached context with a cancellation token (for tests of tools).
    pub fn with_cancellable(cancellable: Cancellable) -> ToolContext {
        ToolContext {
            cancellable: Some(cancellable),
            ..ToolContext::detached()
        }
    }

    /// Whether the run was cancelled; a long tool should poll this and stop.
    pub fn is_cancelled(&self) -> bool {
        self.cancellable
            .as_ref()
            .is_some_and(Cancellable::is_cancelled)
    }

    /// The run's cancellation token, if the agent has one.
    pub fn cancellable(&self) -> Option<&Cancellable> {
        self.cancellable.as_ref()
    }

    /// The calling agent's id (empty for the main agent).
    pub fn agent_id(&self) -> &str {
        &self.agent_id
    }

    /// The id of the tool call being answered.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// In a [journaled](crate::journal) run, a key naming this call that
    /// stays the same when a resumed run runs it again: `run/step/call
    /// id`, where the step counts the model responses of the run. A tool
    /// that talks to an outside system sends it along so the system can
    /// drop a second copy. `None` outside a journaled run.
    pub fn idempotency_key(&self) -> Option<&str> {
        self.idempotency_key.as_deref()
    }

    /// Attach an image to this call's result: it goes to the model with the
    /// text the tool returns, in the same tool message (a screenshot, a
    /// rendered chart, a page of a PDF). The text stays the observation;
    /// a tool that returns an error still sends what it attached.
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Image, Tool, ToolContext};
    /// use pikuri::tool::{FnTool, Parameters};
    ///
    /// let shot = FnTool::new("screenshot", "Shows the screen.", Parameters::empty(), |_, cx| {
    ///     cx.attach_image(Image::from_bytes(b"\x89PNG\r\n\x1a\n...")?);
    ///     Ok("Here is the screen.".to_string())
    /// });
    /// let cx = ToolContext::detached();
    /// assert_eq!(shot.call(&serde_json::json!({}), &cx)?, "Here is the screen.");
    /// assert_eq!(cx.images()[0].media_type, "image/png");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn attach_image(&self, image: Image) {
        self.images.lock().push(image);
    }

    /// The images attached so far.
    pub fn images(&self) -> Vec<Image> {
        self.images.lock().clone()
    }

    /// The attached images, taken out (the agent, once the call returned).
    pub(crate) fn take_images(&self) -> Vec<Image> {
        std::mem::take(&mut *self.images.lock())
    }

    /// The W3C `traceparent` of the run, when the host opted in with
    /// [`Configurator::traceparent`](crate::Configurator::traceparent)
    /// (the value its source gave as the call began; `None` otherwise).
    /// A tool that calls a traced service passes it on; MCP tool calls send
    /// it as `_meta.traceparent`.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_deref()
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("agent_id", &self.agent_id)
            .field("call_id", &self.call_id)
            .field("idempotency_key", &self.idempotency_key)
            .field("traceparent", &self.traceparent)
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}
