//! [`Tokens`] and where they are kept: the [`TokenStore`] seam, a
//! [`MemoryTokenStore`] (the default) and a [`FileTokenStore`].

use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use parking_lot::Mutex;

/// What one login to one MCP server produced: the tokens, and the client
/// registration and endpoints they belong to (so a refresh needs no new
/// discovery).
///
/// `Debug` never shows a token or the client secret.
///
/// ```
/// use pikuri::mcp::Tokens;
/// let t = Tokens::from_json(r#"{"access_token":"at-123","refresh_token":"rt-456",
///     "issuer":"http://127.0.0.1:9/","client_id":"c1","token_endpoint":"http://127.0.0.1:9/token",
///     "resource":"http://127.0.0.1:8/mcp"}"#).unwrap();
/// assert_eq!(t.access_token(), "at-123");
/// assert_eq!(t.issuer(), "http://127.0.0.1:9/");
/// let shown = format!("{t:?}");
/// assert!(!shown.contains("at-123") && !shown.contains("rt-456"));
/// assert_eq!(Tokens::from_json(&t.to_json()).unwrap().access_token(), "at-123");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct Tokens {
    pub(super) access_token: String,
    pub(super) refresh_token: Option<String>,
    /// Seconds since the Unix epoch.
    pub(super) expires_at: Option<u64>,
    pub(super) scope: Option<String>,
    pub(super) issuer: String,
    pub(super) client_id: String,
    pub(super) client_secret: Option<String>,
    pub(super) token_endpoint: String,
    pub(super) resource: String,
}

crate::serde_macros::json_struct! {
    Serialize, Deserialize for Tokens {
        access_token,
        refresh_token [opt],
        expires_at [opt],
        scope [opt],
        issuer,
        client_id,
        client_secret [opt],
        token_endpoint,
        resource,
    }
}

impl Tokens {
    /// The access token, sent as `Authorization: Bearer`.
    pub fn access_token(&self) -> &str {
        &self.access_token
    }

    /// Whether a refresh token came with it.
    pub fn has_refresh_token(&self) -> bool {
        self.refresh_token.is_some()
    }

    /// When the access token expires, if the server said.
    pub fn expires_at(&self) -> Option<SystemTime> {
        self.expires_at.map(|s| UNIX_EPOCH + Duration::from_secs(s))
    }

    /// The authorization server that issued them (its `issuer`).
    pub fn issuer(&self) -> &str {
        &self.issuer
    }

    /// The MCP server they are for (the `resource` asked for).
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The JSON a store keeps (tokens included: keep it private).
    ///
    /// # Panics
    ///
    /// Never: the fields are strings and numbers.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("Tokens always serialize")
    }

    /// Parse what [`to_json`](Tokens::to_json) wrote; `None` if it is not
    /// that.
    pub fn from_json(text: &str) -> Option<Tokens> {
        serde_json::from_str(text).ok()
    }

    /// Whether the access token expires within `margin` of now.
    pub(super) fn expires_within(&self, margin: Duration) -> bool {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs();
        self.expires_at
            .is_some_and(|at| at <= now.saturating_add(margin.as_secs()))
    }
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tokens")
            .field("access_token", &"<redacted>")
            .field(
                "refresh_token",
                &self.refresh_token.as_ref().map(|_| "<redacted>"),
            )
            .field("expires_at", &self.expires_at)
            .field("scope", &self.scope)
            .field("issuer", &self.issuer)
            .field("client_id", &self.client_id)
            .field("resource", &self.resource)
            .finish_non_exhaustive()
    }
}

/// Where [`Tokens`] are kept between requests and runs, keyed by the MCP
/// server's URL.
///
/// Called from the HTTP worker that found the server wanted a token, never
/// while a lock of the crate's is held by another server. An `Err` from
/// [`save`](TokenStore::save) is logged at `warn` (without the tokens) and
/// the tokens are used all the same.
///
/// ```
/// use pikuri::mcp::{MemoryTokenStore, TokenStore, Tokens};
/// let store = MemoryTokenStore::new();
/// assert!(store.load("http://127.0.0.1:8/mcp")?.is_none());
/// # Ok::<(), std::io::Error>(())
/// ```
pub trait TokenStore: Send + Sync {
    /// The tokens kept for `key`, if any.
    ///
    /// # Errors
    ///
    /// Any I/O failure; it is logged and the store treated as empty.
    fn load(&self, key: &str) -> io::Result<Option<Tokens>>;

    /// Keep `tokens` for `key`, replacing what was there.
    ///
    /// # Errors
    ///
    /// Any I/O failure.
    fn save(&self, key: &str, tokens: &Tokens) -> io::Result<()>;

    /// Forget what is kept for `key` (a refresh token the server refused).
    ///
    /// # Errors
    ///
    /// Any I/O failure.
    fn remove(&self, key: &str) -> io::Result<()>;
}

/// Tokens kept in memory only, for the life of the process (the default).
#[derive(Debug, Default)]
pub struct MemoryTokenStore {
    map: Mutex<BTreeMap<String, Tokens>>,
}

impl MemoryTokenStore {
    /// An empty store.
    pub fn new() -> MemoryTokenStore {
        MemoryTokenStore::default()
    }
}

impl TokenStore for MemoryTokenStore {
    fn load(&self, key: &str) -> io::Result<Option<Tokens>> {
        Ok(self.map.lock().get(key).cloned())
    }
    fn save(&self, key: &str, tokens: &Tokens) -> io::Result<()> {
        self.map.lock().insert(key.to_string(), tokens.clone());
        Ok(())
    }
    fn remove(&self, key: &str) -> io::Result<()> {
        self.map.lock().remove(key);
        Ok(())
    }
}

