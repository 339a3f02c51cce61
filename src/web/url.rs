//! Just enough of RFC 3986 for the web tools: split an absolute `http` or
//! `https` URL into its parts and resolve a reference (a link's `href`, a
//! redirect's `Location`) against a base.
//!
//! Not a general URL parser: no percent-decoding, no IDNA (a host in
//! non-ASCII letters is refused; the punycode form works), no userinfo
//! (`user:pass@` is refused, so a model cannot smuggle credentials).

use std::fmt;

use crate::codec::percent::{self, Keep, Space};

/// An absolute http(s) URL, split.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Url {
    /// `http` or `https`, lowercase.
    pub(crate) scheme: String,
    /// Host as written, lowercase; an IPv6 literal keeps its brackets.
    pub(crate) host: String,
    pub(crate) port: Option<u16>,
    /// Path from the first `/` (at least `/`), then `?query` if any. No fragment.
    pub(crate) path_and_query: String,
}

impl Url {
    /// Parse an absolute `http://` or `https://` URL.
    pub(crate) fn parse(s: &str) -> Result<Url, String> {
        let s = s.trim();
        let (scheme, rest) = s.split_once("://").ok_or_else(|| {
            "not an absolute URL (expected http://... or https://...)".to_string()
        })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(format!(
                "the `{}` scheme is not supported (only http and https)",
                crate::util::excerpt(&scheme, 20)
            ));
        }
        let rest = rest.split('#').next().unwrap_or("");
        let auth_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(auth_end);
        if authority.contains('@') {
            return Err("URLs with a user name or password are not supported".into());
        }
        let (host, port) = split_port(authority)?;
        if host.is_empty() {
            return Err("the URL has no host".into());
        }
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
        let literal = host.starts_with('[') && host.ends_with(']');
        if !literal && !host.chars().all(valid) {
            return Err(format!(
                "the host `{}` is not a valid host name",
                crate::util::excerpt(host, 60)
            ));
        }
        if tail.chars().any(char::is_control) {
            return Err("the URL contains control characters".into());
        }
        let mut path_and_query = String::with_capacity(tail.len() + 1);
        if !tail.starts_with('/') {
            path_and_query.push('/');
        }
        // Percent-encode what may not appear raw in a request line.
        path_and_query.push_str(&percent::encode(tail, Keep::RequestTarget, Space::Escaped));
        Ok(Url {
            scheme,
            host: host.to_ascii_lowercase(),
            port,
            path_and_query,
        })
    }

    /// The port, or the scheme's default.
    pub(crate) fn port_or_default(&self) -> u16 {
        self.port
            .unwrap_or(if self.scheme == "https" { 443 } else { 80 })
    }

    /// The host without IPv6 brackets, for name resolution.
    pub(crate) fn bare_host(&self) -> &str {
        self.host.trim_start_matches('[').trim_end_matches(']')
    }

    /// Resolve `reference` against this URL (RFC 3986 section 5.2).
    pub(crate) fn join(&self, reference: &str) -> Result<Url, String> {
        Url::parse(&resolve(&self.to_string(), reference))
    }
}

impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.scheme, self.host)?;
        if let Some(port) = self.port {
            write!(f, ":{port}")?;
        }
        f.write_str(&self.path_and_query)
    }
}

fn split_port(authority: &str) -> Result<(&str, Option<u16>), String> {
    let colon = if authority.starts_with('[') {
        authority
            .find(']')
            .and_then(|i| authority[i..].find(':').map(|j| i + j))
    } else {
        authority.rfind(':')
    };
    match colon {
        None => Ok((authority, None)),
        Some(i) if i + 1 == authority.len() => Ok((&authority[..i], None)),
        Some(i) => authority[i + 1..]
            .parse::<u16>()
            .map(|p| (&authority[..i], Some(p)))
            .map_err(|_| "the URL has an invalid port".to_string()),
    }
}

