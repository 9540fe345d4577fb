//! The connection driver against a scripted fake broker that misbehaves: hostile size prefixes,
//! stalls, cut connections, wrong correlation ids, garbage bodies. A real broker will not do any
//! of this, which is why a fake is right here (STYLE.md 8).
//!
//! The fake answers the ApiVersions handshake properly (bytes written by hand below), then does
//! what the test scripts on the next request. Every error's text must name the broker address.

use std::future::Future;
use std::time::{Duration, Instant};

use sluice_wire::connection::{Connection, ConnectionConfig, ConnectionError};
use sluice_wire::protocol::messages::fetch::FetchRequest;
use sluice_wire::protocol::messages::metadata::{MetadataRequest, MetadataResponse};
use sluice_wire::protocol::ApiKey;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);
/// How long a misbehaving fake keeps its socket open (well past any timeout under test).
const HOLD: Duration = Duration::from_secs(10);

/// (api key, min version, max version) a normal fake announces.
const RANGES: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 13), (1, 12, 17)];

// ---------------------------------------------------------------------------------------------
// The fake broker
// ---------------------------------------------------------------------------------------------

/// The start of a request as the fake reads it.
#[derive(Debug, Clone, Copy)]
struct RequestHeader {
    api_key: i16,
    version: i16,
    correlation_id: i32,
}

/// The fake's end of one connection.
struct Peer {
    stream: TcpStream,
}

impl Peer {
    /// Reads one whole request frame and parses the header fields the fake needs.
    async fn read_request(&mut self) -> RequestHeader {
        let size = self.stream.read_i32().await.expect("request size");
        assert!((8..1 << 20).contains(&size), "implausible request size {size}");
        let mut frame = vec![0u8; size as usize];
        self.stream.read_exact(&mut frame).await.expect("request frame");
        RequestHeader {
            api_key: i16::from_be_bytes([frame[0], frame[1]]),
            version: i16::from_be_bytes([frame[2], frame[3]]),
            correlation_id: i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]),
        }
    }

    async fn write(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).await.expect("fake broker write");
        self.stream.flush().await.expect("fake broker flush");
    }

    /// Keeps the connection open and silent.
    async fn hold(self) {
        tokio::time::sleep(HOLD).await;
        drop(self);
    }
}

/// Starts a fake broker on 127.0.0.1:0 that accepts one connection, answers ApiVersions with
/// `ranges`, then hands the connection to `script`.
async fn fake_broker<T, F, Fut>(ranges: &'static [(i16, i16, i16)], script: F) -> (String, JoinHandle<T>)
where
    F: FnOnce(Peer) -> Fut + Send + 'static,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake broker");
    let address = listener.local_addr().expect("local address").to_string();
    let handle = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let mut peer = Peer { stream };
        let request = peer.read_request().await;
        assert_eq!(request.api_key, 18, "the client starts with ApiVersions");
        let response = api_versions_response(request.correlation_id, request.version, ranges);
        peer.write(&response).await;
        script(peer).await
    });
    (address, handle)
}

/// A fake that answers ApiVersions, reads the next request and then runs `misbehave` with it.
async fn misbehaving<F, Fut>(misbehave: F) -> Connection
where
    F: FnOnce(Peer, RequestHeader) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (address, _broker) = fake_broker(RANGES, |mut peer| async move {
        let request = peer.read_request().await;
        assert_eq!(request.api_key, 3, "the test sends Metadata");
        misbehave(peer, request).await;
    })
    .await;
    connect(&address).await
}

fn config() -> ConnectionConfig {
    ConnectionConfig::default()
        .with_client_id("sluice-fault-tests")
        .with_timeouts(Duration::from_secs(5), REQUEST_TIMEOUT)
}

async fn connect(address: &str) -> Connection {
    Connection::connect(address, config()).await.expect("handshake with the fake broker")
}

fn metadata_request() -> MetadataRequest {
    MetadataRequest { topics: Some(vec![]), allow_auto_topic_creation: false }
}

