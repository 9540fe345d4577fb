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
//! # Re-authentication (KIP-368)
//!
//! A broker with `connections.max.reauth.ms` (or a token with an expiry) gives each SASL session
//! a lifetime in the last SaslAuthenticate response, and closes a connection whose session has
//! expired when the next request other than SaslHandshake arrives. A task per connection sleeps
//! until [`reauthentication_delay`] before the lifetime ends, fetches a fresh token first (for a
//! token source; traffic goes on meanwhile), then asks the driver to *hold*: the driver stops
//! taking requests from callers (they wait in its queue), while requests already written keep
//! being answered and routed. The exchange (SaslHandshake, SaslAuthenticate rounds) goes out on
//! the driver's second, authentication lane; the broker answers it after the requests written
//! before it, since it answers in order. Then the driver is released and the queued requests go
//! out. No in-flight request is lost or resent. A rejected re-authentication closes the
//! connection with that error, which every waiting caller receives.
//!
//! # References
//! - Kafka protocol guide, "Network" (ordering guarantee per connection).
//! - KIP-511 (ApiVersions v3 client software name/version).
//! - KIP-368 (re-authentication; the broker's `KafkaChannel.maybeBeginServerReauthentication`).

mod error;
pub mod tls;

pub use error::{AuthFailure, ConnectionError};
pub use tls::{TlsError, TlsField, TlsProblem, TlsSettings};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// What the re-authentication side tells the driver, in order.
enum AuthMessage {
    /// Stop writing callers' requests until `Release` (or `Fail`).
    Hold,
    /// A SaslHandshake or SaslAuthenticate request of the exchange.
    Request(PendingRequest),
    /// Resume callers' requests.
    Release,
    /// The re-authentication failed: close the connection with this error.
    Fail(ConnectionError),
}

/// Which of the driver's two queues a request goes through.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// Callers' requests; held during a re-authentication.
    Normal,
    /// The SASL exchange; never held.
    Auth,
}

/// A connection to one broker. Cheap to clone; all clones share the one socket and driver.
#[derive(Clone)]
pub struct Connection {
    broker: Arc<str>,
    config: Arc<ConnectionConfig>,
    versions: Arc<BrokerVersions>,
    sender: mpsc::UnboundedSender<PendingRequest>,
    auth_sender: mpsc::UnboundedSender<AuthMessage>,
    correlation: Arc<std::sync::atomic::AtomicI32>,
    closed: Arc<AtomicBool>,
    shutdown: Arc<Notify>,
}

/// A connection as the re-authentication task holds it: without keeping the callers' queue
/// open, so that the driver still ends when the last [`Connection`] is dropped.
struct WeakConnection {
    broker: Arc<str>,
    config: Arc<ConnectionConfig>,
    versions: Arc<BrokerVersions>,
    sender: mpsc::WeakUnboundedSender<PendingRequest>,
    auth_sender: mpsc::UnboundedSender<AuthMessage>,
    correlation: Arc<std::sync::atomic::AtomicI32>,
    closed: Arc<AtomicBool>,
    shutdown: Arc<Notify>,
}

