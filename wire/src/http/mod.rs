//! A small HTTP/1.1 client for the few HTTPS calls a Kafka client makes besides Kafka itself:
//! OAuth token endpoints, AWS STS and the AWS credential endpoints (ECS, EC2 instance metadata),
//! and a schema registry (with a client certificate for mutual TLS when one is set).
//!
//! One request per connection (`Connection: close`), over TCP or TLS with the same rustls
//! configuration code the broker connections use ([`crate::tls_client_config`]: a pasted CA PEM or
//! the system trust store, hostname verification always on). The response is read by the
//! sans-IO [`ResponseDecoder`] under a body limit. Every step has a deadline: connecting (TCP and
//! TLS) and the whole exchange.
//!
//! ```no_run
//! # async fn example() -> Result<(), sluice_wire::http::HttpError> {
//! use sluice_wire::http::{HttpClient, HttpConfig, HttpRequest};
//!
//! let client = HttpClient::new(HttpConfig::default());
//! let request = HttpRequest::post_form("https://idp.example.com/token", &[("grant_type", "client_credentials")])?
//!     .basic_auth("my-client", "my-secret");
//! let response = client.send(request).await?;
//! println!("{} ({} bytes)", response.status, response.body.len());
//! # Ok(()) }
//! ```
//!
//! Messages and `Debug` output show a URL without its query and a request without its header
//! values or body: those are where secrets travel.

mod decode;
mod url;

pub use decode::{decode_whole, HttpDecodeError, HttpResponse, ResponseDecoder, MAX_HEADERS, MAX_HEAD_BYTES};
pub use url::{form_encode, percent_encode, Url};

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::connection::tls::{self, TlsError, TlsProblem, TlsSettings};

/// Settings of an [`HttpClient`].
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// A private CA (PEM) to trust for `https` URLs; `None`: the system trust store.
    pub ca_pem: Option<String>,
    /// A client certificate chain and its private key (PEM), for mutual TLS.
    pub client_certificate: Option<(String, String)>,
    /// Time allowed for the TCP connect and the TLS handshake.
    pub connect_timeout: Duration,
    /// Time allowed for the whole exchange, connecting included.
    pub timeout: Duration,
    /// The largest response body accepted.
    pub max_body_bytes: usize,
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            ca_pem: None,
            client_certificate: None,
            connect_timeout: Duration::from_secs(5),
            timeout: Duration::from_secs(15),
            max_body_bytes: 1 << 20,
        }
    }
}

impl HttpConfig {
    /// The same settings trusting only this CA for `https` URLs.
    pub fn with_ca_pem(mut self, ca_pem: impl Into<String>) -> Self {
        self.ca_pem = Some(ca_pem.into());
        self
    }

    /// The same settings presenting this client certificate chain and key (PEM) for `https`
    /// URLs (mutual TLS).
    pub fn with_client_certificate(mut self, cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.client_certificate = Some((cert_pem.into(), key_pem.into()));
        self
    }

    /// The same settings with these timeouts (connect; the whole exchange).
    pub fn with_timeouts(mut self, connect: Duration, total: Duration) -> Self {
        self.connect_timeout = connect;
        self.timeout = total;
        self
    }

    /// The same settings with this response body limit.
    pub fn with_max_body_bytes(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }
}

impl fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpConfig")
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "<pem>"))
            .field("client_certificate", &self.client_certificate.as_ref().map(|_| "<redacted>"))
            .field("connect_timeout", &self.connect_timeout)
            .field("timeout", &self.timeout)
            .field("max_body_bytes", &self.max_body_bytes)
            .finish()
    }
}

