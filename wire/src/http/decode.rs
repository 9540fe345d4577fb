//! A sans-IO, bounded HTTP/1.1 response decoder: status line and headers (parsed by `httparse`),
//! then a body framed by `Content-Length`, by chunked transfer coding, or by the end of the
//! connection.
//!
//! Feed it bytes as they arrive ([`ResponseDecoder::feed`]); it answers `Ok(None)` while it needs
//! more, and the whole [`HttpResponse`] once the body is complete. At the end of the stream call
//! [`ResponseDecoder::finish`]: a body delimited by the connection's end completes there, any
//! other response is truncated. Interim `1xx` responses are skipped.
//!
//! Every size is bounded before it is buffered: the head (16 KiB, at most 64 headers), a chunk
//! size line, the trailers, and the body (the caller's limit, checked against a declared
//! `Content-Length` or chunk size before the bytes are kept). Nothing here allocates more than the
//! limits plus the bytes fed.
//!
//! # References
//! - RFC 9112 (HTTP/1.1 message syntax), section 6 (message body length), section 7.1 (chunked).

use std::fmt;

/// The largest response head (status line plus headers) accepted.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// The most headers accepted in a head (or in the trailers).
pub const MAX_HEADERS: usize = 64;
/// The longest chunk-size line (size, extensions) accepted.
const MAX_CHUNK_LINE: usize = 1024;

/// A whole HTTP response.
#[derive(Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code (200, 404, ...).
    pub status: u16,
    /// The reason phrase, as sent (may be empty).
    pub reason: String,
    /// The headers in the order sent; names as sent, values as bytes.
    pub headers: Vec<(String, Vec<u8>)>,
    /// The decoded body (chunked coding removed; content codings such as gzip are not undone).
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The first header named `name` (case-insensitive), if its value is text.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(key, _)| key.eq_ignore_ascii_case(name))
            .and_then(|(_, value)| std::str::from_utf8(value).ok())
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }

    /// The body as text (lossy), cut to `max_chars` characters and stripped of control characters:
    /// for quoting a server's error answer in a message.
    pub fn body_excerpt(&self, max_chars: usize) -> String {
        let text = String::from_utf8_lossy(&self.body);
        let mut out: String = text
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(max_chars)
            .collect::<String>()
            .trim()
            .to_string();
        if text.chars().count() > max_chars {
            out.push_str("...");
        }
        out
    }
}

impl fmt::Debug for HttpResponse {
    // Bodies can carry credentials (a token endpoint's answer): show only their size.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpResponse")
            .field("status", &self.status)
            .field("reason", &self.reason)
            .field("headers", &self.headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .finish()
    }
}

/// Why a response cannot be decoded. Small and `Copy`; `Display` says what was wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum HttpDecodeError {
    /// The head is not valid HTTP/1.x (httparse's reason).
    MalformedHead(&'static str),
    /// The head is longer than [`MAX_HEAD_BYTES`].
    HeadTooLarge,
    /// More than [`MAX_HEADERS`] headers.
    TooManyHeaders,
    /// `Content-Length` is not a number, or two of them disagree.
    BadContentLength,
    /// A transfer coding other than chunked (which this client never asks for).
    UnsupportedTransferEncoding,
    /// A chunk-size line is malformed or too long.
    BadChunk,
    /// The body is longer than the limit (declared or received).
    BodyTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },
    /// The connection ended before the response was complete.
    Truncated,
}

impl fmt::Display for HttpDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpDecodeError::MalformedHead(why) => write!(f, "malformed HTTP response head ({why})"),
            HttpDecodeError::HeadTooLarge => write!(f, "HTTP response head longer than {MAX_HEAD_BYTES} bytes"),
            HttpDecodeError::TooManyHeaders => write!(f, "more than {MAX_HEADERS} HTTP response headers"),
            HttpDecodeError::BadContentLength => f.write_str("invalid or conflicting Content-Length"),
            HttpDecodeError::UnsupportedTransferEncoding => {
                f.write_str("a Transfer-Encoding other than chunked, which this client does not accept")
            }
            HttpDecodeError::BadChunk => f.write_str("malformed chunked body"),
            HttpDecodeError::BodyTooLarge { limit } => write!(f, "response body larger than the {limit}-byte limit"),
            HttpDecodeError::Truncated => f.write_str("the connection closed before the response was complete"),
        }
    }
}

