//! Byte-level text encodings written once: [`base64`] (RFC 4648) and
//! [`percent`] (RFC 3986 and HTML form encoding), each with its variants
//! as parameters and pinned to the published test vectors.
//!
//! A leaf: it imports no other crate module. Whoever needs an encoding
//! (`image`, the web tools, MCP and its OAuth, the OTLP configuration, the
//! context-window probe) calls these instead of writing its own.

pub(crate) mod base64;
pub(crate) mod percent;