/// Tokens kept in one JSON file, readable and writable by its owner only
/// (mode `0600` on Unix, set when the file is created and again at each
/// write), replaced atomically (a temporary file renamed over it).
///
/// ```
/// use pikuri::mcp::{FileTokenStore, TokenStore, Tokens};
/// let dir = std::env::temp_dir().join(format!("pikuri-doc-store-{}", std::process::id()));
/// let store = FileTokenStore::new(dir.join("tokens.json"));
/// let t = Tokens::from_json(r#"{"access_token":"at","issuer":"i","client_id":"c",
///     "token_endpoint":"t","resource":"r"}"#).unwrap();
/// store.save("http://127.0.0.1:8/mcp", &t)?;
/// assert_eq!(store.load("http://127.0.0.1:8/mcp")?, Some(t));
/// #[cfg(unix)]
/// {
///     use std::os::unix::fs::PermissionsExt;
///     let mode = std::fs::metadata(store.path())?.permissions().mode();
///     assert_eq!(mode & 0o777, 0o600);
/// }
/// store.remove("http://127.0.0.1:8/mcp")?;
/// assert_eq!(store.load("http://127.0.0.1:8/mcp")?, None);
/// # std::fs::remove_dir_all(&dir)?;
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Debug)]
pub struct FileTokenStore {
    path: PathBuf,
    /// One writer at a time within the process.
    lock: Mutex<()>,
}

impl FileTokenStore {
    /// A store in the file at `path` (created, with its directory, on the
    /// first save).
    pub fn new(path: impl Into<PathBuf>) -> FileTokenStore {
        FileTokenStore {
            path: path.into(),
            lock: Mutex::new(()),
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_all(&self) -> io::Result<BTreeMap<String, Tokens>> {
        match std::fs::read_to_string(&self.path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is not a token file: {e}", self.path.display()),
                )
            }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(BTreeMap::new()),
            Err(e) => Err(e),
        }
    }

    fn write_all(&self, map: &BTreeMap<String, Tokens>) -> io::Result<()> {
        if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        let tmp = self
            .path
            .with_extension(format!("tmp{}", std::process::id()));
        let text = serde_json::to_vec_pretty(map).expect("tokens always serialize");
        write_private(&tmp, &text)?;
        std::fs::rename(&tmp, &self.path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }
}

/// Write `bytes` to a new file at `path` that only its owner may read.
fn write_private(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(path)?;
    // A file that already existed keeps its mode through `open`: set it.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    file.write_all(bytes)?;
    file.sync_all()
}

impl TokenStore for FileTokenStore {
    fn load(&self, key: &str) -> io::Result<Option<Tokens>> {
        let _guard = self.lock.lock();
        Ok(self.read_all()?.remove(key))
    }
    fn save(&self, key: &str, tokens: &Tokens) -> io::Result<()> {
        let _guard = self.lock.lock();
        // A damaged file is replaced rather than blocking every login.
        let mut map = self.read_all().unwrap_or_default();
        map.insert(key.to_string(), tokens.clone());
        self.write_all(&map)
    }
    fn remove(&self, key: &str) -> io::Result<()> {
        let _guard = self.lock.lock();
        let mut map = self.read_all()?;
        if map.remove(key).is_some() {
            self.write_all(&map)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_no_token_and_no_secret() {
        let t = Tokens {
            access_token: "at-secret-1".into(),
            refresh_token: Some("rt-secret-2".into()),
            expires_at: Some(7),
            scope: Some("mcp".into()),
            issuer: "http://i".into(),
            client_id: "c".into(),
            client_secret: Some("cs-secret-3".into()),
            token_endpoint: "http://i/token".into(),
            resource: "http://r/mcp".into(),
        };
        assert_eq!(
            format!("{t:?}"),
            r#"Tokens { access_token: "<redacted>", refresh_token: Some("<redacted>"), expires_at: Some(7), scope: Some("mcp"), issuer: "http://i", client_id: "c", resource: "http://r/mcp", .. }"#
        );
        assert!(t.expires_within(Duration::from_secs(0)));
    }

    #[test]
    fn tokens_are_stored_with_their_fields_in_order_and_optional_ones_left_out() {
        let full = r#"{"access_token":"a","refresh_token":"r","expires_at":7,"scope":"s","issuer":"i","client_id":"c","client_secret":"x","token_endpoint":"t","resource":"m"}"#;
        let t = Tokens::from_json(full).unwrap();
        assert_eq!(t.to_json(), full);
        let bare = r#"{"access_token":"a","issuer":"i","client_id":"c","token_endpoint":"t","resource":"m"}"#;
        let t = Tokens::from_json(bare).unwrap();
        assert_eq!((t.refresh_token.as_deref(), t.expires_at), (None, None));
        assert_eq!(t.to_json(), bare);
        assert!(
            Tokens::from_json(
                r#"{"access_token":"a","issuer":"i","client_id":"c","token_endpoint":"t"}"#
            )
            .is_none(),
            "resource is required"
        );
    }

    #[test]
    fn a_file_store_tightens_an_existing_file_and_survives_a_damaged_one() {
        let dir = std::env::temp_dir().join(format!("pikuri-store-test-{}", std::process::id()));
        let path = dir.join("t.json");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(&path, "not json").unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        let store = FileTokenStore::new(&path);
        assert!(
            store.load("k").is_err(),
            "a damaged file is an error to load"
        );
        let t = Tokens::from_json(
            r#"{"access_token":"a","issuer":"i","client_id":"c","token_endpoint":"t","resource":"r"}"#,
        )
        .unwrap();
        store.save("k", &t).unwrap();
        assert_eq!(store.load("k").unwrap(), Some(t));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
