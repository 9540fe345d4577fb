//! The connection layer: one TCP connection to one broker, framing, correlation ids, pipelining,
//! and one driver task that owns the socket.
//!
//! Callers encode a request into a frame and hand it to the driver through a channel; the driver
//! writes frames in order and matches each response to the oldest request in flight (Kafka
//! answers requests on one connection in the order they were sent, so a correlation id that is
//! not the oldest one is a protocol violation and fails the connection). Several requests may be
//! in flight at once. A response is decoded by the caller, not the driver, so a slow decode never
//! stalls the socket.
//!
//! When anything goes wrong (a reset, a frame over the size limit, a wrong correlation id, a
//! request timing out) the connection is closed and every request in flight fails with an error
//! that names the broker; the client opens a new connection on its next request.
//!
//! # References
//! - Kafka protocol guide, "Network" (ordering guarantee per connection).
//! - KIP-511 (ApiVersions v3 client software name/version).

mod error;
pub mod tls;

pub use error::{AuthFailure, ConnectionError};
pub use tls::{TlsError, TlsField, TlsProblem, TlsSettings};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Notify};

use crate::protocol::api::{decode_response_header, encode_request_header, ApiKey};
use crate::protocol::codec::{Reader, Writer};
use crate::protocol::frame::FrameDecoder;
use crate::protocol::messages::api_versions::{ApiVersionsRequest, ApiVersionsResponse};
use crate::protocol::messages::sasl_authenticate::SaslAuthenticateRequest;
use crate::protocol::messages::sasl_handshake::SaslHandshakeRequest;
use crate::protocol::messages::{Request, Response};
use crate::protocol::sasl::{SaslCredentials, SaslMechanism, SaslSession, SaslStep};
use crate::protocol::ErrorCode;

/// Settings for every broker connection: client id, timeouts, frame limit, TLS and SASL.
///
/// Built from [`ConnectionConfig::default`] with the `with_*` methods; `Debug` never shows a
/// secret.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConnectionConfig {
    /// Sent as the request header's client id.
    pub client_id: String,
    /// Time allowed for TCP connect and the ApiVersions exchange.
    pub connect_timeout: Duration,
    /// Time allowed for one request's response, on top of any time the request asks the broker
    /// to wait (a fetch's max wait).
    pub request_timeout: Duration,
    /// The largest response frame accepted. A fetch response can exceed its max bytes by one
    /// oversized batch, so this sits well above the fetch limits.
    pub max_frame_size: usize,
    /// TLS, when set (built by [`tls::client_config`]).
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// SASL authentication, run on every connection right after ApiVersions.
    pub sasl: Option<SaslSettings>,
}

/// SASL settings for every connection.
#[derive(Clone)]
#[non_exhaustive]
pub struct SaslSettings {
    /// The mechanism to authenticate with.
    pub mechanism: SaslMechanism,
    /// The user name and password, or the token.
    pub credentials: SaslCredentials,
    /// PLAIN sends the password as is: over a plaintext listener that is readable by anyone on
    /// the path, so each such connection logs a warning unless this is set.
    pub allow_plain_without_tls: bool,
}

impl SaslSettings {
    /// Authenticates with `mechanism` and `credentials`.
    pub fn new(mechanism: SaslMechanism, credentials: SaslCredentials) -> Self {
        SaslSettings { mechanism, credentials, allow_plain_without_tls: false }
    }

    /// Silences the warning for PLAIN over a plaintext connection.
    pub fn allowing_plain_without_tls(mut self, allow: bool) -> Self {
        self.allow_plain_without_tls = allow;
        self
    }
}

impl std::fmt::Debug for SaslSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslSettings")
            .field("mechanism", &self.mechanism)
            .field("credentials", &self.credentials)
            .field("allow_plain_without_tls", &self.allow_plain_without_tls)
            .finish()
    }
}

impl std::fmt::Debug for ConnectionConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectionConfig")
            .field("client_id", &self.client_id)
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_frame_size", &self.max_frame_size)
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

/// Kafka's limit for a client id (a 16-bit string length).
const MAX_CLIENT_ID_BYTES: usize = i16::MAX as usize;

impl ConnectionConfig {
    /// The same settings with this client id (sent in every request header; at most 32767
    /// bytes, checked when the client starts).
    pub fn with_client_id(mut self, client_id: impl Into<String>) -> Self {
        self.client_id = client_id.into();
        self
    }