impl WeakConnection {
    fn upgrade(&self) -> Option<Connection> {
        Some(Connection {
            broker: self.broker.clone(),
            config: self.config.clone(),
            versions: self.versions.clone(),
            sender: self.sender.upgrade()?,
            auth_sender: self.auth_sender.clone(),
            correlation: self.correlation.clone(),
            closed: self.closed.clone(),
            shutdown: self.shutdown.clone(),
        })
    }
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
        let (auth_sender, auth_receiver) = mpsc::unbounded_channel();
        let closed = Arc::new(AtomicBool::new(false));
        let shutdown = Arc::new(Notify::new());
        let decoder = FrameDecoder::new(config.max_frame_size);
        tokio::spawn(drive(broker.clone(), stream, receiver, auth_receiver, decoder, closed.clone(), shutdown.clone()));
        let mut connection = Connection {
            broker,
            config: Arc::new(config),
            versions: Arc::new(BrokerVersions::default()),
            sender,
            auth_sender,
            correlation: Arc::new(std::sync::atomic::AtomicI32::new(0)),
            closed,
            shutdown,
        };
        let timeout = connection.config.connect_timeout;
        let versions = connection.fetch_api_versions(timeout).await?;
        connection.versions = Arc::new(versions);
        if let Some(sasl) = connection.config.sasl.clone() {
            // The token source has its own deadlines (an HTTP exchange); only the exchange with the
            // broker is held to the connect timeout.
            let credentials = match connection.session_credentials(&sasl, false).await {
                Ok(credentials) => credentials,
                Err(error) => {
                    connection.close();
                    return Err(error);
                }
            };
            let authenticated =
                tokio::time::timeout(timeout, connection.authenticate(&sasl, &credentials, false)).await;
            match authenticated {
                Ok(Ok(lifetime)) => {
                    if let Some(lifetime) = lifetime {
                        tokio::spawn(reauthenticate_until_closed(
                            connection.downgrade(),
                            sasl,
                            lifetime,
                            Instant::now(),
                        ));
                    }
                }
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

    fn downgrade(&self) -> WeakConnection {
        WeakConnection {
            broker: self.broker.clone(),
            config: self.config.clone(),
            versions: self.versions.clone(),
            sender: self.sender.downgrade(),
            auth_sender: self.auth_sender.clone(),
            correlation: self.correlation.clone(),
            closed: self.closed.clone(),
            shutdown: self.shutdown.clone(),
        }
    }

    /// The credentials for one SASL session: the configured ones, with a token fetched now when
    /// they name a token source.
    async fn session_credentials(
        &self,
        sasl: &SaslSettings,
        reauthentication: bool,
    ) -> Result<SaslCredentials, ConnectionError> {
        let Some(source) = sasl.credentials.token_source() else { return Ok(sasl.credentials.clone()) };
        let unavailable = |message: String, transient: bool| ConnectionError::Authentication {
            broker: self.broker.to_string(),
            mechanism: sasl.mechanism,
            failure: AuthFailure::TokenUnavailable { message, transient },
            broker_message: None,
            reauthentication,
        };
        // A bound for token sources without deadlines of their own (the built-in ones have).
        let limit = self.config.connect_timeout + self.config.request_timeout;
        match tokio::time::timeout(limit, source.token()).await {
            Ok(Ok(token)) => Ok(sasl.credentials.with_fetched_token(token)),
            Ok(Err(error)) => Err(unavailable(error.message, error.transient)),
            Err(_) => Err(unavailable(
                format!("timed out: the token source gave no token within {} ms", limit.as_millis()),
                true,
            )),
        }
    }

    /// Re-authenticates this established connection (KIP-368): a fresh token first, then the
    /// exchange with the driver holding callers' requests. The new session lifetime, if any.
    async fn reauthenticate(&self, sasl: &SaslSettings, expires: Instant) -> Result<Option<Duration>, ConnectionError> {
        // A token endpoint that is briefly down must not end a connection whose session still
        // has time: retry until a second before it expires.
        let credentials = loop {
            match self.session_credentials(sasl, true).await {
                Ok(credentials) => break credentials,
                Err(error) if error.is_transient() && Instant::now() + Duration::from_secs(2) < expires => {
                    tracing::warn!(broker = %self.broker, "re-authentication with broker {} postponed: {error}; retrying in 1 s", self.broker);
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
                Err(error) => return Err(error),
            }
        };
        self.auth_sender.send(AuthMessage::Hold).map_err(|_| self.closed_error())?;
        let timeout = self.config.connect_timeout;
        let result = match tokio::time::timeout(timeout, self.authenticate(sasl, &credentials, true)).await {
            Ok(result) => result,
            Err(_) => Err(ConnectionError::Timeout {
                broker: self.broker.to_string(),
                what: "SASL re-authentication".to_string(),
                after: timeout,
            }),
        };
        if result.is_ok() {
            self.auth_sender.send(AuthMessage::Release).map_err(|_| self.closed_error())?;
        }
        result
    }

    /// SaslHandshake, then SaslAuthenticate rounds until the mechanism is done (KIP-152), on the
    /// authentication lane. The session lifetime the broker gave, if it gave one (KIP-368).
    async fn authenticate(
        &self,
        sasl: &SaslSettings,
        credentials: &SaslCredentials,
        reauthentication: bool,
    ) -> Result<Option<Duration>, ConnectionError> {
        let mechanism = sasl.mechanism;
        if !reauthentication
            && mechanism == SaslMechanism::Plain
            && self.config.tls.is_none()
            && !sasl.allow_plain_without_tls
        {
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
            reauthentication,
        };
        let sasl_error = |error: crate::protocol::sasl::SaslError| failed(AuthFailure::Client(Box::new(error)), None);
        let request = SaslHandshakeRequest { mechanism: mechanism.name().to_string() };
        let handshake = self.send_on_auth_lane(&request).await?;
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
        let mut session = SaslSession::new(mechanism, credentials).map_err(sasl_error)?;
        let mut outgoing = session.initial_message();
        // Each mechanism finishes in a few rounds; the bound stops a broker that never does.
        for round in 0..8 {
            let response = self.send_on_auth_lane(&SaslAuthenticateRequest { auth_bytes: outgoing }).await?;
            if !response.error_code.is_ok() {
                let broker_says = response.error_message.unwrap_or_else(|| response.error_code.to_string());
                let ours = session.rejection().map(|rejection| format!(" ({rejection})")).unwrap_or_default();
                let token = match mechanism {
                    SaslMechanism::OAuthBearer => credentials
                        .fixed_token()
                        .and_then(|token| crate::auth::describe_jwt(token, std::time::SystemTime::now()))
                        .map(|description| format!("; {description}"))
                        .unwrap_or_default(),
                    _ => String::new(),
                };
                return Err(failed(rejection_cause(mechanism, round), Some(format!("{broker_says}{ours}{token}"))));
            }
            match session.handle_server_message(&response.auth_bytes).map_err(sasl_error)? {
                SaslStep::Done => {
                    let lifetime = u64::try_from(response.session_lifetime_ms).ok().filter(|ms| *ms > 0);
                    return Ok(lifetime.map(Duration::from_millis));
                }
                SaslStep::Send(bytes) => outgoing = bytes,
            }
        }
        Err(self.protocol_error("SASL authentication did not finish after 8 rounds"))
    }

    /// Sends a request of the SASL exchange on the authentication lane, which a hold does not stop.
    async fn send_on_auth_lane<R: Request>(&self, request: &R) -> Result<R::Response, ConnectionError>
    where
        R::Response: Send + 'static,
    {
        let version = self.version_for::<R>()?;
        let receiver = self.enqueue_on(request, version, true, Lane::Auth)?;
        let timeout = self.config.request_timeout;
        let body = match tokio::time::timeout(timeout, receiver).await {
            Err(_) => {
                self.close();
                return Err(ConnectionError::Timeout {
                    broker: self.broker.to_string(),
                    what: format!("{} response", R::API_KEY),
                    after: timeout,
                });
            }
            Ok(Err(_)) => return Err(self.closed_error()),
            Ok(Ok(result)) => result?,
        };
        R::Response::decode(version, &mut Reader::new(body)).map_err(|source| ConnectionError::Decode {
            broker: self.broker.to_string(),
            api: R::API_KEY,
            version,
            source,
        })
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
        self.enqueue_on(request, version, expects_response, Lane::Normal)
    }

    fn enqueue_on<R: Request>(
        &self,
        request: &R,
        version: i16,
        expects_response: bool,
        lane: Lane,
    ) -> Result<oneshot::Receiver<Result<Bytes, ConnectionError>>, ConnectionError> {
        if self.is_closed() {
            return Err(self.closed_error());
        }
        let correlation_id = self.correlation.fetch_add(1, Ordering::Relaxed) & i32::MAX;
        let mut writer = Writer::with_capacity(64 + request.size_hint());
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
        match lane {
            Lane::Normal => self.sender.send(pending).map_err(|_| self.closed_error())?,
            Lane::Auth => self.auth_sender.send(AuthMessage::Request(pending)).map_err(|_| self.closed_error())?,
        }
        Ok(receiver)
    }

    fn closed_error(&self) -> ConnectionError {
        ConnectionError::Closed { broker: self.broker.to_string() }
    }

    fn protocol_error(&self, message: &str) -> ConnectionError {
        ConnectionError::Protocol { broker: self.broker.to_string(), message: message.to_string() }
    }
}

/// Re-authenticates the connection before each session lifetime runs out, until the connection
/// closes or the broker stops giving lifetimes. A failure closes the connection with its error.
async fn reauthenticate_until_closed(
    weak: WeakConnection,
    sasl: SaslSettings,
    mut lifetime: Duration,
    mut authenticated_at: Instant,
) {
    loop {
        let jitter = getrandom::u32().map(|value| value as f64 / u32::MAX as f64).unwrap_or(0.5);
        let due = authenticated_at + reauthentication_delay(lifetime, jitter);
        let expires = authenticated_at + lifetime;
        tokio::select! {
            _ = tokio::time::sleep_until(due.into()) => {}
            // The driver ended (the connection closed): nothing left to keep alive.
            _ = weak.auth_sender.closed() => return,
        }
        let Some(connection) = weak.upgrade() else { return };
        if connection.is_closed() {
            return;
        }
        let started = Instant::now();
        match connection.reauthenticate(&sasl, expires).await {
            Ok(next) => {
                tracing::debug!(
                    broker = %connection.broker,
                    mechanism = %sasl.mechanism,
                    "re-authenticated with broker {} ({}) in {} ms; next session lifetime {}",
                    connection.broker,
                    sasl.mechanism,
                    started.elapsed().as_millis(),
                    next.map_or("unlimited".to_string(), |lifetime| format!("{} ms", lifetime.as_millis())),
                );
                let Some(next) = next else { return };
                lifetime = next;
                authenticated_at = Instant::now();
            }
            Err(error) => {
                tracing::warn!(broker = %connection.broker, "closing the connection to broker {}: {error}", connection.broker);
                let _ = connection.auth_sender.send(AuthMessage::Fail(error));
                connection.close();
                return;
            }
        }
    }
}

/// How long after authenticating to re-authenticate, for a session `lifetime` and a random
/// `jitter` in 0..=1.
///
/// Like the Java client: at 85-95% of the lifetime, spread so that connections opened together
/// do not re-authenticate together. But never later than `min(3 s, lifetime / 2)` before the
/// end: the broker closes the connection on the first request it *reads* after the session
/// expired that is not the SaslHandshake, and it reads a connection's requests one at a time,
/// so the requests already written when the hold begins (a fetch long-polling for its max wait,
/// a pipelined one behind it) must all be read before the lifetime ends. The broker also refuses
/// a re-authentication within a second of the last one.
pub fn reauthentication_delay(lifetime: Duration, jitter: f64) -> Duration {
    let jitter = if jitter.is_finite() { jitter.clamp(0.0, 1.0) } else { 0.5 };
    let spread = lifetime.mul_f64(0.85 + 0.10 * jitter);
    let margin = (lifetime / 2).min(Duration::from_secs(3));
    spread.min(lifetime.saturating_sub(margin)).max(Duration::from_secs(1))
}

/// Writes one request; on failure it has answered the request and returns why the driver stops.
async fn write_request<W>(
    broker: &str,
    write_half: &mut W,
    shutdown: &Notify,
    request: PendingRequest,
    in_flight: &mut VecDeque<PendingRequest>,
) -> Result<(), ConnectionError>
where
    W: AsyncWrite + Unpin,
{
    // A broker that stops reading must not pin the driver in a write: `close()` (from a caller's
    // timeout) interrupts it.
    let written = tokio::select! {
        written = write_half.write_all(&request.frame) => written,
        _ = shutdown.notified() => {
            let error = ConnectionError::Closed { broker: broker.to_string() };
            let _ = request.reply.send(Err(error.duplicate()));
            return Err(error);
        }
    };
    if let Err(source) = written {
        let _ = request.reply.send(Err(ConnectionError::Io { broker: broker.to_string(), source }));
        return Err(ConnectionError::Closed { broker: broker.to_string() });
    }
    if request.expects_response {
        in_flight.push_back(request);
    } else {
        let _ = request.reply.send(Ok(Bytes::new()));
    }
    Ok(())
}

/// The driver: owns the socket, writes queued frames, reads response frames and routes them.
async fn drive<S>(
    broker: Arc<str>,
    stream: S,
    mut receiver: mpsc::UnboundedReceiver<PendingRequest>,
    mut auth_receiver: mpsc::UnboundedReceiver<AuthMessage>,
    decoder: FrameDecoder,
    closed: Arc<AtomicBool>,
    shutdown: Arc<Notify>,
) where
    S: AsyncRead + AsyncWrite + Send + Unpin + 'static,
{
    let (mut read_half, mut write_half) = tokio::io::split(stream);
    let mut in_flight: VecDeque<PendingRequest> = VecDeque::new();
    let mut buffer = BytesMut::with_capacity(64 * 1024);
    // A re-authentication is in progress: callers' requests wait in `receiver`.
    let mut held = false;
    let mut auth_open = true;
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
            request = receiver.recv(), if !held => {
                let Some(request) = request else { break ConnectionError::Closed { broker: broker.to_string() } };
                if let Err(error) = write_request(&broker, &mut write_half, &shutdown, request, &mut in_flight).await {
                    break error;
                }
            }
            message = auth_receiver.recv(), if auth_open => match message {
                None => auth_open = false,
                Some(AuthMessage::Hold) => held = true,
                Some(AuthMessage::Release) => held = false,
                Some(AuthMessage::Fail(error)) => break error,
                Some(AuthMessage::Request(request)) => {
                    if let Err(error) = write_request(&broker, &mut write_half, &shutdown, request, &mut in_flight).await {
                        break error;
                    }
                }
            },
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
    auth_receiver.close();
    for request in in_flight.drain(..) {
        let _ = request.reply.send(Err(error.duplicate()));
    }
    while let Ok(request) = receiver.try_recv() {
        let _ = request.reply.send(Err(error.duplicate()));
    }
    while let Ok(message) = auth_receiver.try_recv() {
        if let AuthMessage::Request(request) = message {
            let _ = request.reply.send(Err(error.duplicate()));
        }
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

#[cfg(test)]
mod reauthentication_tests {
    use super::reauthentication_delay;
    use std::time::Duration;

    #[test]
    fn reauthenticates_at_85_to_95_percent_with_a_margin_for_short_sessions() {
        let fifteen_minutes = Duration::from_secs(900);
        assert_eq!(reauthentication_delay(fifteen_minutes, 0.0), Duration::from_secs(765));
        assert_eq!(reauthentication_delay(fifteen_minutes, 1.0), Duration::from_secs(855));
        // Short sessions: at least min(3 s, half) before the end.
        assert_eq!(reauthentication_delay(Duration::from_secs(5), 1.0), Duration::from_millis(2500));
        assert_eq!(reauthentication_delay(Duration::from_secs(30), 1.0), Duration::from_secs(27));
        // Never sooner than a second: the broker refuses re-authentications closer together.
        assert_eq!(reauthentication_delay(Duration::from_millis(500), 0.5), Duration::from_secs(1));
        assert_eq!(reauthentication_delay(fifteen_minutes, f64::NAN), Duration::from_secs(810));
    }
}
