//! Stub; being written.

/// Escape control, bidi and zero-width characters.
pub fn sanitize(text: &str) -> String {
    text.to_string()
}