// ---------------------------------------------------------------------------------------------
// Hand-written response bytes
// ---------------------------------------------------------------------------------------------

fn uvarint(out: &mut Vec<u8>, mut value: u32) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Prefixes a response (header and body) with its size.
fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = (message.len() as i32).to_be_bytes().to_vec();
    out.extend_from_slice(message);
    out
}

/// An ApiVersions response frame at `version`: header v0 always, body flexible from v3.
fn api_versions_response(correlation_id: i32, version: i16, ranges: &[(i16, i16, i16)]) -> Vec<u8> {
    let flexible = version >= 3;
    let mut m = correlation_id.to_be_bytes().to_vec(); // header v0: no tagged fields
    m.extend_from_slice(&0i16.to_be_bytes()); // error code
    if flexible {
        uvarint(&mut m, ranges.len() as u32 + 1);
    } else {
        m.extend_from_slice(&(ranges.len() as i32).to_be_bytes());
    }
    for (api_key, min, max) in ranges {
        m.extend_from_slice(&api_key.to_be_bytes());
        m.extend_from_slice(&min.to_be_bytes());
        m.extend_from_slice(&max.to_be_bytes());
        if flexible {
            m.push(0); // no tagged fields
        }
    }
    if version >= 1 {
        m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    }
    if flexible {
        m.push(0);
    }
    frame(&m)
}

/// A Metadata v13 response frame (header v1) with no brokers and no topics, whose controller id
/// is `controller_id` so that a test can tell responses apart.
fn metadata_response(correlation_id: i32, controller_id: i32) -> Vec<u8> {
    let mut m = correlation_id.to_be_bytes().to_vec();
    m.push(0); // header tagged fields
    m.extend_from_slice(&0i32.to_be_bytes()); // throttle time
    uvarint(&mut m, 1); // brokers: empty compact array
    uvarint(&mut m, 0); // cluster id: null
    m.extend_from_slice(&controller_id.to_be_bytes());
    uvarint(&mut m, 1); // topics: empty compact array
    m.extend_from_slice(&0i16.to_be_bytes()); // top-level error code (v13)
    m.push(0); // tagged fields
    frame(&m)
}

// ---------------------------------------------------------------------------------------------
// Checks shared by every fault
// ---------------------------------------------------------------------------------------------

/// After a fault the connection is closed, says so, and a further request fails at once with
/// `Closed`, naming the broker.
async fn assert_closed_and_fails_fast(connection: &Connection) {
    assert!(connection.is_closed(), "a failed connection must report itself closed");
    let started = Instant::now();
    let error = tokio::time::timeout(Duration::from_secs(2), connection.send(&metadata_request()))
        .await
        .expect("a send on a closed connection must not wait")
        .expect_err("a send on a closed connection must fail");
    assert!(started.elapsed() < Duration::from_millis(100), "took {:?}", started.elapsed());
    assert!(matches!(error, ConnectionError::Closed { .. }), "expected Closed, got {error:?}");
    assert_names_broker(&error, connection.broker());
}

fn assert_names_broker(error: &ConnectionError, address: &str) {
    assert_eq!(error.broker(), address);
    let text = error.to_string();
    assert!(text.contains(address), "error text must name the broker {address}: {text}");
}

/// Sends Metadata and returns the error with the time it took.
async fn failing_metadata(connection: &Connection) -> (ConnectionError, Duration) {
    let started = Instant::now();
    let result = tokio::time::timeout(Duration::from_secs(5), connection.send(&metadata_request()))
        .await
        .expect("the connection layer must give up by itself");
    let error = result.expect_err("the fake broker misbehaved; the request must fail");
    (error, started.elapsed())
}