    /// The same settings with these timeouts for connecting (TCP, TLS, ApiVersions, SASL each)
    /// and for one request's response.
    pub fn with_timeouts(mut self, connect: Duration, request: Duration) -> Self {
        self.connect_timeout = connect;
        self.request_timeout = request;
        self
    }

    /// The same settings with this response frame limit.
    pub fn with_max_frame_size(mut self, bytes: usize) -> Self {
        self.max_frame_size = bytes;
        self
    }

    /// The same settings with TLS from a rustls configuration.
    pub fn with_tls(mut self, tls: Arc<rustls::ClientConfig>) -> Self {
        self.tls = Some(tls);
        self
    }

    /// The same settings with TLS built from pasted PEMs ([`tls::client_config`]).
    pub fn with_tls_settings(self, settings: &TlsSettings) -> Result<Self, TlsError> {
        Ok(self.with_tls(tls::client_config(settings)?))
    }

    /// The same settings with SASL authentication on every connection.
    pub fn with_sasl(mut self, sasl: SaslSettings) -> Self {
        self.sasl = Some(sasl);
        self
    }

    /// Checks what would otherwise corrupt a request or hang a connection.
    pub(crate) fn validate(&self) -> Result<(), String> {
        if self.client_id.len() > MAX_CLIENT_ID_BYTES {
            return Err(format!(
                "the client id is {} bytes long; Kafka allows at most {MAX_CLIENT_ID_BYTES}",
                self.client_id.len()
            ));
        }
        if self.connect_timeout.is_zero() || self.request_timeout.is_zero() {
            return Err("connect and request timeouts must be above zero".to_string());
        }
        if self.max_frame_size < 1024 {
            return Err(format!("a frame limit of {} bytes is too small for any response", self.max_frame_size));
        }
        Ok(())
    }
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: "sluice".to_string(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(30),
            max_frame_size: 128 << 20,
            tls: None,
            sasl: None,
        }
    }
}

/// The version range the broker supports for each API, from ApiVersions.
#[derive(Debug, Clone, Default)]
pub struct BrokerVersions {
    ranges: Vec<(ApiKey, i16, i16)>,
    /// Finalized feature levels (name, max level), when the broker sent valid ones.
    features: Vec<(String, i16)>,
}

impl BrokerVersions {
    /// The highest version both the broker and this client support for `R`.
    pub fn negotiate<R: Request>(&self) -> Option<i16> {
        let (_, broker_min, broker_max) = self.ranges.iter().find(|(key, _, _)| *key == R::API_KEY)?;
        let version = (*broker_max).min(R::MAX_VERSION);
        (version >= (*broker_min).max(R::MIN_VERSION)).then_some(version)
    }

    /// The cluster-wide finalized level of feature `name` (for example `transaction.version`),
    /// as this broker announced it; `None` when it announced none.
    pub fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.features.iter().find(|(feature, _)| feature == name).map(|(_, level)| *level)
    }

    pub fn range(&self, api_key: ApiKey) -> Option<(i16, i16)> {
        self.ranges.iter().find(|(key, _, _)| *key == api_key).map(|(_, min, max)| (*min, *max))
    }
}

struct PendingRequest {
    frame: Vec<u8>,
    correlation_id: i32,
    api_key: ApiKey,
    api_version: i16,
    /// False for Produce with acks=0, which the broker never answers.
    expects_response: bool,
    reply: oneshot::Sender<Result<Bytes, ConnectionError>>,
}

/// A connection to one broker. Cheap to clone; all clones share the one socket and driver.
#[derive(Clone)]
pub struct Connection {
    broker: Arc<str>,
    config: Arc<ConnectionConfig>,
    versions: Arc<BrokerVersions>,
    sender: mpsc::UnboundedSender<PendingRequest>,
    correlation: Arc<std::sync::atomic::AtomicI32>,
    closed: Arc<AtomicBool>,
    shutdown: Arc<Notify>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("broker", &self.broker).finish_non_exhaustive()
    }
}