impl std::error::Error for HttpDecodeError {}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    Length { remaining: usize },
    ChunkSize,
    ChunkData { remaining: usize },
    ChunkDataEnd,
    Trailers,
    UntilEof,
    Done,
}

/// Decodes one HTTP/1.1 response from bytes fed in pieces. See the module docs.
pub struct ResponseDecoder {
    max_body: usize,
    /// Bytes received and not yet consumed (a partial head, a partial chunk line).
    pending: Vec<u8>,
    state: State,
    status: u16,
    reason: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Vec<u8>,
    trailer_count: usize,
    /// The request was HEAD, or the status forbids a body.
    no_body: bool,
}

impl ResponseDecoder {
    /// A decoder that accepts bodies up to `max_body` bytes.
    pub fn new(max_body: usize) -> Self {
        ResponseDecoder {
            max_body,
            pending: Vec::new(),
            state: State::Head,
            status: 0,
            reason: String::new(),
            headers: Vec::new(),
            body: Vec::new(),
            trailer_count: 0,
            no_body: false,
        }
    }

    /// Feeds bytes; the response once it is complete. After a response or an error the decoder
    /// must not be fed again (bytes after a complete response are ignored).
    pub fn feed(&mut self, bytes: &[u8]) -> Result<Option<HttpResponse>, HttpDecodeError> {
        if self.state == State::Done {
            return Ok(None);
        }
        match self.state {
            // Body bytes go straight to the body, without passing through `pending`.
            State::UntilEof => {
                self.push_body(bytes)?;
                return Ok(None);
            }
            _ => self.pending.extend_from_slice(bytes),
        }
        self.advance()
    }

    /// The end of the stream: completes a body delimited by the connection's end; anything else
    /// is [`HttpDecodeError::Truncated`].
    pub fn finish(&mut self) -> Result<HttpResponse, HttpDecodeError> {
        match self.state {
            State::UntilEof => Ok(self.take()),
            _ => Err(HttpDecodeError::Truncated),
        }
    }

    fn push_body(&mut self, bytes: &[u8]) -> Result<(), HttpDecodeError> {
        if self.body.len().saturating_add(bytes.len()) > self.max_body {
            return Err(HttpDecodeError::BodyTooLarge { limit: self.max_body });
        }
        self.body.extend_from_slice(bytes);
        Ok(())
    }

    fn take(&mut self) -> HttpResponse {
        self.state = State::Done;
        self.pending = Vec::new();
        HttpResponse {
            status: self.status,
            reason: std::mem::take(&mut self.reason),
            headers: std::mem::take(&mut self.headers),
            body: std::mem::take(&mut self.body),
        }
    }

