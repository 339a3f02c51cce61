//! Just enough HTTP/1.1 for the fake server: read one request (headers,
//! `Content-Length` or chunked body, `Expect: 100-continue`) and write
//! response heads and chunks. Generic over `BufRead`/`Write`, so it is tested
//! without sockets.

use std::io::{self, BufRead, Read, Write};

/// Longest request line or header line.
const MAX_LINE: u64 = 64 * 1024;
/// Most header lines in one request.
const MAX_HEADERS: usize = 200;
/// Largest request body (chat histories with images can be big).
pub(super) const MAX_BODY: usize = 64 * 1024 * 1024;

/// One request as read off the wire.
#[derive(Debug)]
pub(super) struct Request {
    pub(super) method: String,
    /// The request target: path and query.
    pub(super) target: String,
    pub(super) version: String,
    /// Names lowercased, values trimmed, in order.
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

impl Request {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn header_has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    /// Whether the connection may carry another request after this one.
    pub(super) fn keep_alive(&self) -> bool {
        if self.version == "HTTP/1.0" {
            self.header_has_token("connection", "keep-alive")
        } else {
            !self.header_has_token("connection", "close")
        }
    }

    /// Whether the response may use chunked transfer encoding.
    pub(super) fn accepts_chunked(&self) -> bool {
        self.version != "HTTP/1.0"
    }
}

/// Why no request could be read.
#[derive(Debug)]
pub(super) enum ReadError {
    /// The peer closed the connection before a request started.
    Closed,
    /// The bytes are not an HTTP request we accept; answer 400 and close.
    Bad(String),
    /// The socket failed (including a shutdown by `FakeServer::drop`).
    Io(io::Error),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> ReadError {
        ReadError::Io(e)
    }
}

/// One line without its `\r\n`/`\n`; `None` at end of input.
fn read_line<R: BufRead>(r: &mut R) -> Result<Option<String>, ReadError> {
    let mut buf = Vec::new();
    let n = r.by_ref().take(MAX_LINE).read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        return Err(if n as u64 >= MAX_LINE {
            ReadError::Bad("header line too long".into())
        } else {
            ReadError::Bad("connection closed mid-line".into())
        });
    }
    buf.pop();
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
}

/// Read one request. `interim` receives `100 Continue` when the client
/// expects it.
pub(super) fn read_request<R: BufRead, W: Write>(
    r: &mut R,
    interim: &mut W,
) -> Result<Request, ReadError> {
    // Tolerate stray blank lines between requests (RFC 9112 §2.2).
    let line = loop {
        match read_line(r)? {
            None => return Err(ReadError::Closed),
            Some(l) if l.trim().is_empty() => {}
            Some(l) => break l,
        }
    };
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(ReadError::Bad(format!("bad request line {line:?}")));
    };
    if !version.starts_with("HTTP/1.") {
        return Err(ReadError::Bad(format!("unsupported version {version:?}")));
    }

    let mut headers = Vec::new();
    loop {
        let Some(line) = read_line(r)? else {
            return Err(ReadError::Bad("connection closed in headers".into()));
        };
        if line.is_empty() {
            break;
        }
        if headers.len() >= MAX_HEADERS {
            return Err(ReadError::Bad("too many headers".into()));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(ReadError::Bad(format!("bad header line {line:?}")));
        };
        let name = name.trim();
        if name.is_empty() || name.contains(char::is_whitespace) {
            return Err(ReadError::Bad(format!("bad header name {name:?}")));
        }
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }

    let mut req = Request {
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body: Vec::new(),
    };

    let chunked = req.header_has_token("transfer-encoding", "chunked");
    let length = match req.header("content-length") {
        Some(v) if !chunked => Some(
            v.parse::<usize>()
                .map_err(|_| ReadError::Bad(format!("bad Content-Length {v:?}")))?,
        ),
        _ => None,
    };
    if length.is_some_and(|n| n > MAX_BODY) {
        return Err(ReadError::Bad("request body too large".into()));
    }
    let has_body = chunked || length.is_some_and(|n| n > 0);
    if has_body && req.header_has_token("expect", "100-continue") && req.accepts_chunked() {
        interim.write_all(b"HTTP/1.1 100 Continue\r\n\r\n")?;
        interim.flush()?;
    }
    if chunked {
        req.body = read_chunked(r)?;
    } else if let Some(n) = length {
        let mut body = vec![0; n];
        r.read_exact(&mut body).map_err(|e| match e.kind() {
            io::ErrorKind::UnexpectedEof => ReadError::Bad("connection closed in body".into()),
            _ => ReadError::Io(e),
        })?;
        req.body = body;
    }
    Ok(req)
}

