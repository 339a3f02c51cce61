//! The network half of OAuth: discovery, registration, the authorization
//! code with PKCE through the loopback redirect (`redirect.rs`), token
//! exchange and refresh. Each step says in its error what it was doing.

use std::io::Read;
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use super::config::{AuthError, OAuth, Result, local, refused, unusable};
use super::pkce::{self, Pkce};
use super::redirect::{Loopback, check_answer};
use super::store::Tokens;
use crate::codec::percent::{self, Space};
use crate::net::{AgentSetup, error_text};
use crate::sanitize::sanitize;
use crate::util::{Secrets, excerpt, redact_url, redact_url_in};

/// The largest metadata or token answer read.
const MAX_BODY: u64 = 256 * 1024;

/// The parameters of a `Bearer` challenge in a `WWW-Authenticate` header
/// (RFC 6750 §3, RFC 9728 §5.1): `(name, value)`, names lowercased.
pub(super) fn bearer_params(header: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = header.trim();
    let mut in_bearer = false;
    while !rest.is_empty() {
        rest = rest.trim_start_matches([' ', ',']);
        // A token: a scheme name, or a parameter name before `=`.
        let end = rest
            .find(|c: char| c == '=' || c == ',' || c.is_whitespace())
            .unwrap_or(rest.len());
        let word = &rest[..end];
        let after = rest[end..].trim_start();
        if let Some(value) = after.strip_prefix('=') {
            let value = value.trim_start();
            let (v, tail) = if let Some(q) = value.strip_prefix('"') {
                // A quoted string, with `\` escapes.
                let mut v = String::new();
                let mut chars = q.char_indices();
                let mut tail = "";
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => v.extend(chars.next().map(|(_, c)| c)),
                        '"' => {
                            tail = &q[i + 1..];
                            break;
                        }
                        c => v.push(c),
                    }
                }
                (v, tail)
            } else {
                let e = value.find([',', ' ']).unwrap_or(value.len());
                (value[..e].to_string(), &value[e..])
            };
            if in_bearer {
                out.push((word.to_ascii_lowercase(), v));
            }
            rest = tail;
        } else {
            if word.is_empty() {
                break;
            }
            // A new scheme begins.
            in_bearer = word.eq_ignore_ascii_case("bearer");
            rest = after;
        }
    }
    out
}

/// An HTTP client for the authorization side: no redirects, bounded.
fn agent(config: &OAuth) -> ureq::Agent {
    AgentSetup::new()
        .with_total_timeout(config.request_timeout)
        .agent()
}

/// What a request to the authorization side got.
enum Got {
    Json(u16, Value),
    /// A status with a body that is not JSON (or none).
    Other(u16),
}

fn send_error(e: &ureq::Error, url: &str, config: &OAuth) -> AuthError {
    let shown = redact_url(url);
    match e {
        ureq::Error::Timeout(_) => AuthError::Timeout(format!(
            "{shown} did not answer within {} s",
            config.request_timeout.as_secs_f64()
        )),
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            AuthError::Timeout(format!(
                "{shown} did not answer within {} s",
                config.request_timeout.as_secs_f64()
            ))
        }
        other => AuthError::Unreachable(format!(
            "cannot reach {shown}: {}",
            excerpt(&error_text(other, url), 200)
        )),
    }
}

/// A failed read of an answer's body: a timeout when the request bound
/// ran out (ureq reports it as an I/O error), else the failure.
fn read_error(e: &std::io::Error, url: &str, config: &OAuth) -> AuthError {
    let shown = redact_url(url);
    let timed_out = e.kind() == std::io::ErrorKind::TimedOut
        || e.get_ref()
            .and_then(|inner| inner.downcast_ref::<ureq::Error>())
            .is_some_and(|u| matches!(u, ureq::Error::Timeout(_)));
    if timed_out {
        AuthError::Timeout(format!(
            "{shown} did not answer within {} s",
            config.request_timeout.as_secs_f64()
        ))
    } else {
        AuthError::Unreachable(format!(
            "reading the answer of {shown} failed: {}",
            excerpt(&redact_url_in(&e.to_string(), url), 200)
        ))
    }
}