impl Connection {
    /// Opens a TCP connection to `address` (`host:port`) and negotiates API versions.
    pub async fn connect(address: &str, config: ConnectionConfig) -> Result<Connection, ConnectionError> {
        let broker: Arc<str> = Arc::from(address);
        let connect = TcpStream::connect(address);
        let stream = match tokio::time::timeout(config.connect_timeout, connect).await {
            Err(_) => {
                return Err(ConnectionError::Timeout {
                    broker: broker.to_string(),
                    what: "TCP connect".to_string(),
                    after: config.connect_timeout,
                })
            }
            Ok(Err(source)) => return Err(ConnectionError::Io { broker: broker.to_string(), source }),
            Ok(Ok(stream)) => stream,
        };
        // Latency matters more than packet count: requests are already whole frames.
        let _ = stream.set_nodelay(true);
        let Some(tls) = config.tls.clone() else {
            return Connection::handshake(broker, stream, config).await;
        };
        let host = host_of(address);
        let stream = match tokio::time::timeout(config.connect_timeout, tls::handshake(tls, host, stream)).await {
            Err(_) => {
                return Err(ConnectionError::Timeout {
                    broker: broker.to_string(),
                    what: "TLS handshake (is TLS configured on the broker's listener?)".to_string(),
                    after: config.connect_timeout,
                })
            }
            Ok(Err((problem, source))) => {
                return Err(ConnectionError::Tls { broker: broker.to_string(), problem, source })
            }
            Ok(Ok(stream)) => stream,
        };
        Connection::handshake(broker, stream, config).await
    }

    /// Starts the driver over an already connected stream (TCP, or TLS in the security layer)
    /// and negotiates API versions.
    pub async fn handshake<S>(
        broker: Arc<str>,
        stream: S,
        config: ConnectionConfig,
    ) -> Result<Connection, ConnectionError>
    where
        S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
    {
        let (sender, receiver) = mpsc::unbounded_channel();
        let closed = Arc::new(AtomicBool::new(false));
        let shutdown = Arc::new(Notify::new());
        let decoder = FrameDecoder::new(config.max_frame_size);
        tokio::spawn(drive(broker.clone(), stream, receiver, decoder, closed.clone(), shutdown.clone()));
        let mut connection = Connection {
            broker,
            config: Arc::new(config),
            versions: Arc::new(BrokerVersions::default()),
            sender,
            correlation: Arc::new(std::sync::atomic::AtomicI32::new(0)),
            closed,
            shutdown,
        };
        let timeout = connection.config.connect_timeout;
        let versions = connection.fetch_api_versions(timeout).await?;
        connection.versions = Arc::new(versions);
        if let Some(sasl) = connection.config.sasl.clone() {
            let authenticated = tokio::time::timeout(timeout, connection.authenticate(&sasl)).await;
            match authenticated {
                Ok(Ok(())) => {}
                Ok(Err(error)) => {
                    connection.close();
                    return Err(error);
                }
                Err(_) => {
                    connection.close();
                    return Err(ConnectionError::Timeout {
                        broker: connection.broker.to_string(),
                        what: "SASL authentication".to_string(),
                        after: timeout,
                    });
                }
            }
        }
        Ok(connection)
    }

    /// SaslHandshake, then SaslAuthenticate rounds until the mechanism is done (KIP-152).
    async fn authenticate(&self, sasl: &SaslSettings) -> Result<(), ConnectionError> {
        let mechanism = sasl.mechanism;
        if mechanism == SaslMechanism::Plain && self.config.tls.is_none() && !sasl.allow_plain_without_tls {
            tracing::warn!(
                broker = %self.broker,
                "SASL PLAIN over a plaintext connection to {} sends the password unencrypted; enable TLS, or \
                 set `SaslSettings::allow_plain_without_tls` to silence this warning",
                self.broker
            );
        }
        let failed = |failure: AuthFailure, broker_message: Option<String>| ConnectionError::Authentication {
            broker: self.broker.to_string(),
            mechanism,
            failure,
            broker_message,
        };
        let sasl_error = |error: crate::protocol::sasl::SaslError| failed(AuthFailure::Client(Box::new(error)), None);
        let handshake = self.send(&SaslHandshakeRequest { mechanism: mechanism.name().to_string() }).await?;
        if handshake.error_code == ErrorCode::UNSUPPORTED_SASL_MECHANISM {
            return Err(failed(AuthFailure::MechanismNotEnabled { offered: handshake.mechanisms }, None));
        }
        if !handshake.error_code.is_ok() {
            return Err(ConnectionError::Broker {
                broker: self.broker.to_string(),
                api: ApiKey::SASL_HANDSHAKE,
                code: handshake.error_code,
                message: None,
            });
        }
        let mut session = SaslSession::new(mechanism, &sasl.credentials).map_err(sasl_error)?;
        let mut outgoing = session.initial_message();
        // Each mechanism finishes in a few rounds; the bound stops a broker that never does.
        for round in 0..8 {
            let response = self.send(&SaslAuthenticateRequest { auth_bytes: outgoing }).await?;
            if !response.error_code.is_ok() {
                let broker_says = response.error_message.unwrap_or_else(|| response.error_code.to_string());
                let ours = session.rejection().map(|rejection| format!(" ({rejection})")).unwrap_or_default();
                return Err(failed(rejection_cause(mechanism, round), Some(format!("{broker_says}{ours}"))));
            }
            match session.handle_server_message(&response.auth_bytes).map_err(sasl_error)? {
                SaslStep::Done => return Ok(()),
                SaslStep::Send(bytes) => outgoing = bytes,
            }
        }
        Err(self.protocol_error("SASL authentication did not finish after 8 rounds"))
    }

