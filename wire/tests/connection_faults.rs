//! The connection driver against a scripted fake broker (`sluice_tests::fake_broker`) that
//! misbehaves: hostile size prefixes, stalls, cut connections, wrong correlation ids, garbage
//! bodies. A real broker will not do any of this, which is why a fake is right here (STYLE.md 8).
//!
//! The fake answers the ApiVersions handshake properly, then does what the test scripts on the
//! next request. Every error's text must name the broker address.

use std::time::{Duration, Instant};

use sluice_tests::error_chain;
use sluice_tests::fake_broker::{encode, FakeBroker, ReceivedRequest, Reply};
use sluice_wire::connection::{Connection, ConnectionConfig, ConnectionError};
use sluice_wire::protocol::messages::fetch::FetchRequest;
use sluice_wire::protocol::messages::metadata::{MetadataRequest, MetadataResponse};
use sluice_wire::protocol::ApiKey;

const REQUEST_TIMEOUT: Duration = Duration::from_millis(500);

/// (api key, min version, max version) a normal fake announces.
const RANGES: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 13), (1, 12, 17)];

// ---------------------------------------------------------------------------------------------
// The fake broker
// ---------------------------------------------------------------------------------------------

/// A fake that announces `ranges` and answers Metadata through `script`.
async fn fake_broker(
    ranges: &[(i16, i16, i16)],
    script: impl FnMut(&ReceivedRequest) -> Reply + Send + 'static,
) -> FakeBroker {
    let broker = FakeBroker::start().await;
    broker.announce(ranges);
    broker.on(ApiKey::METADATA, script);
    broker
}

/// A fake that answers ApiVersions, then the first Metadata request with `misbehave`; and a
/// connection to it.
async fn misbehaving(misbehave: impl FnOnce(&ReceivedRequest) -> Reply + Send + 'static) -> (Connection, FakeBroker) {
    let mut misbehave = Some(misbehave);
    let broker = fake_broker(RANGES, move |request| match misbehave.take() {
        Some(misbehave) => misbehave(request),
        None => panic!("the test sends one Metadata request"),
    })
    .await;
    let connection = connect(&broker).await;
    (connection, broker)
}

fn config() -> ConnectionConfig {
    ConnectionConfig::default()
        .with_client_id("sluice-fault-tests")
        .with_timeouts(Duration::from_secs(5), REQUEST_TIMEOUT)
}

/// Connects to the fake, which must have seen ApiVersions first.
async fn connect(broker: &FakeBroker) -> Connection {
    let connection = Connection::connect(&broker.address(), config()).await.expect("handshake with the fake broker");
    let first = &broker.requests()[0];
    assert_eq!(first.api_key, ApiKey::API_VERSIONS, "the client starts with ApiVersions");
    assert_eq!(first.client_id.as_deref(), Some("sluice-fault-tests"));
    connection
}

fn metadata_request() -> MetadataRequest {
    MetadataRequest { topics: Some(vec![]), allow_auto_topic_creation: false }
}