/// One request: method, URL, headers, body. `Debug` shows neither header values nor the body.
#[derive(Clone)]
pub struct HttpRequest {
    method: &'static str,
    url: Url,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl HttpRequest {
    /// A request with `method` (`GET`, `POST`, `PUT`, ...) to `url`.
    pub fn new(method: &'static str, url: &str) -> Result<HttpRequest, HttpError> {
        let url = Url::parse(url).map_err(|problem| HttpError::InvalidUrl { problem })?;
        Ok(HttpRequest { method, url, headers: Vec::new(), body: Vec::new() })
    }

    /// A GET of `url`.
    pub fn get(url: &str) -> Result<HttpRequest, HttpError> {
        HttpRequest::new("GET", url)
    }

    /// A POST of `body` with this content type.
    pub fn post(url: &str, content_type: &str, body: impl Into<Vec<u8>>) -> Result<HttpRequest, HttpError> {
        Ok(HttpRequest::new("POST", url)?.header("Content-Type", content_type).body(body))
    }

    /// A POST of an `application/x-www-form-urlencoded` body.
    pub fn post_form(url: &str, pairs: &[(&str, &str)]) -> Result<HttpRequest, HttpError> {
        let body = form_encode(pairs.iter().copied());
        HttpRequest::post(url, "application/x-www-form-urlencoded", body)
    }

    /// Adds a header. Names and values with CR, LF or NUL are refused when the request is sent.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `Authorization: Basic base64(user:password)` (RFC 7617).
    pub fn basic_auth(self, user: &str, password: &str) -> Self {
        let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        self.header("Authorization", format!("Basic {encoded}"))
    }

    /// `Authorization: Bearer <token>` (RFC 6750).
    pub fn bearer_auth(self, token: &str) -> Self {
        self.header("Authorization", format!("Bearer {token}"))
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    /// The URL.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The method.
    pub fn method(&self) -> &'static str {
        self.method
    }

    /// The request's bytes on the wire.
    fn encode(&self) -> Result<Vec<u8>, HttpError> {
        let mut head =
            format!("{} {} HTTP/1.1\r\nHost: {}\r\n", self.method, self.url.target(), self.url.host_header());
        let has = |name: &str| self.headers.iter().any(|(key, _)| key.eq_ignore_ascii_case(name));
        if !has("user-agent") {
            head.push_str(concat!("User-Agent: sluice/", env!("CARGO_PKG_VERSION"), "\r\n"));
        }
        if !has("accept") {
            head.push_str("Accept: */*\r\n");
        }
        head.push_str("Connection: close\r\n");
        if !self.body.is_empty() || matches!(self.method, "POST" | "PUT") {
            head.push_str(&format!("Content-Length: {}\r\n", self.body.len()));
        }
        for (name, value) in &self.headers {
            let bad_name = name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':');
            let bad_value = value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0);
            if bad_name || bad_value {
                return Err(HttpError::InvalidHeader { name: name.chars().filter(|c| !c.is_control()).collect() });
            }
            head.push_str(name);
            head.push_str(": ");
            head.push_str(value);
            head.push_str("\r\n");
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(&self.body);
        Ok(bytes)
    }
}

impl fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpRequest")
            .field("method", &self.method)
            .field("url", &self.url)
            .field("headers", &self.headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>())
            .field("body", &format_args!("<{} bytes>", self.body.len()))
            .finish()
    }
}

