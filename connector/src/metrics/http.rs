//! The metrics endpoint's HTTP: a bounded, sans-IO request parser ([`parse_request`]) and a
//! small server on tokio ([`serve`]).
//!
//! Hand-written rather than a crate: the endpoint answers one `GET /metrics` per connection and
//! closes it, which takes a request line and a header terminator to parse. hyper (with http,
//! httparse, h2 or http-body) or tiny_http would add a dozen crates to a static binary whose
//! dependency tree is kept lean and C-free, for features never used here (keep-alive, chunked
//! bodies, HTTP/2). The parser is fuzzed (`fuzz/`, target `metrics_http`).
//!
//! Limits: a request (line and headers) of at most [`MAX_REQUEST_BYTES`], read within
//! [`READ_TIMEOUT`]; at most [`MAX_CONNECTIONS`] connections at once (more are closed at once).
//! Anything else gets `400`, `404`, `405` or `431` and the connection is closed.

use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::Metrics;

/// The largest request (request line and headers) read.
pub const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// How long a client may take to send its request.
pub const READ_TIMEOUT: Duration = Duration::from_secs(5);
/// Connections served at once.
pub const MAX_CONNECTIONS: usize = 16;

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub method: &'a str,
    /// The request target without its query string.
    pub path: &'a str,
    /// Bytes of the request up to and including the blank line that ends its headers.
    pub length: usize,
}

/// Why a request is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpError {
    /// Not an HTTP/1.x request line, or bytes that are not text.
    Malformed,
    /// No end of headers within [`MAX_REQUEST_BYTES`].
    TooLarge,
}

/// Parses the start of a request: `Ok(None)` while the blank line ending the headers has not
/// arrived (and fewer than [`MAX_REQUEST_BYTES`] came), else the request line's method and path.
/// Header lines are only skipped; the endpoint needs none of them.
pub fn parse_request(bytes: &[u8]) -> Result<Option<Request<'_>>, HttpError> {
    let window = bytes.get(..bytes.len().min(MAX_REQUEST_BYTES)).unwrap_or_default();
    // A request line that is already wrong need not wait for the headers.
    if let Some(line_end) = window.iter().position(|&b| b == b'\n') {
        request_line(window.get(..line_end).unwrap_or_default())?;
    }
    let Some(length) = end_of_headers(window) else {
        return if bytes.len() >= MAX_REQUEST_BYTES { Err(HttpError::TooLarge) } else { Ok(None) };
    };
    let head = window.get(..length).unwrap_or_default();
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let (method, path) = request_line(head.get(..line_end).unwrap_or_default())?;
    if !head.is_ascii() {
        return Err(HttpError::Malformed);
    }
    Ok(Some(Request { method, path, length }))
}

/// The length of the head: up to and including the first empty line (`\r\n\r\n`, or `\n\n` from
/// lenient clients).
fn end_of_headers(bytes: &[u8]) -> Option<usize> {
    let mut line_start = 0;
    for (index, &byte) in bytes.iter().enumerate() {
        if byte != b'\n' {
            continue;
        }
        let line = bytes.get(line_start..index).unwrap_or_default();
        if line_start > 0 && (line.is_empty() || line == b"\r") {
            return Some(index + 1);
        }
        line_start = index + 1;
    }
    None
}

/// `METHOD SP TARGET SP HTTP/1.x`, with an optional `\r`.
fn request_line(line: &[u8]) -> Result<(&str, &str), HttpError> {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = std::str::from_utf8(line).map_err(|_| HttpError::Malformed)?;
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) = (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(HttpError::Malformed);
    };
    let token = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_alphabetic());
    if !token(method) || !target.starts_with('/') || !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Err(HttpError::Malformed);
    }
    if !target.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(HttpError::Malformed);
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    Ok((method, path))
}

/// The whole response to a request: status line, headers and body. `HEAD` gets the headers of
/// the `GET` answer without its body.
pub fn respond(request: Result<Option<Request<'_>>, HttpError>, metrics: &Metrics) -> Vec<u8> {
    let (status, content_type, body) = match request {
        Ok(Some(request)) => match (request.method, request.path) {
            ("GET" | "HEAD", "/metrics") => {
                ("200 OK", "text/plain; version=0.0.4; charset=utf-8", metrics.render().into_bytes())
            }
            ("GET" | "HEAD", "/") => (
                "200 OK",
                "text/plain; charset=utf-8",
                b"sluice: the metrics are at /metrics (Prometheus text format)\n".to_vec(),
            ),
            ("GET" | "HEAD", _) => {
                ("404 Not Found", "text/plain; charset=utf-8", b"not found: try /metrics\n".to_vec())
            }
            _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", b"only GET and HEAD\n".to_vec()),
        },
        Ok(None) | Err(HttpError::Malformed) => {
            ("400 Bad Request", "text/plain; charset=utf-8", b"not an HTTP/1.x request\n".to_vec())
        }
        Err(HttpError::TooLarge) => {
            ("431 Request Header Fields Too Large", "text/plain; charset=utf-8", b"request too large\n".to_vec())
        }
    };
    let head_only = matches!(request, Ok(Some(Request { method: "HEAD", .. })));
    let mut response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    if !head_only {
        response.extend_from_slice(&body);
    }
    response
}