    fn advance(&mut self) -> Result<Option<HttpResponse>, HttpDecodeError> {
        loop {
            match self.state {
                State::Done => return Ok(None),
                State::Head => {
                    if !self.parse_head()? {
                        return Ok(None);
                    }
                }
                State::Length { remaining } => {
                    let take = remaining.min(self.pending.len());
                    let rest = self.pending.split_off(take);
                    let bytes = std::mem::replace(&mut self.pending, rest);
                    self.push_body(&bytes)?;
                    if remaining == take {
                        return Ok(Some(self.take()));
                    }
                    self.state = State::Length { remaining: remaining - take };
                    return Ok(None);
                }
                State::UntilEof => {
                    let bytes = std::mem::take(&mut self.pending);
                    self.push_body(&bytes)?;
                    return Ok(None);
                }
                State::ChunkSize => {
                    let Some(line) = self.line(MAX_CHUNK_LINE)? else { return Ok(None) };
                    let size = parse_chunk_size(&line)?;
                    if size == 0 {
                        self.state = State::Trailers;
                    } else {
                        if self.body.len().saturating_add(size) > self.max_body {
                            return Err(HttpDecodeError::BodyTooLarge { limit: self.max_body });
                        }
                        self.state = State::ChunkData { remaining: size };
                    }
                }
                State::ChunkData { remaining } => {
                    if self.pending.is_empty() {
                        return Ok(None);
                    }
                    let take = remaining.min(self.pending.len());
                    let rest = self.pending.split_off(take);
                    let bytes = std::mem::replace(&mut self.pending, rest);
                    self.push_body(&bytes)?;
                    self.state = if remaining == take {
                        State::ChunkDataEnd
                    } else {
                        State::ChunkData { remaining: remaining - take }
                    };
                }
                State::ChunkDataEnd => {
                    if self.pending.len() < 2 {
                        return Ok(None);
                    }
                    if self.pending.get(..2) != Some(b"\r\n") {
                        return Err(HttpDecodeError::BadChunk);
                    }
                    self.pending.drain(..2);
                    self.state = State::ChunkSize;
                }
                State::Trailers => {
                    let Some(line) = self.line(MAX_HEAD_BYTES)? else { return Ok(None) };
                    if line.is_empty() {
                        return Ok(Some(self.take()));
                    }
                    self.trailer_count += 1;
                    if self.trailer_count > MAX_HEADERS {
                        return Err(HttpDecodeError::TooManyHeaders);
                    }
                }
            }
        }
    }

    /// One CRLF-terminated line out of `pending`, without its CRLF; `None` until it is whole.
    fn line(&mut self, limit: usize) -> Result<Option<Vec<u8>>, HttpDecodeError> {
        match self.pending.windows(2).position(|pair| pair == b"\r\n") {
            Some(end) if end <= limit => {
                let rest = self.pending.split_off(end + 2);
                let mut line = std::mem::replace(&mut self.pending, rest);
                line.truncate(end);
                Ok(Some(line))
            }
            Some(_) => Err(HttpDecodeError::BadChunk),
            None if self.pending.len() > limit + 1 => Err(HttpDecodeError::BadChunk),
            None => Ok(None),
        }
    }

    /// Parses the head if it is whole; true when the state moved on.
    fn parse_head(&mut self) -> Result<bool, HttpDecodeError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut response = httparse::Response::new(&mut headers);
        let parsed = match response.parse(&self.pending) {
            Ok(parsed) => parsed,
            Err(httparse::Error::TooManyHeaders) => return Err(HttpDecodeError::TooManyHeaders),
            Err(error) => return Err(HttpDecodeError::MalformedHead(head_error(error))),
        };
        let length = match parsed {
            httparse::Status::Partial => {
                if self.pending.len() > MAX_HEAD_BYTES {
                    return Err(HttpDecodeError::HeadTooLarge);
                }
                return Ok(false);
            }
            httparse::Status::Complete(length) => length,
        };
        if length > MAX_HEAD_BYTES {
            return Err(HttpDecodeError::HeadTooLarge);
        }
        let status = response.code.unwrap_or(0);
        let mut content_length: Option<usize> = None;
        let mut chunked = false;
        let mut owned = Vec::with_capacity(response.headers.len());
        for header in response.headers.iter() {
            if header.name.eq_ignore_ascii_case("content-length") {
                let value = std::str::from_utf8(header.value).map_err(|_| HttpDecodeError::BadContentLength)?;
                // A list of equal values is allowed (RFC 9110 8.6); different ones are not.
                for item in value.split(',') {
                    let item = item.trim();
                    if item.is_empty() || !item.bytes().all(|b| b.is_ascii_digit()) {
                        return Err(HttpDecodeError::BadContentLength);
                    }
                    let number: usize = item.parse().map_err(|_| HttpDecodeError::BadContentLength)?;
                    if content_length.is_some_and(|seen| seen != number) {
                        return Err(HttpDecodeError::BadContentLength);
                    }
                    content_length = Some(number);
                }
            } else if header.name.eq_ignore_ascii_case("transfer-encoding") {
                let value = String::from_utf8_lossy(header.value).to_ascii_lowercase();
                let codings: Vec<&str> = value.split(',').map(str::trim).filter(|c| !c.is_empty()).collect();
                match codings.as_slice() {
                    [] => {}
                    ["chunked"] => chunked = true,
                    _ => return Err(HttpDecodeError::UnsupportedTransferEncoding),
                }
            }
            owned.push((header.name.to_string(), header.value.to_vec()));
        }
        let reason = response.reason.unwrap_or("").to_string();
        self.pending.drain(..length);
        if (100..200).contains(&status) {
            // An interim response (100 Continue): the real one follows.
            return Ok(true);
        }
        self.status = status;
        self.reason = reason;
        self.headers = owned;
        self.no_body = status == 204 || status == 304;
        self.state = if self.no_body {
            State::Length { remaining: 0 }
        } else if chunked {
            State::ChunkSize
        } else if let Some(length) = content_length {
            if length > self.max_body {
                return Err(HttpDecodeError::BodyTooLarge { limit: self.max_body });
            }
            State::Length { remaining: length }
        } else {
            State::UntilEof
        };
        Ok(true)
    }
}