/// A Metadata response frame (at the request's version) with no brokers and no topics, whose
/// controller id is `controller_id` so that a test can tell responses apart, answering
/// `correlation_id`.
fn metadata_response(request: &ReceivedRequest, correlation_id: i32, controller_id: i32) -> Vec<u8> {
    let response = MetadataResponse {
        throttle_time_ms: 0,
        brokers: vec![],
        cluster_id: None,
        controller_id,
        topics: vec![],
        cluster_authorized_operations: i32::MIN,
        error_code: sluice_wire::ErrorCode::NONE,
    };
    let body = encode::metadata(&response, request.version);
    sluice_tests::fake_broker::response_frame(request.api_key, request.version, correlation_id, &body)
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
    let text = error_chain(error);
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
    let (connection, _broker) = misbehaving(|_| {
        let mut bytes = 0x7fff_ffffu32.to_be_bytes().to_vec();
        bytes.extend_from_slice(&[0u8; 64]);
        Reply::Raw(bytes)
    })
    .await;
    let (error, elapsed) = failing_metadata(&connection).await;
    assert!(matches!(error, ConnectionError::Frame { .. }), "expected Frame, got {error:?}");
    assert!(elapsed < REQUEST_TIMEOUT / 2, "rejected on the prefix, not by a timeout: {elapsed:?}");
    let text = error_chain(&error);
    assert!(text.contains("2147483647") && text.contains("limit"), "{text}");
    assert!(!error.is_transient(), "a non-Kafka listener will not get better by reconnecting");
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn negative_size_prefix_fails_with_frame_error() {
    let (connection, _broker) = misbehaving(|_| Reply::Raw((-5i32).to_be_bytes().to_vec())).await;
    let (error, elapsed) = failing_metadata(&connection).await;
    assert!(matches!(error, ConnectionError::Frame { .. }), "expected Frame, got {error:?}");
    assert!(elapsed < REQUEST_TIMEOUT / 2, "{elapsed:?}");
    assert!(error_chain(&error).contains("negative"), "{}", error_chain(&error));
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn frame_that_ends_early_then_silence_times_out() {
    let (connection, _broker) = misbehaving(|request| {
        let whole = metadata_response(request, request.correlation_id, 1);
        Reply::Raw(whole[..whole.len() - 3].to_vec())
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
    assert!(error_chain(&error).contains("timed out: no METADATA response within 500 ms"), "{}", error_chain(&error));
    assert!(error.is_transient());
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn slowloris_broker_times_out_on_the_whole_response_not_per_byte() {
    // One byte every 100 ms; the fake stops when the client gives up and closes (the point).
    let (connection, _broker) = misbehaving(|request| {
        Reply::Trickle(metadata_response(request, request.correlation_id, 1), Duration::from_millis(100))
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
    let (connection, _broker) =
        misbehaving(|request| Reply::Raw(metadata_response(request, request.correlation_id + 7, 1))).await;
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
    let (connection, _broker) = misbehaving(|request| {
        let whole = metadata_response(request, request.correlation_id, 1);
        // Linger 0: close with a RST instead of a FIN.
        Reply::Reset(whole[..10].to_vec())
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
    let (connection, _broker) = misbehaving(|request| {
        let whole = metadata_response(request, request.correlation_id, 1);
        Reply::Close(whole[..10].to_vec())
    })
    .await;
    let (error, _) = failing_metadata(&connection).await;
    let ConnectionError::UnexpectedEof { buffered, .. } = &error else {
        panic!("expected UnexpectedEof, got {error:?}")
    };
    assert_eq!(*buffered, 10);
    assert!(error_chain(&error).contains("TLS or SASL"), "{}", error_chain(&error));
    assert_names_broker(&error, connection.broker());
    assert_closed_and_fails_fast(&connection).await;
}

#[tokio::test]
async fn garbage_body_is_a_decode_error_naming_api_and_version() {
    // A proper header v1, then nonsense.
    let (connection, _broker) = misbehaving(|request| Reply::Raw(request.frame(&[0xff; 9]))).await;
    let (error, _) = failing_metadata(&connection).await;
    let ConnectionError::Decode { api, version, .. } = &error else { panic!("expected Decode, got {error:?}") };
    assert_eq!((*api, *version), (ApiKey::METADATA, 13));
    let text = error_chain(&error);
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
    let broker = fake_broker(NO_FETCH, |_| Reply::Silence).await;
    let address = broker.address();
    let connection = connect(&broker).await;
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
    let text = error_chain(&error);
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
        forgotten: Vec::new(),
        rack_id: String::new(),
    };
    let error = connection.send(&fetch).await.expect_err("unsupported");
    assert!(matches!(error, ConnectionError::UnsupportedVersion { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(100));
    assert!(broker.requests_of(ApiKey::FETCH).is_empty(), "no Fetch reached the broker");
}

#[tokio::test]
async fn api_versions_with_too_old_fetch_tells_the_user_to_upgrade() {
    const OLD_FETCH: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 13), (1, 4, 11)];
    let broker = fake_broker(OLD_FETCH, |_| Reply::Silence).await;
    let address = broker.address();
    let connection = connect(&broker).await;
    let error = connection.version_for::<FetchRequest>().expect_err("Fetch 4-11 is too old");
    let text = error_chain(&error);
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
    // The fake reads both requests before answering either.
    let mut first = None;
    let broker = fake_broker(RANGES, move |request| {
        // The controller id echoes the correlation id, so each caller can see which answer it got.
        let answer = metadata_response(request, request.correlation_id, 1000 + request.correlation_id);
        match first.take() {
            None if request.correlation_id == 1 => {
                first = Some(answer);
                Reply::Silence
            }
            // Both in one write: the driver must split them.
            Some(first) => Reply::Raw([first, answer].concat()),
            None => Reply::Raw(answer),
        }
    })
    .await;
    let connection = connect(&broker).await;
    assert_eq!(connection.version_for::<FetchRequest>().unwrap(), 17, "min(ours 18, theirs 17)");
    let version = connection.version_for::<MetadataRequest>().unwrap();
    let request = metadata_request();
    let first = connection.send_at(&request, version, REQUEST_TIMEOUT);
    let second = connection.send_at(&request, version, REQUEST_TIMEOUT);
    let (first, second): (MetadataResponse, MetadataResponse) =
        tokio::try_join!(first, second).expect("both pipelined requests succeed");
    let third: MetadataResponse = connection.send(&request).await.expect("the connection is still usable");
    let sent = broker.requests_of(ApiKey::METADATA);
    let [sent_first, sent_second, sent_third] = &sent[..] else { panic!("three Metadata requests: {sent:?}") };
    assert_eq!(sent.iter().map(|request| request.connection).max(), Some(0), "all on one connection");
    assert_eq!((sent_first.api_key, sent_first.version), (ApiKey::METADATA, 13));
    assert_eq!(first.controller_id, 1000 + sent_first.correlation_id);
    assert_eq!(second.controller_id, 1000 + sent_second.correlation_id);
    assert_eq!(third.controller_id, 1000 + sent_third.correlation_id);
    assert!(sent_first.correlation_id < sent_second.correlation_id);
}

#[tokio::test]
async fn fault_fails_every_pipelined_request_not_just_the_first() {
    let mut first = None;
    let broker = fake_broker(RANGES, move |request| match first.take() {
        None => {
            first = Some(metadata_response(request, request.correlation_id, 1));
            Reply::Silence
        }
        Some(first) => Reply::Raw([first, 0x7fff_ffffu32.to_be_bytes().to_vec()].concat()),
    })
    .await;
    let address = broker.address();
    let connection = connect(&broker).await;
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
        let (connection, _broker) =
            misbehaving(|request| Reply::Raw(metadata_response(request, request.correlation_id + 7, 1))).await;
        let (error, _) = failing_metadata(&connection).await;
        assert!(matches!(error, ConnectionError::Protocol { .. }), "{error:?}");
        assert!(
            connection.is_closed(),
            "attempt {attempt}: Protocol error seen before the connection was marked closed"
        );
    }
}