/// An HTTP exchange that failed. `Display` names the method and URL (without its query) and what
/// went wrong; the cause, when there is one, is the `source()`.
#[derive(Debug)]
#[non_exhaustive]
pub enum HttpError {
    /// The URL cannot be used.
    InvalidUrl {
        /// What is wrong with it.
        problem: String,
    },
    /// A header name or value cannot be sent (CR, LF, NUL, or an empty name).
    InvalidHeader {
        /// The header's name.
        name: String,
    },
    /// The TLS settings cannot be used (the CA PEM, or no system trust store).
    TlsConfig {
        /// The settings' error.
        source: TlsError,
    },
    /// Connecting failed (DNS, refused, unreachable).
    Connect {
        /// `METHOD url`.
        request: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// The TLS handshake failed.
    Tls {
        /// `METHOD url`.
        request: String,
        /// What to check.
        problem: TlsProblem,
        /// rustls's error.
        source: Option<std::io::Error>,
    },
    /// Reading or writing failed after connecting.
    Io {
        /// `METHOD url`.
        request: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// No answer in time.
    Timeout {
        /// `METHOD url`.
        request: String,
        /// What did not finish: connecting, or the response.
        what: &'static str,
        /// The deadline.
        after: Duration,
    },
    /// The response is not valid HTTP or is over a limit.
    Decode {
        /// `METHOD url`.
        request: String,
        /// The decoder's error.
        source: HttpDecodeError,
    },
}

impl HttpError {
    /// A new attempt may succeed (the network or the server's answer was the problem, not the
    /// settings).
    pub fn is_transient(&self) -> bool {
        matches!(self, HttpError::Connect { .. } | HttpError::Io { .. } | HttpError::Timeout { .. })
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HttpError::InvalidUrl { problem } => write!(f, "the URL {problem}"),
            HttpError::InvalidHeader { name } => {
                write!(f, "the HTTP header {name:?} cannot be sent: names and values may not contain line breaks")
            }
            HttpError::TlsConfig { source } => write!(f, "{source}"),
            HttpError::Connect { request, .. } => write!(f, "{request}: cannot connect"),
            HttpError::Tls { request, problem, .. } => write!(f, "{request}: {}", problem_for_server(problem)),
            HttpError::Io { request, .. } => write!(f, "{request}: the connection failed"),
            HttpError::Timeout { request, what, after } => {
                write!(f, "{request}: timed out: no {what} within {} ms", after.as_millis())
            }
            HttpError::Decode { request, source } => write!(f, "{request}: unusable response: {source}"),
        }
    }
}

/// The broker-centred TLS text, reworded for an HTTP server.
fn problem_for_server(problem: &TlsProblem) -> String {
    problem
        .to_string()
        .replace("the broker's", "the server's")
        .replace("the broker", "the server")
        .replace("broker", "server")
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            HttpError::TlsConfig { source } => Some(source),
            HttpError::Connect { source, .. } | HttpError::Io { source, .. } => Some(source),
            HttpError::Tls { source: Some(source), .. } => Some(source),
            HttpError::Decode { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Sends [`HttpRequest`]s. Cheap to clone; the TLS configuration is built once, on the first
/// `https` request.
#[derive(Clone)]
pub struct HttpClient {
    config: Arc<HttpConfig>,
    tls: Arc<OnceLock<Result<Arc<rustls::ClientConfig>, TlsError>>>,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient").field("config", &self.config).finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client with these settings.
    pub fn new(config: HttpConfig) -> HttpClient {
        HttpClient { config: Arc::new(config), tls: Arc::new(OnceLock::new()) }
    }

    /// The settings.
    pub fn config(&self) -> &HttpConfig {
        &self.config
    }

    fn tls_config(&self) -> Result<Arc<rustls::ClientConfig>, HttpError> {
        let built = self.tls.get_or_init(|| {
            let settings = TlsSettings::new(self.config.ca_pem.clone());
            let settings = match &self.config.client_certificate {
                Some((cert, key)) => settings.with_client_certificate(cert.clone(), key.clone()),
                None => settings,
            };
            tls::client_config(&settings)
        });
        built.clone().map_err(|source| HttpError::TlsConfig { source })
    }

    /// Sends `request` and reads the whole response, whatever its status.
    pub async fn send(&self, request: HttpRequest) -> Result<HttpResponse, HttpError> {
        let label = format!("{} {}", request.method, request.url);
        let total = self.config.timeout;
        match tokio::time::timeout(total, self.exchange(&request, &label)).await {
            Ok(result) => result,
            Err(_) => Err(HttpError::Timeout { request: label, what: "complete response", after: total }),
        }
    }

    async fn exchange(&self, request: &HttpRequest, label: &str) -> Result<HttpResponse, HttpError> {
        let bytes = request.encode()?;
        let url = &request.url;
        let connect_timeout = self.config.connect_timeout;
        let connect = TcpStream::connect((url.host.as_str(), url.port));
        let stream = match tokio::time::timeout(connect_timeout, connect).await {
            Err(_) => {
                return Err(HttpError::Timeout {
                    request: label.to_string(),
                    what: "connection",
                    after: connect_timeout,
                })
            }
            Ok(Err(source)) => return Err(HttpError::Connect { request: label.to_string(), source }),
            Ok(Ok(stream)) => stream,
        };
        let _ = stream.set_nodelay(true);
        if !url.https {
            return self.round_trip(stream, &bytes, label).await;
        }
        let config = self.tls_config()?;
        let handshake = tls::handshake(config, &url.host, stream);
        let stream = match tokio::time::timeout(connect_timeout, handshake).await {
            Err(_) => {
                return Err(HttpError::Timeout {
                    request: label.to_string(),
                    what: "TLS handshake",
                    after: connect_timeout,
                })
            }
            Ok(Err((problem, source))) => return Err(HttpError::Tls { request: label.to_string(), problem, source }),
            Ok(Ok(stream)) => stream,
        };
        self.round_trip(stream, &bytes, label).await
    }

    async fn round_trip<S>(&self, mut stream: S, bytes: &[u8], label: &str) -> Result<HttpResponse, HttpError>
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let io = |source| HttpError::Io { request: label.to_string(), source };
        stream.write_all(bytes).await.map_err(io)?;
        stream.flush().await.map_err(io)?;
        let mut decoder = ResponseDecoder::new(self.config.max_body_bytes);
        let mut buffer = vec![0u8; 16 * 1024];
        let decode = |source| HttpError::Decode { request: label.to_string(), source };
        loop {
            let read = match stream.read(&mut buffer).await {
                Ok(read) => read,
                // Servers that close without a TLS close_notify: the decoder decides whether the
                // response was whole.
                Err(error) if error.kind() == std::io::ErrorKind::UnexpectedEof => 0,
                Err(source) => return Err(io(source)),
            };
            if read == 0 {
                return decoder.finish().map_err(decode);
            }
            if let Some(response) = decoder.feed(buffer.get(..read).unwrap_or_default()).map_err(decode)? {
                return Ok(response);
            }
        }
    }
}