fn head_error(error: httparse::Error) -> &'static str {
    match error {
        httparse::Error::HeaderName => "invalid header name",
        httparse::Error::HeaderValue => "invalid header value",
        httparse::Error::NewLine => "invalid line ending",
        httparse::Error::Status => "invalid status code",
        httparse::Error::Token => "invalid token",
        httparse::Error::TooManyHeaders => "too many headers",
        httparse::Error::Version => "not HTTP/1.x",
    }
}

/// `chunk-size [ chunk-ext ]`: hex digits, then anything after `;` is ignored.
fn parse_chunk_size(line: &[u8]) -> Result<usize, HttpDecodeError> {
    let digits = line.split(|&b| b == b';').next().unwrap_or_default();
    let digits = trim_ascii(digits);
    if digits.is_empty() || digits.len() > 15 {
        return Err(HttpDecodeError::BadChunk);
    }
    let mut size = 0usize;
    for &byte in digits {
        let digit = (byte as char).to_digit(16).ok_or(HttpDecodeError::BadChunk)?;
        size = size * 16 + digit as usize;
    }
    Ok(size)
}

fn trim_ascii(mut bytes: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = bytes {
        if first.is_ascii_whitespace() {
            bytes = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = bytes {
        if last.is_ascii_whitespace() {
            bytes = rest;
        } else {
            break;
        }
    }
    bytes
}

/// Decodes a whole response held in `bytes` (the stream ends after them): for tests and fuzzing.
pub fn decode_whole(bytes: &[u8], max_body: usize) -> Result<HttpResponse, HttpDecodeError> {
    let mut decoder = ResponseDecoder::new(max_body);
    match decoder.feed(bytes)? {
        Some(response) => Ok(response),
        None => decoder.finish(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn feed_in_pieces(bytes: &[u8], piece: usize, max_body: usize) -> Result<HttpResponse, HttpDecodeError> {
        let mut decoder = ResponseDecoder::new(max_body);
        for chunk in bytes.chunks(piece.max(1)) {
            if let Some(response) = decoder.feed(chunk)? {
                return Ok(response);
            }
        }
        decoder.finish()
    }

    #[test]
    fn content_length_body() {
        let raw = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhelloEXTRA";
        let response = decode_whole(raw, 100).unwrap();
        assert_eq!(response.status, 200);
        assert_eq!(response.reason, "OK");
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.body, b"hello");
        assert!(response.is_success());
        for piece in 1..raw.len() {
            assert_eq!(feed_in_pieces(raw, piece, 100).unwrap().body, b"hello");
        }
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: yes\r\n\r\n";
        for piece in 1..raw.len() {
            let response = feed_in_pieces(raw, piece, 100).unwrap();
            assert_eq!(response.body, b"hello world", "piece {piece}");
        }
    }

    #[test]
    fn body_until_eof_and_no_body_statuses() {
        let response = decode_whole(b"HTTP/1.0 200 OK\r\n\r\nall of it", 100).unwrap();
        assert_eq!(response.body, b"all of it");
        let response = decode_whole(b"HTTP/1.1 204 No Content\r\n\r\n", 100).unwrap();
        assert_eq!(response.status, 204);
        assert!(response.body.is_empty());
    }

    #[test]
    fn interim_responses_are_skipped() {
        let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 403 Forbidden\r\nContent-Length: 2\r\n\r\nno";
        let response = decode_whole(raw, 100).unwrap();
        assert_eq!(response.status, 403);
        assert_eq!(response.body, b"no");
        assert!(!response.is_success());
    }

    #[test]
    fn limits_and_errors() {
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 101\r\n\r\n", 100),
            Err(HttpDecodeError::BodyTooLarge { limit: 100 })
        );
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFF\r\n", 100),
            Err(HttpDecodeError::BodyTooLarge { limit: 100 })
        );
        let until_eof = [b"HTTP/1.1 200 OK\r\n\r\n".as_slice(), &[b'x'; 101]].concat();
        assert_eq!(decode_whole(&until_eof, 100), Err(HttpDecodeError::BodyTooLarge { limit: 100 }));
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nxx", 100),
            Err(HttpDecodeError::BadContentLength)
        );
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", 100),
            Err(HttpDecodeError::BadContentLength)
        );
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 100),
            Err(HttpDecodeError::UnsupportedTransferEncoding)
        );
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 100),
            Err(HttpDecodeError::BadChunk)
        );
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", 100),
            Err(HttpDecodeError::BadChunk)
        );
        assert_eq!(
            decode_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab", 100),
            Err(HttpDecodeError::Truncated)
        );
        assert_eq!(decode_whole(b"HTTP/1.1 200 OK\r\n", 100), Err(HttpDecodeError::Truncated));
        assert!(matches!(decode_whole(b"SSH-2.0-OpenSSH\r\n\r\n", 100), Err(HttpDecodeError::MalformedHead(_))));
        let long_head = [b"HTTP/1.1 200 OK\r\nX: ".as_slice(), &[b'a'; MAX_HEAD_BYTES + 10]].concat();
        assert_eq!(decode_whole(&long_head, 100), Err(HttpDecodeError::HeadTooLarge));
        let many: String = (0..MAX_HEADERS + 1).map(|i| format!("H{i}: v\r\n")).collect();
        let many = format!("HTTP/1.1 200 OK\r\n{many}\r\n");
        assert_eq!(decode_whole(many.as_bytes(), 100), Err(HttpDecodeError::TooManyHeaders));
        // A chunk-size line that never ends.
        let endless = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".as_slice(), &[b'1'; 2000]].concat();
        assert_eq!(decode_whole(&endless, 100), Err(HttpDecodeError::BadChunk));
    }

    #[test]
    fn debug_hides_the_body() {
        let response = decode_whole(b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nsecret", 100).unwrap();
        assert!(!format!("{response:?}").contains("secret"));
        assert_eq!(response.body_excerpt(3), "sec...");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_in_any_pieces_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), piece in 1usize..64) {
            let mut raw = b"HTTP/1.1 200 OK\r\n".to_vec();
            raw.extend_from_slice(&bytes);
            let whole = decode_whole(&raw, 64);
            let pieces = feed_in_pieces(&raw, piece, 64);
            prop_assert_eq!(whole, pieces);
        }

        #[test]
        fn chunked_round_trip(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 1..40), 0..8), piece in 1usize..32) {
            let mut raw = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
            for chunk in &chunks {
                raw.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                raw.extend_from_slice(chunk);
                raw.extend_from_slice(b"\r\n");
            }
            raw.extend_from_slice(b"0\r\n\r\n");
            let response = feed_in_pieces(&raw, piece, 1 << 20).unwrap();
            prop_assert_eq!(response.body, chunks.concat());
        }
    }
}