// ---------------------------------------------------------------------------------------------
// Faults
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn two_gib_size_prefix_fails_at_once_with_frame_error() {
    let connection = misbehaving(|mut peer, _| async move {
        peer.write(&0x7fff_ffffu32.to_be_bytes()).await;
        peer.write(&[0u8; 64]).await;
        peer.hold().await;
    })
    .await;
    let (error, elapsed) = failing_metadata(&connection).await;
    assert!(matches!(error, ConnectionError::Frame { .. }), "expected Frame, got {error:?}");
    assert!(elapsed < REQUEST_TIMEOUT / 2, "rejected on the prefix, not by a timeout: {elapsed:?}");
    let text = error.to_string();
    assert!(text.contains("2147483647") && text.contains("limit"), "{text}");
    assert!(!error.is_transient(), "a non-Kafka listener will not get better by reconnecting");
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn negative_size_prefix_fails_with_frame_error() {
    let connection = misbehaving(|mut peer, _| async move {
        peer.write(&(-5i32).to_be_bytes()).await;
        peer.hold().await;
    })
    .await;
    let (error, elapsed) = failing_metadata(&connection).await;
    assert!(matches!(error, ConnectionError::Frame { .. }), "expected Frame, got {error:?}");
    assert!(elapsed < REQUEST_TIMEOUT / 2, "{elapsed:?}");
    assert!(error.to_string().contains("negative"), "{error}");
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn frame_that_ends_early_then_silence_times_out() {
    let connection = misbehaving(|mut peer, request| async move {
        let whole = metadata_response(request.correlation_id, 1);
        peer.write(&whole[..whole.len() - 3]).await;
        peer.hold().await;
    })
    .await;
    let (error, elapsed) = failing_metadata(&connection).await;
    match &error {
        ConnectionError::Timeout { after, what, .. } => {
            assert_eq!(*after, REQUEST_TIMEOUT);
            assert!(what.contains("METADATA"), "{what}");
        }
        other => panic!("expected Timeout, got {other:?}"),
    }
    assert!(elapsed >= REQUEST_TIMEOUT && elapsed < REQUEST_TIMEOUT * 3, "{elapsed:?}");
    assert!(error.to_string().contains("timed out: no METADATA response within 500 ms"), "{error}");
    assert!(error.is_transient());
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn slowloris_broker_times_out_on_the_whole_response_not_per_byte() {
    let connection = misbehaving(|mut peer, request| async move {
        for byte in metadata_response(request.correlation_id, 1) {
            if peer.stream.write_all(&[byte]).await.is_err() {
                return; // the client gave up and closed: that is the point
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        peer.hold().await;
    })
    .await;
    let (error, elapsed) = failing_metadata(&connection).await;
    assert!(matches!(error, ConnectionError::Timeout { .. }), "expected Timeout, got {error:?}");
    // The response is ~30 bytes, 3 s at this pace: the deadline must not move with each byte.
    assert!(elapsed < REQUEST_TIMEOUT * 3, "{elapsed:?}");
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn wrong_correlation_id_is_a_protocol_error_naming_both_ids() {
    let connection = misbehaving(|mut peer, request| async move {
        peer.write(&metadata_response(request.correlation_id + 7, 1)).await;
        peer.hold().await;
    })
    .await;
    let (error, _) = failing_metadata(&connection).await;
    let ConnectionError::Protocol { message, .. } = &error else { panic!("expected Protocol, got {error:?}") };
    // ApiVersions took correlation id 0, so Metadata is 1 and the fake answered 8.
    assert!(message.contains("correlation id 8") && message.contains("id 1"), "{message}");
    assert!(message.contains("METADATA"), "{message}");
    assert!(!error.is_transient());
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn connection_reset_mid_frame_is_eof_or_io() {
    let connection = misbehaving(|mut peer, request| async move {
        let whole = metadata_response(request.correlation_id, 1);
        peer.write(&whole[..10]).await;
        // Linger 0: close with a RST instead of a FIN.
        peer.stream.set_zero_linger().expect("set linger");
        drop(peer);
    })
    .await;
    let (error, elapsed) = failing_metadata(&connection).await;
    match &error {
        ConnectionError::UnexpectedEof { buffered, .. } => assert!(*buffered <= 10, "{buffered}"),
        ConnectionError::Io { .. } => {}
        other => panic!("expected UnexpectedEof or Io, got {other:?}"),
    }
    assert!(elapsed < REQUEST_TIMEOUT, "a reset is noticed at once: {elapsed:?}");
    assert!(error.is_transient());
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn clean_close_mid_frame_is_unexpected_eof_with_a_hint() {
    let connection = misbehaving(|mut peer, request| async move {
        let whole = metadata_response(request.correlation_id, 1);
        peer.write(&whole[..10]).await;
        let _ = peer.stream.shutdown().await;
    })
    .await;
    let (error, _) = failing_metadata(&connection).await;
    let ConnectionError::UnexpectedEof { buffered, .. } = &error else {
        panic!("expected UnexpectedEof, got {error:?}")
    };
    assert_eq!(*buffered, 10);
    assert!(error.to_string().contains("TLS or SASL"), "{error}");
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn garbage_body_is_a_decode_error_naming_api_and_version() {
    let connection = misbehaving(|mut peer, request| async move {
        let mut message = request.correlation_id.to_be_bytes().to_vec();
        message.push(0); // a proper header v1
        message.extend_from_slice(&[0xff; 9]); // then nonsense
        peer.write(&frame(&message)).await;
        peer.hold().await;
    })
    .await;
    let (error, _) = failing_metadata(&connection).await;
    let ConnectionError::Decode { api, version, .. } = &error else { panic!("expected Decode, got {error:?}") };
    assert_eq!((*api, *version), (ApiKey::METADATA, 13));
    let text = error.to_string();
    assert!(text.contains("METADATA v13"), "{text}");
    assert_names_broker(&error, connection.broker());
    // The frame itself was sound, so the connection could be reused; either way a send after it
    // must not hang.
    let follow_up = tokio::time::timeout(Duration::from_secs(2), connection.send(&metadata_request())).await;
    assert!(follow_up.is_ok(), "a send after a decode error must not hang");
}

#[tokio::test]
async fn api_versions_without_fetch_tells_the_user_to_upgrade() {
    const NO_FETCH: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 13)];
    let (address, _broker) = fake_broker(NO_FETCH, |peer| peer.hold()).await;
    let connection = connect(&address).await;
    assert_eq!(connection.version_for::<MetadataRequest>().unwrap(), 13);
    let error = connection.version_for::<FetchRequest>().expect_err("no Fetch announced");
    match &error {
        ConnectionError::UnsupportedVersion { api, ours, theirs, .. } => {
            assert_eq!(*api, ApiKey::FETCH);
            assert_eq!(*ours, (12, 18));
            assert_eq!(*theirs, None);
        }
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    let text = error.to_string();
    assert!(text.contains("FETCH") && text.contains("Kafka 3.5 or newer"), "{text}");
    assert_names_broker(&error, &address);
    // Nothing is sent for an API the broker lacks.
    let started = Instant::now();
    let fetch = FetchRequest {
        max_wait_ms: 0,
        min_bytes: 1,
        max_bytes: 1,
        isolation_level: 0,
        session_id: 0,
        session_epoch: -1,
        topics: vec![],
        rack_id: String::new(),
    };
    let error = connection.send(&fetch).await.expect_err("unsupported");
    assert!(matches!(error, ConnectionError::UnsupportedVersion { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(100));
}

#[tokio::test]
async fn api_versions_with_too_old_fetch_tells_the_user_to_upgrade() {
    const OLD_FETCH: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 13), (1, 4, 11)];
    let (address, _broker) = fake_broker(OLD_FETCH, |peer| peer.hold()).await;
    let connection = connect(&address).await;
    let error = connection.version_for::<FetchRequest>().expect_err("Fetch 4-11 is too old");
    let text = error.to_string();
    assert!(text.contains("v4-11") && text.contains("v12-18") && text.contains("upgrade the broker"), "{text}");
    assert_names_broker(&error, &address);
}

// ---------------------------------------------------------------------------------------------
// Pipelining
// ---------------------------------------------------------------------------------------------

#[tokio::test]
async fn pipelined_requests_each_get_their_own_response() {
    // The fake reads both requests before answering either: if the client waited for the first
    // response before sending the second, this would stall until the timeout.
    let (address, broker) = fake_broker(RANGES, |mut peer| async move {
        let first = peer.read_request().await;
        let second = peer.read_request().await;
        // The controller id echoes the correlation id, so each caller can see which answer it got.
        let mut answers = metadata_response(first.correlation_id, 1000 + first.correlation_id);
        answers.extend_from_slice(&metadata_response(second.correlation_id, 1000 + second.correlation_id));
        peer.write(&answers).await; // both in one write: the driver must split them
        let third = peer.read_request().await;
        peer.write(&metadata_response(third.correlation_id, 1000 + third.correlation_id)).await;
        (first, second, third)
    })
    .await;
    let connection = connect(&address).await;
    assert_eq!(connection.version_for::<FetchRequest>().unwrap(), 17, "min(ours 18, theirs 17)");
    let version = connection.version_for::<MetadataRequest>().unwrap();
    let request = metadata_request();
    let first = connection.send_at(&request, version, REQUEST_TIMEOUT);
    let second = connection.send_at(&request, version, REQUEST_TIMEOUT);
    let (first, second): (MetadataResponse, MetadataResponse) =
        tokio::try_join!(first, second).expect("both pipelined requests succeed");
    let third: MetadataResponse = connection.send(&request).await.expect("the connection is still usable");
    let (sent_first, sent_second, sent_third) = broker.await.expect("fake broker");
    assert_eq!((sent_first.api_key, sent_first.version), (3, 13));
    assert_eq!(first.controller_id, 1000 + sent_first.correlation_id);
    assert_eq!(second.controller_id, 1000 + sent_second.correlation_id);
    assert_eq!(third.controller_id, 1000 + sent_third.correlation_id);
    assert!(sent_first.correlation_id < sent_second.correlation_id);
}

#[tokio::test]
async fn fault_fails_every_pipelined_request_not_just_the_first() {
    let (address, _broker) = fake_broker(RANGES, |mut peer| async move {
        let first = peer.read_request().await;
        let _second = peer.read_request().await;
        peer.write(&metadata_response(first.correlation_id, 1)).await;
        peer.write(&0x7fff_ffffu32.to_be_bytes()).await;
        peer.hold().await;
    })
    .await;
    let connection = connect(&address).await;
    let version = connection.version_for::<MetadataRequest>().unwrap();
    let request = metadata_request();
    let first = connection.send_at(&request, version, REQUEST_TIMEOUT);
    let second = connection.send_at(&request, version, REQUEST_TIMEOUT);
    let (first, second) = tokio::join!(first, second);
    assert!(first.is_ok(), "{first:?}");
    let error = second.expect_err("the oversized frame fails the request it would answer");
    assert!(matches!(error, ConnectionError::Frame { .. }), "{error:?}");
    assert_names_broker(&error, &address);
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn protocol_error_is_reported_only_after_the_connection_is_marked_closed() {
    // On a multi-threaded runtime the caller can wake before the driver task goes on: the
    // connection must already say it is closed when the caller sees the error.
    for attempt in 0..200 {
        let connection = misbehaving(|mut peer, request| async move {
            peer.write(&metadata_response(request.correlation_id + 7, 1)).await;
            peer.hold().await;
        })
        .await;
        let (error, _) = failing_metadata(&connection).await;
        assert!(matches!(error, ConnectionError::Protocol { .. }), "{error:?}");
        assert!(
            connection.is_closed(),
            "attempt {attempt}: Protocol error seen before the connection was marked closed"
        );
    }
}