fn read_chunked<R: BufRead>(r: &mut R) -> Result<Vec<u8>, ReadError> {
    let mut body = Vec::new();
    loop {
        let Some(line) = read_line(r)? else {
            return Err(ReadError::Bad("connection closed in chunked body".into()));
        };
        let size_text = line.split(';').next().unwrap_or("").trim();
        let size = usize::from_str_radix(size_text, 16)
            .map_err(|_| ReadError::Bad(format!("bad chunk size {line:?}")))?;
        if size == 0 {
            // Trailers, up to the blank line.
            loop {
                match read_line(r)? {
                    Some(l) if !l.is_empty() => {}
                    _ => return Ok(body),
                }
            }
        }
        if size > MAX_BODY - body.len() {
            return Err(ReadError::Bad("request body too large".into()));
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..])
            .map_err(|_| ReadError::Bad("connection closed in chunk".into()))?;
        if read_line(r)?.is_none_or(|l| !l.is_empty()) {
            return Err(ReadError::Bad("chunk not followed by CRLF".into()));
        }
    }
}

/// The reason phrase of common statuses.
fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        413 => "Payload Too Large",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Write a status line and headers, then the blank line.
pub(super) fn write_head<W: Write>(
    w: &mut W,
    status: u16,
    headers: &[(String, String)],
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    for (name, value) in headers {
        head.push_str(name);
        head.push_str(": ");
        head.push_str(value);
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    w.write_all(head.as_bytes())?;
    w.flush()
}

/// Write one piece of a streamed body: as an HTTP chunk, or raw when the
/// body is delimited by closing the connection.
pub(super) fn write_piece<W: Write>(w: &mut W, data: &[u8], chunked: bool) -> io::Result<()> {
    if data.is_empty() {
        return Ok(()); // an empty chunk would end the body
    }
    if chunked {
        let mut buf = format!("{:x}\r\n", data.len()).into_bytes();
        buf.extend_from_slice(data);
        buf.extend_from_slice(b"\r\n");
        w.write_all(&buf)?;
    } else {
        w.write_all(data)?;
    }
    w.flush()
}

/// End a chunked body.
pub(super) fn write_last_chunk<W: Write>(w: &mut W) -> io::Result<()> {
    w.write_all(b"0\r\n\r\n")?;
    w.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &str) -> (Result<Request, ReadError>, String) {
        let mut r = io::BufReader::new(input.as_bytes());
        let mut interim = Vec::new();
        let req = read_request(&mut r, &mut interim);
        (req, String::from_utf8(interim).unwrap())
    }

    #[test]
    fn content_length_body() {
        let (req, interim) =
            read("POST /v1/x?a=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nX-A:  b \r\n\r\n{}");
        let req = req.unwrap();
        assert_eq!(req.method, "POST");
        assert_eq!(req.target, "/v1/x?a=1");
        assert_eq!(req.header("x-a"), Some("b"));
        assert_eq!(req.header("X-A"), Some("b"));
        assert_eq!(req.body, b"{}");
        assert!(req.keep_alive());
        assert!(interim.is_empty());
    }

    #[test]
    fn chunked_body_with_extension_and_trailer() {
        let (req, _) = read(
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\nA\r\n0123456789\r\n0\r\nT: 1\r\n\r\n",
        );
        assert_eq!(req.unwrap().body, b"abc0123456789");
    }

    #[test]
    fn expect_continue_gets_interim_response() {
        let (req, interim) =
            read("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx");
        assert_eq!(req.unwrap().body, b"x");
        assert_eq!(interim, "HTTP/1.1 100 Continue\r\n\r\n");
    }

    #[test]
    fn bad_input_is_rejected_not_panicking() {
        for input in [
            "GARBAGE\r\n\r\n",
            "GET / HTTP/2\r\n\r\n",
            "GET / HTTP/1.1\r\nno colon\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: x\r\n\r\n",
            "POST / HTTP/1.1\r\nContent-Length: 5\r\n\r\nab",
            "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
            "GET / HTTP/1.1\r\nHost: h",
        ] {
            assert!(matches!(read(input).0, Err(ReadError::Bad(_))), "{input:?}");
        }
        assert!(matches!(read("").0, Err(ReadError::Closed)));
        assert!(matches!(read("\r\n").0, Err(ReadError::Closed)));
    }

    #[test]
    fn connection_semantics() {
        let (req, _) = read("GET / HTTP/1.1\r\nConnection: Close\r\n\r\n");
        assert!(!req.unwrap().keep_alive());
        let (req, _) = read("GET / HTTP/1.0\r\n\r\n");
        let req = req.unwrap();
        assert!(!req.keep_alive());
        assert!(!req.accepts_chunked());
    }

    #[test]
    fn chunk_writer() {
        let mut out = Vec::new();
        write_piece(&mut out, b"hello world!!!!!", true).unwrap();
        write_piece(&mut out, b"", true).unwrap();
        write_last_chunk(&mut out).unwrap();
        assert_eq!(out, b"10\r\nhello world!!!!!\r\n0\r\n\r\n");
    }
}