/// Read a response: a 3xx is an error (redirects are never followed:
/// metadata and tokens must come from the address the spec names), and so
/// is a body that ends in a failed read (a server trickling past the
/// request bound is a timeout) or runs past [`MAX_BODY`].
fn read(mut resp: ureq::http::Response<ureq::Body>, url: &str, config: &OAuth) -> Result<Got> {
    let status = resp.status().as_u16();
    if (300..400).contains(&status) {
        let to = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(redact_url)
            .unwrap_or_default();
        return unusable(format!(
            "{} redirects ({status}) to {}: redirects are not followed",
            redact_url(url),
            sanitize(&excerpt(&to, 200))
        ));
    }
    let mut bytes = Vec::new();
    let read = resp
        .body_mut()
        .as_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut bytes);
    if let Err(e) = read {
        return Err(read_error(&e, url, config));
    }
    if bytes.len() as u64 > MAX_BODY {
        return unusable(format!(
            "{} answered more than {MAX_BODY} bytes",
            redact_url(url)
        ));
    }
    Ok(match crate::util::json_from_slice::<Value>(&bytes) {
        Ok(v) => Got::Json(status, v),
        Err(_) => Got::Other(status),
    })
}

fn get(config: &OAuth, url: &str) -> Result<Got> {
    let resp = agent(config)
        .get(url)
        .header("Accept", "application/json")
        .header("MCP-Protocol-Version", "2025-06-18")
        .call()
        .map_err(|e| send_error(&e, url, config))?;
    read(resp, url, config)
}

fn post_form(config: &OAuth, url: &str, body: &str) -> Result<Got> {
    let resp = agent(config)
        .post(url)
        .header("Accept", "application/json")
        .header("Content-Type", "application/x-www-form-urlencoded")
        .send(body.as_bytes())
        .map_err(|e| send_error(&e, url, config))?;
    read(resp, url, config)
}

/// The origin (`scheme://authority`) and path of an http(s) URL, without
/// query or fragment; the scheme and host lowercased.
fn split_url(url: &str) -> Option<(String, String)> {
    let url = url.split(['#', '?']).next()?;
    let (scheme, rest) = url.split_once("://")?;
    // Any other scheme (`smb:`, `file:`, `javascript:`) in metadata would
    // reach the browser launcher or a request as is.
    if !scheme.eq_ignore_ascii_case("https") && !scheme.eq_ignore_ascii_case("http") {
        return None;
    }
    let (authority, path) = rest.find('/').map_or((rest, ""), |i| rest.split_at(i));
    if authority.is_empty() {
        return None;
    }
    Some((
        format!(
            "{}://{}",
            scheme.to_ascii_lowercase(),
            authority.to_ascii_lowercase()
        ),
        path.to_string(),
    ))
}