/// Resolve `reference` against the absolute URL `base`, as a string. Works
/// for any scheme; a reference with a scheme of its own is returned as is.
pub(crate) fn resolve(base: &str, reference: &str) -> String {
    let r = reference.trim();
    let has_scheme = r.find(':').is_some_and(|i| {
        i > 0
            && r[..i]
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
            && r.as_bytes()[0].is_ascii_alphabetic()
            && !r[..i].contains('/')
    });
    if has_scheme {
        return r.to_string();
    }
    let (b_scheme, b_rest) = base.split_once(':').unwrap_or(("", base));
    let b_rest = b_rest.split('#').next().unwrap_or("");
    let (b_auth, b_path_q) = match b_rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find(['/', '?']).unwrap_or(after.len());
            (Some(&after[..end]), &after[end..])
        }
        None => (None, b_rest),
    };
    let (b_path, b_query) = match b_path_q.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (b_path_q, None),
    };
    let auth = |a: Option<&str>| a.map(|a| format!("//{a}")).unwrap_or_default();
    if let Some(after) = r.strip_prefix("//") {
        return format!("{b_scheme}://{after}");
    }
    let (r_nofrag, frag) = match r.split_once('#') {
        Some((a, f)) => (a, Some(f)),
        None => (r, None),
    };
    let frag = frag.map(|f| format!("#{f}")).unwrap_or_default();
    let (r_path, r_query) = match r_nofrag.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (r_nofrag, None),
    };
    let (path, query) = if r_path.is_empty() {
        (b_path.to_string(), r_query.or(b_query))
    } else if r_path.starts_with('/') {
        (remove_dots(r_path), r_query)
    } else {
        let merged = match b_path.rfind('/') {
            Some(i) => format!("{}{r_path}", &b_path[..=i]),
            None if b_auth.is_some() => format!("/{r_path}"),
            None => r_path.to_string(),
        };
        (remove_dots(&merged), r_query)
    };
    let query = query.map(|q| format!("?{q}")).unwrap_or_default();
    format!("{b_scheme}:{}{path}{query}{frag}", auth(b_auth))
}

/// Remove `.` and `..` segments (RFC 3986 section 5.2.4).
fn remove_dots(path: &str) -> String {
    let mut out: Vec<&str> = Vec::new();
    let absolute = path.starts_with('/');
    let segments: Vec<&str> = path.split('/').collect();
    let last = segments.len().saturating_sub(1);
    for (i, seg) in segments.iter().enumerate() {
        match *seg {
            "." => {
                if i == last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > usize::from(absolute) {
                    out.pop();
                }
                if i == last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    let joined = out.join("/");
    if absolute && !joined.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display() {
        let u = Url::parse("HTTP://Example.COM:8080/a/b?q=1#frag").unwrap();
        assert_eq!(u.host, "example.com");
        assert_eq!(u.port_or_default(), 8080);
        assert_eq!(u.to_string(), "http://example.com:8080/a/b?q=1");
        let u = Url::parse("https://[::1]/").unwrap();
        assert_eq!((u.bare_host(), u.port_or_default()), ("::1", 443));
        assert_eq!(
            Url::parse("http://x.org?q").unwrap().to_string(),
            "http://x.org/?q"
        );
        for bad in [
            "ftp://x/",
            "file:///etc/passwd",
            "x.org",
            "http://u:p@x.org/",
            "http://",
            "http://x:99999/",
            "http://a b/",
            "http://x/a\nb",
            "http://bücher.de/",
        ] {
            assert!(Url::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rfc3986_examples() {
        let base = "http://a/b/c/d;p?q";
        for (r, want) in [
            ("g", "http://a/b/c/g"),
            ("./g", "http://a/b/c/g"),
            ("g/", "http://a/b/c/g/"),
            ("/g", "http://a/g"),
            ("//g", "http://g"),
            ("?y", "http://a/b/c/d;p?y"),
            ("g?y", "http://a/b/c/g?y"),
            ("#s", "http://a/b/c/d;p?q#s"),
            ("", "http://a/b/c/d;p?q"),
            (".", "http://a/b/c/"),
            ("..", "http://a/b/"),
            ("../g", "http://a/b/g"),
            ("../..", "http://a/"),
            ("../../../g", "http://a/g"),
            ("/./g", "http://a/g"),
            ("g;x=1/../y", "http://a/b/c/y"),
            ("mailto:x@y", "mailto:x@y"),
            ("HTTPS://z/", "HTTPS://z/"),
        ] {
            assert_eq!(resolve(base, r), want, "{r}");
        }
    }
}