    async fn fetch_api_versions(&self, timeout: Duration) -> Result<BrokerVersions, ConnectionError> {
        let request = ApiVersionsRequest {
            client_software_name: "sluice".to_string(),
            client_software_version: env!("CARGO_PKG_VERSION").to_string(),
        };
        // Try our highest ApiVersions version; a broker that does not know it answers
        // UNSUPPORTED_VERSION in v0 form with the versions it does support (KIP-511).
        let mut version = ApiVersionsRequest::MAX_VERSION;
        loop {
            let body = self.send_raw_at(&request, version, timeout).await?;
            let response =
                ApiVersionsResponse::decode_with_fallback(version, &mut Reader::new(body)).map_err(|source| {
                    ConnectionError::Decode {
                        broker: self.broker.to_string(),
                        api: ApiKey::API_VERSIONS,
                        version,
                        source,
                    }
                })?;
            if response.error_code == ErrorCode::UNSUPPORTED_VERSION {
                let broker_max = response
                    .api_keys
                    .iter()
                    .find(|range| range.api_key == ApiKey::API_VERSIONS)
                    .map(|range| range.max_version)
                    .unwrap_or(0);
                if broker_max >= version || version == 0 {
                    return Err(self.protocol_error("the broker rejected every ApiVersions version we sent"));
                }
                version = broker_max.max(0);
                continue;
            }
            if !response.error_code.is_ok() {
                return Err(ConnectionError::Broker {
                    broker: self.broker.to_string(),
                    api: ApiKey::API_VERSIONS,
                    code: response.error_code,
                    message: None,
                });
            }
            let ranges =
                response.api_keys.iter().map(|range| (range.api_key, range.min_version, range.max_version)).collect();
            let features = if response.finalized_features_epoch >= 0 {
                response.finalized_features.iter().map(|f| (f.name.clone(), f.max_version_level)).collect()
            } else {
                Vec::new()
            };
            return Ok(BrokerVersions { ranges, features });
        }
    }

    /// The address this connection was opened to.
    pub fn broker(&self) -> &str {
        &self.broker
    }