/// Whether an authorization server endpoint may be used: `https`, or
/// plain `http` on a loopback host (`localhost`, `127.0.0.0/8`, `[::1]`),
/// where nothing crosses a network. The MCP authorization spec asks HTTPS
/// of every authorization server endpoint: a code, a PKCE verifier and
/// tokens go to them.
fn served_securely(url: &str) -> bool {
    let Some((origin, _)) = split_url(url) else {
        return false;
    };
    let Some(authority) = origin.strip_prefix("http://") else {
        // `split_url` knows only http and https.
        return true;
    };
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Whether the resource `claimed` covers the server at `url`: the same
/// origin, and a path equal to or a parent of the server's.
fn covers(claimed: &str, url: &str) -> bool {
    let (Some((co, cp)), Some((uo, up))) = (split_url(claimed), split_url(url)) else {
        return false;
    };
    let cp = cp.trim_end_matches('/');
    let up = up.trim_end_matches('/');
    co == uo && (up == cp || up.starts_with(&format!("{cp}/")))
}

/// The authorization server's metadata, validated.
struct AsMeta {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    registration_endpoint: Option<String>,
    iss_supported: bool,
    scopes: Option<String>,
}

/// What discovery found.
struct Found {
    resource: String,
    meta: AsMeta,
    scope: Option<String>,
}

/// Protected resource metadata (RFC 9728), then the authorization
/// server's (RFC 8414 / OpenID Connect Discovery).
fn discover(config: &OAuth, url: &str, challenge: Option<&str>) -> Result<Found> {
    let params = challenge.map(bearer_params).unwrap_or_default();
    let param = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let Some((origin, path)) = split_url(url) else {
        return unusable(format!("{} is not an http(s) URL", redact_url(url)));
    };
    let candidates = if let Some(prm) = param("resource_metadata") {
        vec![prm]
    } else {
        // The well-known URLs in the spec's order: at the endpoint's path,
        // then at the root.
        let mut c = Vec::new();
        let path = path.trim_end_matches('/');
        if !path.is_empty() {
            c.push(format!(
                "{origin}/.well-known/oauth-protected-resource{path}"
            ));
        }
        c.push(format!("{origin}/.well-known/oauth-protected-resource"));
        c
    };
    let mut prm = None;
    let mut tried = Vec::new();
    for candidate in &candidates {
        if split_url(candidate).is_none() {
            return unusable(format!(
                "the resource_metadata URL `{}` is not an http(s) URL",
                sanitize(&excerpt(candidate, 200))
            ));
        }
        match get(config, candidate)? {
            Got::Json(200, v) if v.is_object() => {
                prm = Some(v);
                break;
            }
            Got::Json(status, _) | Got::Other(status) => {
                tried.push(format!("{} ({status})", redact_url(candidate)));
            }
        }
    }
    let Some(prm) = prm else {
        return unusable(format!(
            "no protected resource metadata: tried {}",
            tried.join(", ")
        ));
    };
    let resource = prm["resource"].as_str().unwrap_or_default().to_string();
    if !covers(&resource, url) {
        return unusable(format!(
            "the protected resource metadata is for another resource (`{}`), not {}",
            sanitize(&excerpt(&resource, 200)),
            redact_url(url)
        ));
    }
    let Some(issuer) = prm["authorization_servers"]
        .as_array()
        .and_then(|a| a.first())
        .and_then(Value::as_str)
    else {
        return unusable("the protected resource metadata names no authorization server");
    };
    let meta = as_metadata(config, issuer)?;
    let scope = config
        .scope
        .clone()
        .or_else(|| param("scope"))
        .or_else(|| {
            let s = prm["scopes_supported"].as_array()?;
            let s: Vec<&str> = s.iter().filter_map(Value::as_str).collect();
            (!s.is_empty()).then(|| s.join(" "))
        })
        .or_else(|| meta.scopes.clone());
    Ok(Found {
        resource,
        meta,
        scope,
    })
}

/// The metadata of the authorization server `issuer`, from the first of
/// the spec's well-known URLs that answers.
fn as_metadata(config: &OAuth, issuer: &str) -> Result<AsMeta> {
    let Some((origin, path)) = split_url(issuer) else {
        return unusable(format!(
            "the authorization server `{}` is not an http(s) URL",
            sanitize(&excerpt(issuer, 200))
        ));
    };
    if !served_securely(issuer) {
        return unusable(format!(
            "the authorization server `{}` is not served over HTTPS (plain http only on a loopback host)",
            sanitize(&excerpt(issuer, 200))
        ));
    }
    let path = path.trim_end_matches('/');
    let urls = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    let mut tried = Vec::new();
    for url in &urls {
        let v = match get(config, url)? {
            Got::Json(200, v) if v.is_object() => v,
            Got::Json(200, _) | Got::Other(200) => {
                return unusable(format!(
                    "the authorization server metadata at {} is not a JSON object",
                    redact_url(url)
                ));
            }
            Got::Json(status, _) | Got::Other(status) => {
                tried.push(format!("{} ({status})", redact_url(url)));
                continue;
            }
        };
        let text = |k: &str| v[k].as_str().map(String::from);
        // RFC 8414 §3.3: the issuer must be the one the URL was made from.
        if text("issuer").as_deref() != Some(issuer) {
            return unusable(format!(
                "the metadata at {} names the issuer `{}`, not `{}`",
                redact_url(url),
                sanitize(&excerpt(&text("issuer").unwrap_or_default(), 200)),
                sanitize(&excerpt(issuer, 200))
            ));
        }
        let endpoint = |k: &str| -> Result<String> {
            match text(k).filter(|u| split_url(u).is_some()) {
                Some(u) if served_securely(&u) => Ok(u),
                Some(_) => unusable(format!(
                    "the metadata at {} has no valid `{k}`: it is not served over HTTPS (plain http only on a loopback host)",
                    redact_url(url)
                )),
                None => unusable(format!(
                    "the metadata at {} has no valid `{k}`",
                    redact_url(url)
                )),
            }
        };
        let s256 = v["code_challenge_methods_supported"]
            .as_array()
            .is_some_and(|m| m.iter().any(|m| m == "S256"));
        if !s256 {
            return unusable(format!(
                "the authorization server {} does not offer PKCE S256",
                redact_url(issuer)
            ));
        }
        return Ok(AsMeta {
            issuer: issuer.to_string(),
            authorization_endpoint: endpoint("authorization_endpoint")?,
            token_endpoint: endpoint("token_endpoint")?,
            registration_endpoint: text("registration_endpoint").filter(|u| served_securely(u)),
            iss_supported: v["authorization_response_iss_parameter_supported"] == true,
            scopes: v["scopes_supported"].as_array().map(|s| {
                s.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(" ")
            }),
        });
    }
    unusable(format!(
        "no authorization server metadata: tried {}",
        tried.join(", ")
    ))
}

/// Dynamic client registration (RFC 7591): `(client_id, client_secret)`.
fn register(
    config: &OAuth,
    meta: &AsMeta,
    redirect: &str,
    scope: Option<&str>,
) -> Result<(String, Option<String>)> {
    let Some(endpoint) = &meta.registration_endpoint else {
        return unusable(format!(
            "the authorization server {} offers no dynamic client registration: give a client id (OAuth::client_id)",
            redact_url(&meta.issuer)
        ));
    };
    let mut body = json!({
        "client_name": config.client_name,
        "redirect_uris": [redirect],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    });
    if let Some(scope) = scope {
        body["scope"] = json!(scope);
    }
    let resp = agent(config)
        .post(endpoint)
        .header("Accept", "application/json")
        .header("Content-Type", "application/json")
        .send(body.to_string().as_bytes())
        .map_err(|e| send_error(&e, endpoint, config))?;
    match read(resp, endpoint, config)? {
        Got::Json(200 | 201, v) => match v["client_id"].as_str() {
            Some(id) if !id.is_empty() => Ok((
                id.to_string(),
                v["client_secret"].as_str().map(String::from),
            )),
            _ => unusable("the client registration answer has no client_id"),
        },
        Got::Json(status, v) => refused(format!(
            "the client registration was refused ({status}): {}",
            oauth_error(&v, &Secrets::default())
        )),
        Got::Other(status) => refused(format!("the client registration was refused ({status})")),
    }
}

/// An OAuth error body as one short line (`error: description`), without
/// `secrets` (hidden before the line is cut, so no part of one is left).
fn oauth_error(v: &Value, secrets: &Secrets) -> String {
    let error = v["error"].as_str().unwrap_or("unknown error");
    let text = match v["error_description"].as_str() {
        Some(d) => format!("{error}: {d}"),
        None => error.to_string(),
    };
    sanitize(&excerpt(&secrets.redact(&text), 200)).into_owned()
}

/// The values of a token request's form that are secret (the code, the
/// PKCE verifier, the refresh token, the client secret), as sent and
/// form-encoded.
fn form_secrets(form: &[(&str, &str)]) -> Secrets {
    let secret = |k: &str| {
        matches!(
            k,
            "code" | "code_verifier" | "refresh_token" | "client_secret"
        )
    };
    Secrets::new(form.iter().filter(|(k, _)| secret(k)).flat_map(|(_, v)| {
        [
            (*v).to_string(),
            percent::form(&[("", v)], Space::Escaped)[1..].to_string(),
        ]
    }))
}

/// A full login: discovery, registration, the browser, the code exchange.
pub(super) fn login(
    config: &OAuth,
    url: &str,
    challenge: Option<&str>,
    closed: &dyn Fn() -> bool,
) -> Result<Tokens> {
    let found = discover(config, url, challenge)?;
    let loopback = Loopback::bind(config.redirect_port)?;
    let redirect = loopback.uri.as_str();
    let (client_id, client_secret) = match &config.client_id {
        Some(id) => (id.clone(), config.client_secret.clone()),
        None => register(config, &found.meta, redirect, found.scope.as_deref())?,
    };
    let pkce = Pkce::new()?;
    let state = pkce::random_state()?;
    let mut query = vec![
        ("response_type", "code"),
        ("client_id", client_id.as_str()),
        ("redirect_uri", redirect),
        ("code_challenge", pkce.challenge.as_str()),
        ("code_challenge_method", "S256"),
        ("state", state.as_str()),
        ("resource", found.resource.as_str()),
    ];
    if let Some(scope) = &found.scope {
        query.push(("scope", scope));
    }
    let endpoint = &found.meta.authorization_endpoint;
    let sep = if endpoint.contains('?') { '&' } else { '?' };
    let auth_url = format!("{endpoint}{sep}{}", percent::form(&query, Space::Escaped));
    config
        .browser
        .open(&auth_url)
        .map_err(|e| AuthError::Local(format!("the browser could not be opened: {e}")))?;
    let answer = loopback.wait(config.login_timeout, closed)?;
    let meta = &found.meta;
    let code = check_answer(&answer, &state, &meta.issuer, meta.iss_supported)?;
    let mut form = vec![
        ("grant_type", "authorization_code"),
        ("code", code.as_str()),
        ("redirect_uri", redirect),
        ("client_id", client_id.as_str()),
        ("code_verifier", pkce.verifier.as_str()),
        ("resource", found.resource.as_str()),
    ];
    if let Some(secret) = &client_secret {
        form.push(("client_secret", secret));
    }
    let template = Tokens {
        access_token: String::new(),
        refresh_token: None,
        expires_at: None,
        scope: found.scope.clone(),
        issuer: found.meta.issuer.clone(),
        client_id: client_id.clone(),
        client_secret: client_secret.clone(),
        token_endpoint: found.meta.token_endpoint.clone(),
        resource: found.resource.clone(),
    };
    token_request(config, &template, &form)
}

/// Exchange the refresh token for new tokens.
pub(super) fn refresh(config: &OAuth, old: &Tokens) -> Result<Tokens> {
    let Some(refresh) = &old.refresh_token else {
        return local("no refresh token");
    };
    let mut form = vec![
        ("grant_type", "refresh_token"),
        ("refresh_token", refresh.as_str()),
        ("client_id", old.client_id.as_str()),
        ("resource", old.resource.as_str()),
    ];
    if let Some(secret) = &old.client_secret {
        form.push(("client_secret", secret));
    }
    let mut fresh = token_request(config, old, &form)?;
    // RFC 6749 §6: the old refresh token stays valid unless a new one came.
    if fresh.refresh_token.is_none() {
        fresh.refresh_token.clone_from(&old.refresh_token);
    }
    Ok(fresh)
}

/// POST `form` to the token endpoint; the answer over `template`.
fn token_request(config: &OAuth, template: &Tokens, form: &[(&str, &str)]) -> Result<Tokens> {
    let body = percent::form(form, Space::Escaped);
    let v = match post_form(config, &template.token_endpoint, &body)? {
        Got::Json(200, v) => v,
        Got::Json(status, v) => {
            // An endpoint that quotes the request in its error would put
            // the code, the verifier or a secret in ours.
            return refused(format!(
                "the token request was refused ({status}): {}",
                oauth_error(&v, &form_secrets(form))
            ));
        }
        Got::Other(status) => {
            return refused(format!(
                "the token endpoint answered {status} without a JSON body"
            ));
        }
    };
    let Some(access) = v["access_token"].as_str().filter(|t| !t.is_empty()) else {
        return unusable("the token answer has no access_token");
    };
    if !v["token_type"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("bearer"))
    {
        return unusable("the token answer's token_type is not Bearer");
    }
    if let Some(aud) = jwt_audiences(access)
        && !aud.iter().any(|a| covers(a, &template.resource))
    {
        return unusable(format!(
            "the access token is for another audience ({}), not {}",
            sanitize(&excerpt(&aud.join(", "), 200)),
            redact_url(&template.resource)
        ));
    }
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    Ok(Tokens {
        access_token: access.to_string(),
        refresh_token: v["refresh_token"].as_str().map(String::from),
        expires_at: v["expires_in"].as_u64().map(|s| now.saturating_add(s)),
        scope: v["scope"]
            .as_str()
            .map(String::from)
            .or_else(|| template.scope.clone()),
        ..template.clone()
    })
}

/// The `aud` of a JWT access token, if it is a JWT that has one (an
/// opaque token gives `None`: only the server can judge it).
fn jwt_audiences(token: &str) -> Option<Vec<String>> {
    let mut parts = token.split('.');
    let (_, payload, _) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let claims: Value = serde_json::from_slice(&pkce::base64url_decode(payload)?).ok()?;
    match &claims["aud"] {
        Value::String(a) => Some(vec![a.clone()]),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .map(String::from)
                .collect(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_send_error_hides_the_secrets_of_the_url() {
        let url = "https://as.example/token?client_secret=s3cret";
        let e = ureq::Error::BadUri(format!("{url} is bad"));
        let err = send_error(&e, url, &OAuth::new());
        assert!(matches!(err, AuthError::Unreachable(_)), "{err:?}");
        let text = err.message();
        assert!(!text.contains("s3cret"), "{text}");
        assert!(
            text.starts_with("cannot reach https://as.example/token"),
            "{text}"
        );
    }

    /// A refused refresh quoting the form, raw and encoded: the refresh
    /// token and the client secret are hidden in both, the rest is kept.
    #[test]
    fn a_refused_token_request_hides_the_forms_secrets() {
        let form = [
            ("grant_type", "refresh_token"),
            ("refresh_token", "rt-1/2+3"),
            ("client_id", "cid"),
            ("client_secret", "cs 4"),
        ];
        let sent = percent::form(&form, Space::Escaped);
        let v = json!({"error": "invalid_grant",
            "error_description": format!("rt-1/2+3 and cs 4 in {sent}")});
        let line = oauth_error(&v, &form_secrets(&form));
        for secret in ["rt-1", "cs 4", "cs+4", "cs%204", "rt-1%2F2%2B3"] {
            assert!(!line.contains(secret), "{secret}: {line}");
        }
        assert!(line.starts_with("invalid_grant: "), "{line}");
        assert!(line.contains("client_id=cid"), "{line}");
    }

    #[test]
    fn bearer_challenges_parse() {
        let p = bearer_params(
            r#"Basic realm="x", Bearer error="invalid_token", resource_metadata="http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp", scope=a"#,
        );
        assert_eq!(
            p,
            [
                ("error".to_string(), "invalid_token".to_string()),
                (
                    "resource_metadata".into(),
                    "http://127.0.0.1:9/.well-known/oauth-protected-resource/mcp".into()
                ),
                ("scope".into(), "a".into())
            ]
        );
        assert_eq!(
            bearer_params(r#"bearer scope="a \"b\"""#),
            [("scope".to_string(), "a \"b\"".to_string())]
        );
        assert!(bearer_params("Basic realm=x").is_empty());
        assert!(bearer_params("").is_empty());
        assert!(bearer_params("Bearer =,,=\"").len() <= 1);
    }

    /// Only http(s) URLs are URLs here: metadata naming another scheme
    /// is refused, never opened or requested.
    #[test]
    fn only_http_and_https_urls_split() {
        assert!(split_url("https://as.example/authorize").is_some());
        assert!(split_url("HTTP://127.0.0.1:9/x").is_some());
        for url in [
            "smb://attacker/share",
            "file://host/etc/passwd",
            "javascript://x%0aalert(1)",
        ] {
            assert_eq!(split_url(url), None, "{url}");
        }
    }

    /// HTTPS anywhere, plain http only where nothing crosses a network.
    #[test]
    fn only_https_or_a_loopback_host_is_served_securely() {
        for url in [
            "https://as.example/token",
            "HTTPS://AS.example:8443/t",
            "http://127.0.0.1:9/token",
            "http://127.8.9.10/token",
            "http://localhost:1/t",
            "http://[::1]:7/t",
            "http://user@127.0.0.1:9/t",
        ] {
            assert!(served_securely(url), "{url}");
        }
        for url in [
            "http://as.example/token",
            "http://10.0.0.1/token",
            "http://localhost.as.example/t",
            "http://127.0.0.1.as.example/t",
            "http://127.0.0.1@as.example/t",
            "http://[::2]/t",
            "smb://127.0.0.1/share",
            "",
        ] {
            assert!(!served_securely(url), "{url}");
        }
    }

    #[test]
    fn a_resource_covers_itself_and_its_children_only() {
        assert!(covers("http://H:1/mcp", "http://h:1/mcp"));
        assert!(covers("http://h:1/", "http://h:1/mcp"));
        assert!(covers("http://h:1", "http://h:1/mcp/"));
        assert!(!covers("http://h:1/mc", "http://h:1/mcp"));
        assert!(!covers("http://h:2/mcp", "http://h:1/mcp"));
        assert!(!covers("https://h:1/mcp", "http://h:1/mcp"));
        assert!(!covers("", "http://h:1/mcp"));
    }

    #[test]
    fn jwt_audiences_are_read_from_the_payload() {
        let payload = pkce::base64url(br#"{"aud":["http://h/mcp","x"]}"#);
        assert_eq!(
            jwt_audiences(&format!("e30.{payload}.sig")).unwrap(),
            ["http://h/mcp", "x"]
        );
        assert!(jwt_audiences("opaque-token").is_none());
        assert!(jwt_audiences("a.b.c.d").is_none());
    }
}