/// Binds `address` (`HOST:PORT`) and serves [`Metrics::render`] at `/metrics` until the returned
/// task is aborted. The error names the address (a port in use, a host that does not resolve).
pub async fn serve(address: &str, metrics: Arc<Metrics>) -> Result<tokio::task::JoinHandle<()>, std::io::Error> {
    let listener = TcpListener::bind(address).await.map_err(|error| {
        std::io::Error::new(error.kind(), format!("cannot listen on {address} for --metrics-addr: {error}"))
    })?;
    let bound = listener.local_addr()?;
    tracing::info!(address = %bound, "serving metrics on http://{bound}/metrics");
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    Ok(tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of file descriptors and the like: wait instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                drop(stream);
                continue;
            };
            let metrics = Arc::clone(&metrics);
            tokio::spawn(async move {
                let _ = tokio::time::timeout(READ_TIMEOUT * 2, answer(stream, &metrics)).await;
                drop(slot);
            });
        }
    }))
}

/// Reads one request (bounded in size and time), answers it and closes the connection.
async fn answer(mut stream: TcpStream, metrics: &Metrics) -> std::io::Result<()> {
    let mut buffer = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let deadline = tokio::time::Instant::now() + READ_TIMEOUT;
    let response = loop {
        match parse_request(&buffer) {
            Ok(None) => {}
            parsed => break respond(parsed, metrics),
        }
        let read = tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await;
        match read {
            Ok(Ok(0)) | Err(_) => break respond(Ok(None), metrics),
            Ok(Ok(n)) => buffer.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Ok(Err(error)) => return Err(error),
        }
    };
    stream.write_all(&response).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse_once_their_headers_end() {
        let request = b"GET /metrics?x=1 HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n";
        for cut in 0..request.len() {
            assert_eq!(parse_request(&request[..cut]), Ok(None), "cut at {cut}");
        }
        let parsed = parse_request(request).unwrap().unwrap();
        assert_eq!((parsed.method, parsed.path, parsed.length), ("GET", "/metrics", request.len()));
        let lenient = parse_request(b"HEAD / HTTP/1.0\n\n").unwrap().unwrap();
        assert_eq!((lenient.method, lenient.path), ("HEAD", "/"));
    }

    #[test]
    fn bad_requests_are_refused_early_and_big_ones_bounded() {
        for bad in [&b"GET /metrics\r\n"[..], b"GET metrics HTTP/1.1\r\n", b"G3T / HTTP/1.1\r\n", b"GET / HTTP/2\r\n"] {
            assert_eq!(parse_request(bad), Err(HttpError::Malformed), "{:?}", String::from_utf8_lossy(bad));
        }
        let mut huge = b"GET / HTTP/1.1\r\n".to_vec();
        huge.resize(MAX_REQUEST_BYTES, b'a');
        assert_eq!(parse_request(&huge), Err(HttpError::TooLarge));
        assert_eq!(parse_request(&huge[..MAX_REQUEST_BYTES - 1]), Ok(None));
    }

    #[test]
    fn responses_carry_the_metrics_or_a_status() {
        let metrics = Metrics::default();
        let ok = String::from_utf8(respond(parse_request(b"GET /metrics HTTP/1.1\r\n\r\n"), &metrics)).unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n") && ok.contains("sluice_build_info{"), "{ok}");
        let head = String::from_utf8(respond(parse_request(b"HEAD /metrics HTTP/1.1\r\n\r\n"), &metrics)).unwrap();
        assert!(head.ends_with("\r\n\r\n") && !head.contains("sluice_build_info"), "{head}");
        let missing = String::from_utf8(respond(parse_request(b"GET /x HTTP/1.1\r\n\r\n"), &metrics)).unwrap();
        assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
        let post = String::from_utf8(respond(parse_request(b"POST /metrics HTTP/1.1\r\n\r\n"), &metrics)).unwrap();
        assert!(post.starts_with("HTTP/1.1 405 "), "{post}");
        let bad = String::from_utf8(respond(parse_request(b"hello\r\n"), &metrics)).unwrap();
        assert!(bad.starts_with("HTTP/1.1 400 "), "{bad}");
    }
}