    /// The API versions the broker announced.
    pub fn versions(&self) -> &BrokerVersions {
        &self.versions
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire) || self.sender.is_closed()
    }

    /// Closes the connection; requests in flight fail.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.shutdown.notify_one();
    }

    /// The version `R` will be sent at, or an error naming the API when the broker and this
    /// client share none.
    pub fn version_for<R: Request>(&self) -> Result<i16, ConnectionError> {
        self.versions.negotiate::<R>().ok_or_else(|| ConnectionError::UnsupportedVersion {
            broker: self.broker.to_string(),
            api: R::API_KEY,
            ours: (R::MIN_VERSION, R::MAX_VERSION),
            theirs: self.versions.range(R::API_KEY),
        })
    }

    /// Sends a request at the negotiated version and waits for its response.
    pub async fn send<R: Request>(&self, request: &R) -> Result<R::Response, ConnectionError> {
        self.send_with_timeout(request, self.config.request_timeout).await
    }

    /// Like [`Connection::send`] with an explicit response timeout (a fetch adds its max wait).
    pub async fn send_with_timeout<R: Request>(
        &self,
        request: &R,
        timeout: Duration,
    ) -> Result<R::Response, ConnectionError> {
        let version = self.version_for::<R>()?;
        self.send_at(request, version, timeout).await
    }

    /// Sends a request at a given version. The returned future does not borrow `request`, so a
    /// caller can put the next request on the wire before awaiting the previous response.
    pub fn send_at<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<R::Response, ConnectionError>> + Send + 'static
    where
        R::Response: Send + 'static,
    {
        let raw = self.send_raw_at(request, version, timeout);
        let broker = self.broker.clone();
        async move {
            let body = raw.await?;
            let mut reader = Reader::new(body);
            R::Response::decode(version, &mut reader).map_err(|source| ConnectionError::Decode {
                broker: broker.to_string(),
                api: R::API_KEY,
                version,
                source,
            })
        }
    }

    /// Sends a request and returns the response body undecoded (after the response header).
    /// Tests use it to capture golden frames from a real broker.
    pub fn send_raw_at<R: Request>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> impl std::future::Future<Output = Result<Bytes, ConnectionError>> + Send + 'static {
        let queued = self.enqueue(request, version, true);
        let connection = self.clone();
        async move {
            let receiver = queued?;
            match tokio::time::timeout(timeout, receiver).await {
                Err(_) => {
                    // A late response would arrive out of step with the next request: a timed
                    // out connection cannot be trusted again (the Java client closes it too).
                    connection.close();
                    Err(ConnectionError::Timeout {
                        broker: connection.broker.to_string(),
                        what: format!("{} response", R::API_KEY),
                        after: timeout,
                    })
                }
                Ok(Err(_)) => Err(connection.closed_error()),
                Ok(Ok(result)) => result,
            }
        }
    }

    /// Writes a request the broker will not answer (Produce with acks=0).
    pub fn send_without_response<R: Request>(&self, request: &R) -> Result<(), ConnectionError> {
        let version = self.version_for::<R>()?;
        self.enqueue(request, version, false).map(|_| ())
    }

    fn enqueue<R: Request>(
        &self,
        request: &R,
        version: i16,
        expects_response: bool,
    ) -> Result<oneshot::Receiver<Result<Bytes, ConnectionError>>, ConnectionError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        let correlation_id = self.correlation.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let mut writer = Writer::with_capacity(64);
        writer.i32(0); // size, patched below
        encode_request_header(&mut writer, R::API_KEY, version, correlation_id, &self.config.client_id);
        request.encode(version, &mut writer);
        if let Some(length) = writer.overflow() {
            return Err(ConnectionError::RequestTooLarge {
                broker: self.broker.to_string(),
                api: R::API_KEY,
                message: format!(
                    "a field of {length} bytes or items is longer than Kafka allows (strings such as the client id \
                     or a topic name: 32767 bytes)"
                ),
            });
        }
        let mut frame = writer.into_inner();
        let size = i32::try_from(frame.len().saturating_sub(4)).map_err(|_| ConnectionError::RequestTooLarge {
            broker: self.broker.to_string(),
            api: R::API_KEY,
            message: format!("the request is {} bytes; a Kafka frame holds at most 2 GiB", frame.len()),
        })?;
        if let Some(prefix) = frame.first_chunk_mut::<4>() {
            *prefix = size.to_be_bytes();
        }
        let (reply, receiver) = oneshot::channel();
        let pending = PendingRequest {
            frame,
            correlation_id,
            api_key: R::API_KEY,
            api_version: version,
            expects_response,
            reply,
        };
        self.sender.send(pending).map_err(|_| self.closed_error())?;
        Ok(receiver)
    }

    fn closed_error(&self) -> ConnectionError {
        ConnectionError::Closed { broker: self.broker.to_string() }
    }

    fn protocol_error(&self, message: &str) -> ConnectionError {
        ConnectionError::Protocol { broker: self.broker.to_string(), message: message.to_string() }
    }
}

