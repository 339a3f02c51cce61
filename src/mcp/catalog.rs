//! What a server offers besides tools: resources, resource templates and
//! prompts, as the host sees them, parsed from the list, read and get
//! results.

use serde_json::Value;

use super::content;

/// A resource as a server lists it (`resources/list`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ResourceInfo {
    /// Its URI (`resources/read` takes this one).
    pub uri: String,
    /// The server's name for it.
    pub name: String,
    /// Its human-readable title, if any.
    pub title: Option<String>,
    /// Its description, if any.
    pub description: Option<String>,
    /// Its media type, if the server said.
    pub mime_type: Option<String>,
    /// Its size in bytes, if the server said.
    pub size: Option<u64>,
}

/// A parameterized resource (`resources/templates/list`): an RFC 6570 URI
/// template whose expansions can be read.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ResourceTemplate {
    /// The URI template, e.g. `file:///{path}`.
    pub uri_template: String,
    /// The server's name for it.
    pub name: String,
    /// Its human-readable title, if any.
    pub title: Option<String>,
    /// Its description, if any.
    pub description: Option<String>,
    /// The media type of what it expands to, if the server said.
    pub mime_type: Option<String>,
}

/// One item of a `resources/read` result.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct ResourceContent {
    /// The URI of this item (a read may return several).
    pub uri: String,
    /// Its media type, if the server said.
    pub mime_type: Option<String>,
    /// Its text, for a text resource.
    pub text: Option<String>,
    /// Its bytes, base64 as sent, for a binary resource.
    pub blob: Option<String>,
}

impl ResourceContent {
    /// The text, or one bracketed line for a binary item
    /// (`[resource: <uri>, image/png, 1234 bytes]`), as the model would see
    /// it.
    pub fn to_text(&self) -> String {
        match (&self.text, &self.blob) {
            (Some(text), _) => text.clone(),
            (None, blob) => {
                let mut item = serde_json::json!({"type": "resource", "resource": {"uri": self.uri, "blob": blob.clone().unwrap_or_default()}});
                if let Some(m) = &self.mime_type {
                    item["resource"]["mimeType"] = Value::String(m.clone());
                }
                content::item(&item)
            }
        }
    }
}

/// A prompt as a server lists it (`prompts/list`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PromptInfo {
    /// The server's name for it (`prompts/get` takes this one).
    pub name: String,
    /// Its human-readable title, if any.
    pub title: Option<String>,
    /// Its description, if any.
    pub description: Option<String>,
    /// The arguments it takes.
    pub arguments: Vec<PromptArgument>,
}

/// One argument of a prompt.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct PromptArgument {
    /// Its name.
    pub name: String,
    /// Its description, if any.
    pub description: Option<String>,
    /// Whether `prompts/get` needs it.
    pub required: bool,
}

/// A prompt filled in by the server (`prompts/get`).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Prompt {
    /// Its description, if any.
    pub description: Option<String>,
    /// Its messages: the role (`user` or `assistant`) and the text (other
    /// content as one bracketed line, as the model sees tool results).
    pub messages: Vec<(String, String)>,
}

impl Prompt {
    /// The text of every message, joined by blank lines: what a host sends
    /// as the next user message.
    pub fn text(&self) -> String {
        self.messages
            .iter()
            .map(|(_, text)| text.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(String::from)
}

pub(super) fn resource(v: &Value) -> Option<ResourceInfo> {
    Some(ResourceInfo {
        uri: text(&v["uri"]).filter(|u| !u.is_empty())?,
        name: text(&v["name"]).unwrap_or_default(),
        title: text(&v["title"]),
        description: text(&v["description"]),
        mime_type: text(&v["mimeType"]),
        size: v["size"].as_u64(),
    })
}

pub(super) fn template(v: &Value) -> Option<ResourceTemplate> {
    Some(ResourceTemplate {
        uri_template: text(&v["uriTemplate"]).filter(|u| !u.is_empty())?,
        name: text(&v["name"]).unwrap_or_default(),
        title: text(&v["title"]),
        description: text(&v["description"]),
        mime_type: text(&v["mimeType"]),
    })
}

pub(super) fn contents(result: &Value) -> Vec<ResourceContent> {
    result["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| ResourceContent {
            uri: text(&c["uri"]).unwrap_or_default(),
            mime_type: text(&c["mimeType"]),
            text: text(&c["text"]),
            blob: text(&c["blob"]),
        })
        .collect()
}

pub(super) fn prompt_info(v: &Value) -> Option<PromptInfo> {
    Some(PromptInfo {
        name: text(&v["name"]).filter(|n| !n.is_empty())?,
        title: text(&v["title"]),
        description: text(&v["description"]),
        arguments: v["arguments"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| {
                Some(PromptArgument {
                    name: text(&a["name"])?,
                    description: text(&a["description"]),
                    required: a["required"] == Value::Bool(true),
                })
            })
            .collect(),
    })
}

pub(super) fn prompt(result: &Value) -> Prompt {
    Prompt {
        description: text(&result["description"]),
        messages: result["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| {
                let role = text(&m["role"]).unwrap_or_else(|| "user".into());
                (role, content::item(&m["content"]))
            })
            .collect(),
    }
}
