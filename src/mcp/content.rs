//! A `tools/call` result as the model sees it.
//!
//! | content | observation |
//! |---|---|
//! | `text` | the text |
//! | `image`, `audio` | `[image: image/png, 1234 bytes]` (never the base64) |
//! | `resource_link` | `[resource link: name <uri>, text/plain]` and its description |
//! | `resource` with `text` | `[resource: <uri>, text/plain, 42 chars]`, then the text |
//! | `resource` with `blob` | `[resource: <uri>, application/gzip, 1234 bytes]` |
//! | another type | `[<type> content]` |
//! | `structuredContent` | compact JSON, when no item is text |
//!
//! Items are joined with newlines. `isError: true` makes the whole text a
//! [`ToolError`], which the model sees as `"Error: ..."`.

use serde_json::Value;

use crate::ToolError;

/// The observation for one `CallToolResult`.
pub(super) fn observation(result: &Value) -> Result<String, ToolError> {
    let items = result["content"].as_array().map_or(&[][..], Vec::as_slice);
    let mut parts: Vec<String> = items.iter().map(item).collect();
    let has_text = items.iter().any(|i| i["type"] == "text");
    if !has_text && let Some(structured) = result.get("structuredContent").filter(|v| !v.is_null())
    {
        parts.insert(0, structured.to_string());
    }
    let text = parts.join("\n");
    if result["isError"] == Value::Bool(true) {
        let text = if text.trim().is_empty() {
            "the tool reported an error".to_string()
        } else {
            text
        };
        Err(ToolError::new(text))
    } else if text.is_empty() {
        Ok("(no content)".to_string())
    } else {
        Ok(text)
    }
}

/// One content item as the model sees it.
pub(super) fn item(item: &Value) -> String {
    let str_of = |key: &str| item[key].as_str().unwrap_or_default();
    let mime = |v: &Value| {
        v["mimeType"]
            .as_str()
            .unwrap_or("application/octet-stream")
            .to_string()
    };
    match item["type"].as_str().unwrap_or_default() {
        "text" => str_of("text").to_string(),
        kind @ ("image" | "audio") => {
            format!(
                "[{kind}: {}, {} bytes]",
                mime(item),
                base64_len(str_of("data"))
            )
        }
        "resource_link" => {
            let mut s = format!("[resource link: {} <{}>", str_of("name"), str_of("uri"));
            if let Some(m) = item["mimeType"].as_str() {
                s.push_str(", ");
                s.push_str(m);
            }
            s.push(']');
            if let Some(d) = item["description"].as_str().filter(|d| !d.is_empty()) {
                s.push(' ');
                s.push_str(d);
            }
            s
        }
        "resource" => {
            let r = &item["resource"];
            let uri = r["uri"].as_str().unwrap_or_default();
            if let Some(text) = r["text"].as_str() {
                let mime = r["mimeType"].as_str().unwrap_or("text/plain");
                let n = text.chars().count();
                format!("[resource: <{uri}>, {mime}, {n} chars]\n{text}")
            } else {
                let bytes = base64_len(r["blob"].as_str().unwrap_or_default());
                format!("[resource: <{uri}>, {}, {bytes} bytes]", mime(r))
            }
        }
        "" => "[content without a type]".to_string(),
        other => format!("[{other} content]"),
    }
}

/// Decoded length of base64 text (padding and whitespace ignored).
fn base64_len(data: &str) -> usize {
    let n = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    n * 3 / 4
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_content_type_is_text_without_base64() {
        let r = json!({"content": [
            {"type": "text", "text": "hi"},
            {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource_link", "uri": "file:///a.txt", "name": "a.txt", "mimeType": "text/plain", "description": "A file"},
            {"type": "resource", "resource": {"uri": "test://1", "mimeType": "text/plain", "text": "body"}},
            {"type": "resource", "resource": {"uri": "test://2", "mimeType": "application/gzip", "blob": "AAAAAAAA"}},
            {"type": "hologram"}
        ]});
        assert_eq!(
            observation(&r).unwrap(),
            "hi\n[image: image/png, 8 bytes]\n[audio: audio/wav, 3 bytes]\n\
             [resource link: a.txt <file:///a.txt>, text/plain] A file\n\
             [resource: <test://1>, text/plain, 4 chars]\nbody\n\
             [resource: <test://2>, application/gzip, 6 bytes]\n[hologram content]"
        );
    }

    #[test]
    fn structured_content_only_without_text_and_errors_are_tool_errors() {
        let r = json!({"content": [], "structuredContent": {"t": 22.5}});
        assert_eq!(observation(&r).unwrap(), r#"{"t":22.5}"#);
        let r = json!({"content": [{"type": "text", "text": "{\"t\":22.5}"}], "structuredContent": {"t": 22.5}});
        assert_eq!(observation(&r).unwrap(), r#"{"t":22.5}"#);
        let r = json!({"content": [{"type": "text", "text": "bad input"}], "isError": true});
        assert_eq!(observation(&r).unwrap_err().message(), "bad input");
        assert_eq!(
            observation(&json!({"isError": true}))
                .unwrap_err()
                .message(),
            "the tool reported an error"
        );
        assert_eq!(observation(&json!({})).unwrap(), "(no content)");
    }
}