/// The driver: owns the socket, writes queued frames, reads response frames and routes them.
async fn drive<S>(
    broker: Arc<str>,
    stream: S,
    mut receiver: mpsc::UnboundedReceiver<PendingRequest>,
    decoder: FrameDecoder,
    closed: Arc<AtomicBool>,
    shutdown: Arc<Notify>,
) where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut read_half, mut write_half) = tokio::io::split(stream);
    let mut in_flight: VecDeque<PendingRequest> = VecDeque::new();
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    let error = loop {
        if closed.load(Ordering::Acquire) {
            break ConnectionError::Closed { broker: broker.to_string() };
        }
        // Deliver every whole frame already buffered before reading more.
        match decoder.decode(&mut buffer) {
            Err(source) => break ConnectionError::Frame { broker: broker.to_string(), source },
            Ok(Some(frame)) => {
                if let Err(error) = route(&broker, frame, &mut in_flight) {
                    break error;
                }
                continue;
            }
            Ok(None) => {}
        }
        // Grow the buffer for the frame in progress only once its size prefix was checked.
        if let Ok(Some(size)) = decoder.peek_size(&buffer) {
            buffer.reserve((size + 4).saturating_sub(buffer.len()).min(1 << 20));
        } else {
            buffer.reserve(64 * 1024);
        }
        tokio::select! {
            request = receiver.recv() => {
                let Some(request) = request else { break ConnectionError::Closed { broker: broker.to_string() } };
                // A broker that stops reading must not pin the driver in a write: `close()` (from a
                // caller's timeout) interrupts it.
                let written = tokio::select! {
                    written = write_half.write_all(&request.frame) => written,
                    _ = shutdown.notified() => {
                        let error = ConnectionError::Closed { broker: broker.to_string() };
                        let _ = request.reply.send(Err(error.duplicate()));
                        break error;
                    }
                };
                if let Err(source) = written {
                    let _ = request.reply.send(Err(ConnectionError::Io { broker: broker.to_string(), source }));
                    break ConnectionError::Closed { broker: broker.to_string() };
                }
                if request.expects_response {
                    in_flight.push_back(request);
                } else {
                    let _ = request.reply.send(Ok(Bytes::new()));
                }
            }
            read = read_half.read_buf(&mut buffer) => {
                match read {
                    Ok(0) => break if in_flight.is_empty() && buffer.is_empty() {
                        ConnectionError::Closed { broker: broker.to_string() }
                    } else {
                        ConnectionError::UnexpectedEof { broker: broker.to_string(), buffered: buffer.len() }
                    },
                    Ok(_) => {}
                    Err(source) => break match tls::explain_after_handshake(host_of(&broker), &source) {
                        Some(problem) => ConnectionError::Tls { broker: broker.to_string(), problem, source: Some(source) },
                        None => ConnectionError::Io { broker: broker.to_string(), source },
                    },
                }
            }
            // `close()` sets the flag first; the loop head sees it.
            _ = shutdown.notified() => {}
        }
    };
    closed.store(true, Ordering::Release);
    tracing::debug!(broker = %broker, in_flight = in_flight.len(), "connection to broker {broker} closed: {error}");
    receiver.close();
    for request in in_flight.drain(..) {
        let _ = request.reply.send(Err(error.duplicate()));
    }
    while let Ok(request) = receiver.try_recv() {
        let _ = request.reply.send(Err(error.duplicate()));
    }
    let _ = write_half.shutdown().await;
}

/// What a SASL rejection in `round` (0 = the first SaslAuthenticate) means. Kafka words its
/// rejections alike on purpose, but SCRAM tells them apart by when they come: the broker looks
/// the user up on the client-first message (round 0) and checks the password proof on the
/// client-final message (round 1).
fn rejection_cause(mechanism: SaslMechanism, round: usize) -> AuthFailure {
    match (mechanism, round) {
        (SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512, 0) => AuthFailure::UnknownUser,
        (SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512, _) => AuthFailure::WrongPassword,
        (SaslMechanism::Plain, _) => AuthFailure::WrongUserOrPassword,
        (SaslMechanism::OAuthBearer, _) => AuthFailure::TokenRejected,
    }
}

/// The host part of `host:port` (`[v6]:port` too), for TLS server name checks.
fn host_of(address: &str) -> &str {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

/// Matches a response frame to the oldest request in flight.
fn route(broker: &str, frame: Bytes, in_flight: &mut VecDeque<PendingRequest>) -> Result<(), ConnectionError> {
    let Some(request) = in_flight.pop_front() else {
        return Err(ConnectionError::Protocol {
            broker: broker.to_string(),
            message: "received a response although no request was in flight".to_string(),
        });
    };
    let mut reader = Reader::new(frame);
    let correlation_id = match decode_response_header(&mut reader, request.api_key, request.api_version) {
        Ok(id) => id,
        Err(source) => {
            let error = ConnectionError::Decode {
                broker: broker.to_string(),
                api: request.api_key,
                version: request.api_version,
                source,
            };
            // The shutdown path answers it, after marking the connection closed, so that no caller
            // sees this error while the connection still looks usable.
            in_flight.push_front(request);
            return Err(error);
        }
    };
    if correlation_id != request.correlation_id {
        let error = ConnectionError::Protocol {
            broker: broker.to_string(),
            message: format!(
                "response correlation id {correlation_id} does not match the oldest request in flight \
                 ({} id {})",
                request.api_key, request.correlation_id
            ),
        };
        in_flight.push_front(request);
        return Err(error);
    }
    let _ = request.reply.send(Ok(reader.rest()));
    Ok(())
}
