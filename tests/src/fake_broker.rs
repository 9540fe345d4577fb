//! A scripted fake Kafka broker, for what a real broker will not do (STYLE.md 8): hostile bytes,
//! stalls, slow answers, cut connections, and error codes on cue (a leader that moves, a partition
//! out of range next to a good one). Every test that uses it says so in its docs.
//!
//! A [`FakeBroker`] listens on `127.0.0.1:0` (or any address given to [`FakeBroker::bind`]),
//! serves any number of connections, records every request it reads ([`FakeBroker::requests`])
//! and answers each one by its API key:
//!
//! - a script set with [`FakeBroker::on`]: a closure from the [`ReceivedRequest`] to a [`Reply`]
//!   (a proper response body, raw bytes, silence, a delay, a trickle, a close or a reset);
//! - otherwise ApiVersions from the announced ranges ([`FakeBroker::announce`]) and Metadata from
//!   the [`Cluster`] the broker belongs to; any other key fails the connection with a panic that
//!   names it.
//!
//! A [`Cluster`] is the metadata several fakes share: the node ids and addresses they advertise
//! (which may be a proxy's, or one fake under two ids) and topics with their leaders, which a
//! script may change mid-test ([`Cluster::set_leader`]).
//!
//! Proper responses are the crate's own response types ([`MetadataResponse`], [`FetchResponse`],
//! ...) written with the crate's `Writer` by the encoders in [`encode`]: the library keeps its
//! response encoders test-only, so the fake has its own, for the versions it announces. Requests
//! are read back into the crate's request types ([`ReceivedRequest::fetch`], ...).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use sluice_wire::protocol::api::ApiKey;
use sluice_wire::protocol::codec::{DecodeError, Reader, Writer};
use sluice_wire::protocol::frame::encode_frame;
use sluice_wire::protocol::messages::api_versions::{ApiVersionRange, ApiVersionsResponse};
use sluice_wire::protocol::messages::fetch::{
    FetchPartition, FetchRequest, FetchResponse, FetchTopic, FetchableTopicResponse, PartitionData,
};
use sluice_wire::protocol::messages::list_offsets::{
    ListOffsetsPartition, ListOffsetsPartitionResponse, ListOffsetsRequest, ListOffsetsResponse, ListOffsetsTopic,
    ListOffsetsTopicResponse,
};
use sluice_wire::protocol::messages::metadata::{
    MetadataBroker, MetadataPartition, MetadataRequest, MetadataResponse, MetadataTopic,
};
use sluice_wire::protocol::messages::TopicId;
use sluice_wire::protocol::ErrorCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::AbortHandle;

/// (api key, min version, max version) a fake announces unless told otherwise: ApiVersions 0-4,
/// Metadata 4-13, Fetch 12-18, ListOffsets 1-10 (what this client speaks at most).
pub const VERSIONS: &[(i16, i16, i16)] = &[(18, 0, 4), (3, 4, 13), (1, 12, 18), (2, 1, 10)];

/// How the fake answers one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A response body at the request's version; the fake adds the size and the response header
    /// with the request's correlation id.
    Body(Vec<u8>),
    /// These bytes as they are: a frame built by hand, a lying size prefix, garbage.
    Raw(Vec<u8>),
    /// No answer; the connection stays open and the fake goes on reading.
    Silence,
    /// The inner reply after this pause.
    Delay(Duration, Box<Reply>),
    /// These bytes one at a time with a pause after each (a slowloris); stops when the client
    /// goes away.
    Trickle(Vec<u8>, Duration),
    /// These bytes, then an orderly close (FIN).
    Close(Vec<u8>),
    /// These bytes, then a reset (RST: linger 0).
    Reset(Vec<u8>),
}

impl Reply {
    /// `self` after `pause`.
    pub fn after(self, pause: Duration) -> Reply {
        Reply::Delay(pause, Box::new(self))
    }
}

/// One request as the fake read it.
#[derive(Debug, Clone)]
pub struct ReceivedRequest {
    /// Which accepted connection it came on (0 for the first).
    pub connection: usize,
    pub api_key: ApiKey,
    pub version: i16,
    pub correlation_id: i32,
    pub client_id: Option<String>,
    /// The request body, after the header.
    pub body: Bytes,
}

impl ReceivedRequest {
    /// A whole response frame (size, header, `body`) answering this request.
    pub fn frame(&self, body: &[u8]) -> Vec<u8> {
        response_frame(self.api_key, self.version, self.correlation_id, body)
    }

    /// The body read as a Fetch request (v12 and later).
    pub fn fetch(&self) -> FetchRequest {
        self.decode(ApiKey::FETCH, read_fetch_request)
    }

    /// The body read as a ListOffsets request (v1 and later).
    pub fn list_offsets(&self) -> ListOffsetsRequest {
        self.decode(ApiKey::LIST_OFFSETS, read_list_offsets_request)
    }

    /// The body read as a Metadata request (v4 and later).
    pub fn metadata(&self) -> MetadataRequest {
        self.decode(ApiKey::METADATA, read_metadata_request)
    }

    fn decode<T>(&self, what: ApiKey, read: impl FnOnce(&mut Reader, i16) -> Result<T, DecodeError>) -> T {
        assert_eq!(self.api_key, what, "not a {what} request");
        let mut reader = Reader::new(self.body.clone());
        let value = read(&mut reader, self.version).unwrap_or_else(|error| {
            panic!("the client sent a {what} v{} request that does not decode: {error}", self.version)
        });
        reader.finish("request").unwrap_or_else(|error| panic!("{what} v{} request: {error}", self.version));
        value
    }
}

/// A whole response frame: size, header (v1 with tagged fields where the API's version is
/// flexible, except ApiVersions), body.
pub fn response_frame(api_key: ApiKey, version: i16, correlation_id: i32, body: &[u8]) -> Vec<u8> {
    let mut message = correlation_id.to_be_bytes().to_vec();
    if api_key.response_header_is_flexible(version) {
        message.push(0); // no tagged fields
    }
    message.extend_from_slice(body);
    encode_frame(&message)
}

// ---------------------------------------------------------------------------------------------
// The cluster view
// ---------------------------------------------------------------------------------------------

/// The metadata that one or more fakes serve. Cheap to clone: clones share it.
#[derive(Clone)]
pub struct Cluster {
    metadata: Arc<Mutex<MetadataResponse>>,
}

impl Cluster {
    /// No brokers and no topics yet, with this cluster id.
    pub fn new(cluster_id: &str) -> Cluster {
        Cluster {
            metadata: Arc::new(Mutex::new(MetadataResponse {
                throttle_time_ms: 0,
                brokers: Vec::new(),
                cluster_id: Some(cluster_id.to_string()),
                controller_id: -1,
                topics: Vec::new(),
                cluster_authorized_operations: i32::MIN,
                error_code: ErrorCode::NONE,
            })),
        }
    }

    /// Advertises node `node_id` at `host:port` (replacing an earlier address). The first node
    /// advertised is the controller.
    pub fn advertise(&self, node_id: i32, host: &str, port: u16) {
        let mut metadata = self.lock();
        metadata.brokers.retain(|broker| broker.node_id != node_id);
        metadata.brokers.push(MetadataBroker { node_id, host: host.to_string(), port: i32::from(port), rack: None });
        if metadata.controller_id < 0 {
            metadata.controller_id = node_id;
        }
    }

    /// Adds a topic whose partition `i` is led by `leaders[i]` at leader epoch 0.
    pub fn add_topic(&self, name: &str, topic_id: TopicId, leaders: &[i32]) {
        let partitions = leaders
            .iter()
            .enumerate()
            .map(|(index, &leader)| MetadataPartition {
                error_code: ErrorCode::NONE,
                partition_index: index as i32,
                leader_id: leader,
                leader_epoch: 0,
                replica_nodes: vec![leader],
                isr_nodes: vec![leader],
                offline_replicas: Vec::new(),
            })
            .collect();
        let mut metadata = self.lock();
        metadata.topics.retain(|topic| topic.name.as_deref() != Some(name));
        metadata.topics.push(MetadataTopic {
            error_code: ErrorCode::NONE,
            name: Some(name.to_string()),
            topic_id,
            is_internal: false,
            partitions,
            topic_authorized_operations: i32::MIN,
        });
    }

    /// Moves a partition's leadership to `leader`, one leader epoch later.
    pub fn set_leader(&self, topic: &str, partition: i32, leader: i32) {
        let mut metadata = self.lock();
        let found = metadata
            .topics
            .iter_mut()
            .filter(|t| t.name.as_deref() == Some(topic))
            .flat_map(|t| t.partitions.iter_mut())
            .find(|p| p.partition_index == partition)
            .unwrap_or_else(|| panic!("the fake cluster has no partition {topic}-{partition}"));
        found.leader_id = leader;
        found.leader_epoch += 1;
        found.replica_nodes = vec![leader];
        found.isr_nodes = vec![leader];
    }

    /// The Metadata answer as it stands.
    pub fn response(&self) -> MetadataResponse {
        self.lock().clone()
    }

    fn lock(&self) -> MutexGuard<'_, MetadataResponse> {
        self.metadata.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

// ---------------------------------------------------------------------------------------------
// The broker
// ---------------------------------------------------------------------------------------------

type Script = Box<dyn FnMut(&ReceivedRequest) -> Reply + Send>;

struct Shared {
    cluster: Cluster,
    versions: Mutex<Vec<(i16, i16, i16)>>,
    scripts: Mutex<HashMap<ApiKey, Script>>,
    requests: Mutex<Vec<ReceivedRequest>>,
    /// Accepted connections, to close them when the fake is dropped.
    connections: Mutex<Vec<AbortHandle>>,
}

/// A running fake broker. Dropping it closes its listener and every connection it accepted.
pub struct FakeBroker {
    local: SocketAddr,
    shared: Arc<Shared>,
    accept: AbortHandle,
}

impl FakeBroker {
    /// A fake on `127.0.0.1:0` with a cluster of its own (id "fake-cluster", nothing advertised).
    pub async fn start() -> FakeBroker {
        FakeBroker::join(&Cluster::new("fake-cluster")).await
    }

    /// A fake on `127.0.0.1:0` that serves `cluster`'s metadata.
    pub async fn join(cluster: &Cluster) -> FakeBroker {
        FakeBroker::bind("127.0.0.1:0", cluster).await.expect("bind a fake broker on 127.0.0.1")
    }

    /// A fake listening on `listen` (e.g. `[::1]:0`) that serves `cluster`'s metadata.
    pub async fn bind(listen: &str, cluster: &Cluster) -> std::io::Result<FakeBroker> {
        let listener = TcpListener::bind(listen).await?;
        let local = listener.local_addr()?;
        let shared = Arc::new(Shared {
            cluster: cluster.clone(),
            versions: Mutex::new(VERSIONS.to_vec()),
            scripts: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            connections: Mutex::new(Vec::new()),
        });
        let accepting = shared.clone();
        let accept = tokio::spawn(async move {
            for connection in 0.. {
                let Ok((stream, _)) = listener.accept().await else { return };
                let task = tokio::spawn(serve(stream, connection, accepting.clone()));
                lock(&accepting.connections).push(task.abort_handle());
            }
        })
        .abort_handle();
        Ok(FakeBroker { local, shared, accept })
    }

    /// `host:port` to connect to (`[v6]:port` for IPv6).
    pub fn address(&self) -> String {
        self.local.to_string()
    }

    pub fn port(&self) -> u16 {
        self.local.port()
    }

    /// The cluster whose metadata this fake serves.
    pub fn cluster(&self) -> &Cluster {
        &self.shared.cluster
    }

    /// Advertises this fake in its cluster as node `node_id`, at its own address.
    pub fn advertise_as(&self, node_id: i32) {
        self.shared.cluster.advertise(node_id, &self.local.ip().to_string(), self.local.port());
    }

    /// The ranges ApiVersions announces from now on: (api key, min version, max version).
    pub fn announce(&self, versions: &[(i16, i16, i16)]) {
        *lock(&self.shared.versions) = versions.to_vec();
    }

    /// Answers every later request with key `api_key` through `script` (replacing the default
    /// answer, or an earlier script). Scripts run one at a time, on the fake's tasks: a panic in
    /// one closes that connection and prints the message.
    pub fn on(&self, api_key: ApiKey, script: impl FnMut(&ReceivedRequest) -> Reply + Send + 'static) {
        lock(&self.shared.scripts).insert(api_key, Box::new(script));
    }

    /// Every request read so far, in order.
    pub fn requests(&self) -> Vec<ReceivedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests with key `api_key` read so far, in order.
    pub fn requests_of(&self, api_key: ApiKey) -> Vec<ReceivedRequest> {
        lock(&self.shared.requests).iter().filter(|request| request.api_key == api_key).cloned().collect()
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        lock(&self.shared.connections).len()
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.accept.abort();
        for connection in lock(&self.shared.connections).iter() {
            connection.abort();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shared {
    fn reply_to(&self, request: &ReceivedRequest) -> Reply {
        if let Some(script) = lock(&self.scripts).get_mut(&request.api_key) {
            return script(request);
        }
        match request.api_key {
            ApiKey::API_VERSIONS => {
                let api_keys = lock(&self.versions)
                    .iter()
                    .map(|&(key, min_version, max_version)| ApiVersionRange {
                        api_key: ApiKey(key),
                        min_version,
                        max_version,
                    })
                    .collect();
                let response = ApiVersionsResponse {
                    error_code: ErrorCode::NONE,
                    api_keys,
                    throttle_time_ms: 0,
                    finalized_features: Vec::new(),
                    finalized_features_epoch: -1,
                };
                Reply::Body(encode::api_versions(&response, request.version))
            }
            ApiKey::METADATA => Reply::Body(encode::metadata(&self.cluster.response(), request.version)),
            other => panic!("the fake broker has no script for {other} (v{})", request.version),
        }
    }
}

/// Serves one connection until the client goes away or a reply ends it.
async fn serve(mut stream: TcpStream, connection: usize, shared: Arc<Shared>) {
    loop {
        let Ok(size) = stream.read_i32().await else { return };
        assert!((8..1 << 20).contains(&size), "implausible request size {size}");
        let mut frame = vec![0u8; size as usize];
        if stream.read_exact(&mut frame).await.is_err() {
            return;
        }
        let request = parse_request(connection, Bytes::from(frame))
            .unwrap_or_else(|error| panic!("the fake broker cannot read a request header: {error}"));
        lock(&shared.requests).push(request.clone());
        let mut reply = shared.reply_to(&request);
        while let Reply::Delay(pause, inner) = reply {
            tokio::time::sleep(pause).await;
            reply = *inner;
        }
        let open = match reply {
            Reply::Body(body) => write(&mut stream, &request.frame(&body)).await,
            Reply::Raw(bytes) => write(&mut stream, &bytes).await,
            Reply::Silence => true,
            Reply::Delay(..) => unreachable!("unwrapped above"),
            Reply::Trickle(bytes, pause) => {
                let mut open = true;
                for byte in bytes {
                    open = write(&mut stream, &[byte]).await;
                    if !open {
                        break;
                    }
                    tokio::time::sleep(pause).await;
                }
                open
            }
            Reply::Close(bytes) => {
                write(&mut stream, &bytes).await;
                let _ = stream.shutdown().await;
                false
            }
            Reply::Reset(bytes) => {
                write(&mut stream, &bytes).await;
                let _ = stream.set_zero_linger();
                false
            }
        };
        if !open {
            return;
        }
    }
}

async fn write(stream: &mut TcpStream, bytes: &[u8]) -> bool {
    stream.write_all(bytes).await.is_ok() && stream.flush().await.is_ok()
}

/// Reads a request header (v1, or v2 for flexible versions) off the front of a frame.
fn parse_request(connection: usize, frame: Bytes) -> Result<ReceivedRequest, DecodeError> {
    let mut reader = Reader::new(frame);
    let api_key = ApiKey(reader.i16("api key")?);
    let version = reader.i16("api version")?;
    let correlation_id = reader.i32("correlation id")?;
    let client_id = reader.nullable_string(false, "client id")?;
    if api_key.is_flexible(version) {
        reader.skip_tagged_fields()?;
    }
    Ok(ReceivedRequest { connection, api_key, version, correlation_id, client_id, body: reader.rest() })
}

// ---------------------------------------------------------------------------------------------
// Request decoders (the library only encodes requests)
// ---------------------------------------------------------------------------------------------

fn skip_tags(reader: &mut Reader, flexible: bool) -> Result<(), DecodeError> {
    if flexible {
        reader.skip_tagged_fields()?;
    }
    Ok(())
}

fn read_fetch_request(r: &mut Reader, version: i16) -> Result<FetchRequest, DecodeError> {
    assert!(version >= 12, "the fake reads Fetch v12 and later, not v{version}");
    if version <= 14 {
        assert_eq!(r.i32("replica id")?, -1, "a consumer's Fetch");
    }
    let max_wait_ms = r.i32("max wait")?;
    let min_bytes = r.i32("min bytes")?;
    let max_bytes = r.i32("max bytes")?;
    let isolation_level = r.i8("isolation level")?;
    let session_id = r.i32("session id")?;
    let session_epoch = r.i32("session epoch")?;
    let mut topics = Vec::new();
    for _ in 0..r.array_len_or_empty(true, 1, "topics")? {
        let (name, topic_id) = if version >= 13 {
            (String::new(), TopicId(r.uuid("topic id")?))
        } else {
            (r.string(true, "topic")?, TopicId::ZERO)
        };
        let mut partitions = Vec::new();
        for _ in 0..r.array_len_or_empty(true, 33, "partitions")? {
            partitions.push(FetchPartition {
                partition: r.i32("partition")?,
                current_leader_epoch: r.i32("current leader epoch")?,
                fetch_offset: r.i64("fetch offset")?,
                last_fetched_epoch: r.i32("last fetched epoch")?,
                log_start_offset: r.i64("log start offset")?,
                partition_max_bytes: r.i32("partition max bytes")?,
            });
            r.skip_tagged_fields()?;
        }
        r.skip_tagged_fields()?;
        topics.push(FetchTopic { name, topic_id, partitions });
    }
    // The fake grants no fetch session (it answers session id 0), so nothing can be forgotten.
    assert_eq!(r.array_len_or_empty(true, 1, "forgotten topics")?, 0, "no fetch session, nothing forgotten");
    let rack_id = r.string(true, "rack id")?;
    r.skip_tagged_fields()?;
    Ok(FetchRequest {
        max_wait_ms,
        min_bytes,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        topics,
        forgotten: Vec::new(),
        rack_id,
    })
}

fn read_list_offsets_request(r: &mut Reader, version: i16) -> Result<ListOffsetsRequest, DecodeError> {
    assert!(version >= 1, "the fake reads ListOffsets v1 and later, not v{version}");
    let flexible = ApiKey::LIST_OFFSETS.is_flexible(version);
    let replica_id = r.i32("replica id")?;
    let isolation_level = if version >= 2 { r.i8("isolation level")? } else { 0 };
    let mut topics = Vec::new();
    for _ in 0..r.array_len_or_empty(flexible, 2, "topics")? {
        let name = r.string(flexible, "topic")?;
        let mut partitions = Vec::new();
        for _ in 0..r.array_len_or_empty(flexible, 12, "partitions")? {
            let partition_index = r.i32("partition")?;
            let current_leader_epoch = if version >= 4 { r.i32("current leader epoch")? } else { -1 };
            let timestamp = r.i64("timestamp")?;
            skip_tags(r, flexible)?;
            partitions.push(ListOffsetsPartition { partition_index, current_leader_epoch, timestamp });
        }
        skip_tags(r, flexible)?;
        topics.push(ListOffsetsTopic { name, partitions });
    }
    let timeout_ms = if version >= 10 { r.i32("timeout")? } else { 0 };
    skip_tags(r, flexible)?;
    Ok(ListOffsetsRequest { replica_id, isolation_level, topics, timeout_ms })
}

fn read_metadata_request(r: &mut Reader, version: i16) -> Result<MetadataRequest, DecodeError> {
    assert!(version >= 4, "the fake reads Metadata v4 and later, not v{version}");
    let flexible = ApiKey::METADATA.is_flexible(version);
    let topics = match r.array_len(flexible, 1, "topics")? {
        None => None,
        Some(count) => {
            let mut names = Vec::with_capacity(count);
            for _ in 0..count {
                if version >= 10 {
                    r.uuid("topic id")?;
                }
                names.push(r.nullable_string(flexible, "topic")?.unwrap_or_default());
                skip_tags(r, flexible)?;
            }
            Some(names)
        }
    };
    let allow_auto_topic_creation = r.bool("allow auto topic creation")?;
    if (8..=10).contains(&version) {
        r.bool("include cluster authorized operations")?;
    }
    if version >= 8 {
        r.bool("include topic authorized operations")?;
    }
    skip_tags(r, flexible)?;
    Ok(MetadataRequest { topics, allow_auto_topic_creation })
}

// ---------------------------------------------------------------------------------------------
// Response encoders and builders
// ---------------------------------------------------------------------------------------------

/// A Fetch response of `topics`, no error, no session.
pub fn fetch_response(topics: Vec<FetchableTopicResponse>) -> FetchResponse {
    FetchResponse {
        throttle_time_ms: 0,
        error_code: ErrorCode::NONE,
        session_id: 0,
        responses: topics,
        node_endpoints: Vec::new(),
    }
}

/// A topic of a Fetch response, named by id (v13+) and by name (below v13).
pub fn fetch_topic(name: &str, topic_id: TopicId, partitions: Vec<PartitionData>) -> FetchableTopicResponse {
    FetchableTopicResponse { name: Some(name.to_string()), topic_id, partitions }
}

/// A partition of a Fetch response: `records` with this error code and high watermark (also the
/// last stable offset), log start 0, no aborted transactions.
pub fn fetch_partition(
    partition: i32,
    error_code: ErrorCode,
    high_watermark: i64,
    records: Option<Vec<u8>>,
) -> PartitionData {
    PartitionData {
        partition_index: partition,
        error_code,
        high_watermark,
        last_stable_offset: high_watermark,
        log_start_offset: 0,
        diverging_epoch: None,
        current_leader: None,
        snapshot_id: None,
        aborted_transactions: None,
        preferred_read_replica: -1,
        records: records.map(Bytes::from),
    }
}

/// A ListOffsets response for one topic: (partition, error code, offset) each, timestamp -1,
/// leader epoch 0.
pub fn list_offsets_response(topic: &str, partitions: &[(i32, ErrorCode, i64)]) -> ListOffsetsResponse {
    ListOffsetsResponse {
        throttle_time_ms: 0,
        topics: vec![ListOffsetsTopicResponse {
            name: topic.to_string(),
            partitions: partitions
                .iter()
                .map(|&(partition_index, error_code, offset)| ListOffsetsPartitionResponse {
                    partition_index,
                    error_code,
                    timestamp: -1,
                    offset,
                    leader_epoch: 0,
                })
                .collect(),
        }],
    }
}

/// Response bodies (after the header) as a broker writes them, at the versions the fake announces.
pub mod encode {
    use super::*;

    fn tags(w: &mut Writer, flexible: bool) {
        if flexible {
            w.empty_tagged_fields();
        }
    }

    fn int32s(w: &mut Writer, flexible: bool, values: &[i32]) {
        w.array_len(flexible, values.len());
        values.iter().for_each(|&value| w.i32(value));
    }

    /// ApiVersions v0-4 (flexible body from v3; the header is always v0).
    pub fn api_versions(response: &ApiVersionsResponse, version: i16) -> Vec<u8> {
        let flexible = ApiKey::API_VERSIONS.is_flexible(version);
        let mut w = Writer::new();
        w.i16(response.error_code.0);
        w.array_len(flexible, response.api_keys.len());
        for range in &response.api_keys {
            w.i16(range.api_key.0);
            w.i16(range.min_version);
            w.i16(range.max_version);
            tags(&mut w, flexible);
        }
        if version >= 1 {
            w.i32(response.throttle_time_ms);
        }
        tags(&mut w, flexible);
        w.into_inner()
    }

    /// Metadata v4-13.
    pub fn metadata(response: &MetadataResponse, version: i16) -> Vec<u8> {
        assert!((4..=13).contains(&version), "the fake writes Metadata v4-13, not v{version}");
        let flexible = ApiKey::METADATA.is_flexible(version);
        let mut w = Writer::new();
        w.i32(response.throttle_time_ms);
        w.array_len(flexible, response.brokers.len());
        for broker in &response.brokers {
            w.i32(broker.node_id);
            w.string(flexible, &broker.host);
            w.i32(broker.port);
            w.nullable_string(flexible, broker.rack.as_deref());
            tags(&mut w, flexible);
        }
        w.nullable_string(flexible, response.cluster_id.as_deref());
        w.i32(response.controller_id);
        w.array_len(flexible, response.topics.len());
        for topic in &response.topics {
            w.i16(topic.error_code.0);
            w.nullable_string(flexible, topic.name.as_deref());
            if version >= 10 {
                w.uuid(topic.topic_id.0);
            }
            w.bool(topic.is_internal);
            w.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                w.i16(partition.error_code.0);
                w.i32(partition.partition_index);
                w.i32(partition.leader_id);
                if version >= 7 {
                    w.i32(partition.leader_epoch);
                }
                for nodes in [&partition.replica_nodes, &partition.isr_nodes, &partition.offline_replicas] {
                    int32s(&mut w, flexible, nodes);
                }
                tags(&mut w, flexible);
            }
            if version >= 8 {
                w.i32(topic.topic_authorized_operations);
            }
            tags(&mut w, flexible);
        }
        if (8..=10).contains(&version) {
            w.i32(response.cluster_authorized_operations);
        }
        if version >= 13 {
            w.i16(response.error_code.0);
        }
        tags(&mut w, flexible);
        w.into_inner()
    }

    /// Fetch v12-18: topics by name below v13, by id from v13; no tagged fields (no diverging
    /// epoch, current leader, snapshot or node endpoints).
    pub fn fetch(response: &FetchResponse, version: i16) -> Vec<u8> {
        assert!((12..=18).contains(&version), "the fake writes Fetch v12-18, not v{version}");
        let mut w = Writer::new();
        w.i32(response.throttle_time_ms);
        w.i16(response.error_code.0);
        w.i32(response.session_id);
        w.array_len(true, response.responses.len());
        for topic in &response.responses {
            if version >= 13 {
                w.uuid(topic.topic_id.0);
            } else {
                w.string(true, topic.name.as_deref().unwrap_or_default());
            }
            w.array_len(true, topic.partitions.len());
            for partition in &topic.partitions {
                w.i32(partition.partition_index);
                w.i16(partition.error_code.0);
                w.i64(partition.high_watermark);
                w.i64(partition.last_stable_offset);
                w.i64(partition.log_start_offset);
                match &partition.aborted_transactions {
                    None => w.null_array(true),
                    Some(aborted) => {
                        w.array_len(true, aborted.len());
                        for transaction in aborted {
                            w.i64(transaction.producer_id);
                            w.i64(transaction.first_offset);
                            w.empty_tagged_fields();
                        }
                    }
                }
                w.i32(partition.preferred_read_replica);
                w.nullable_bytes(true, partition.records.as_deref());
                w.empty_tagged_fields();
            }
            w.empty_tagged_fields();
        }
        w.empty_tagged_fields();
        w.into_inner()
    }

    /// ListOffsets v1-10 (flexible from v6).
    pub fn list_offsets(response: &ListOffsetsResponse, version: i16) -> Vec<u8> {
        assert!((1..=10).contains(&version), "the fake writes ListOffsets v1-10, not v{version}");
        let flexible = ApiKey::LIST_OFFSETS.is_flexible(version);
        let mut w = Writer::new();
        if version >= 2 {
            w.i32(response.throttle_time_ms);
        }
        w.array_len(flexible, response.topics.len());
        for topic in &response.topics {
            w.string(flexible, &topic.name);
            w.array_len(flexible, topic.partitions.len());
            for partition in &topic.partitions {
                w.i32(partition.partition_index);
                w.i16(partition.error_code.0);
                w.i64(partition.timestamp);
                w.i64(partition.offset);
                if version >= 4 {
                    w.i32(partition.leader_epoch);
                }
                tags(&mut w, flexible);
            }
            tags(&mut w, flexible);
        }
        tags(&mut w, flexible);
        w.into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_wire::protocol::messages::Response;

    fn decode<T: Response>(body: Vec<u8>, version: i16) -> T {
        let mut reader = Reader::new(Bytes::from(body));
        let value = T::decode(version, &mut reader).expect("the library decodes what the fake writes");
        reader.finish("response").expect("nothing left over");
        value
    }

    /// The encoders against the library's own decoders, at every version the fake writes.
    #[test]
    fn the_library_decodes_every_response_the_fake_writes() {
        let cluster = Cluster::new("c");
        cluster.advertise(1, "127.0.0.1", 9092);
        cluster.add_topic("t", TopicId([7; 16]), &[1, 1]);
        for version in 4..=13 {
            let decoded: MetadataResponse = decode(encode::metadata(&cluster.response(), version), version);
            assert_eq!(decoded.brokers, cluster.response().brokers, "v{version}");
            let mut expected = cluster.response().topics[0].partitions.clone();
            if version < 7 {
                expected.iter_mut().for_each(|partition| partition.leader_epoch = -1);
                // none before v7
            }
            assert_eq!(decoded.topics[0].partitions, expected, "v{version}");
            assert_eq!(decoded.topics[0].topic_id.is_zero(), version < 10, "v{version}");
        }
        let fetch = fetch_response(vec![fetch_topic(
            "t",
            TopicId([7; 16]),
            vec![
                fetch_partition(0, ErrorCode::NONE, 5, Some(vec![1, 2, 3])),
                fetch_partition(1, ErrorCode::OFFSET_OUT_OF_RANGE, -1, None),
            ],
        )]);
        for version in 12..=18 {
            let decoded: FetchResponse = decode(encode::fetch(&fetch, version), version);
            assert_eq!(decoded.responses[0].partitions, fetch.responses[0].partitions, "v{version}");
        }
        let offsets = list_offsets_response("t", &[(0, ErrorCode::NONE, 42)]);
        for version in 1..=10 {
            let decoded: ListOffsetsResponse = decode(encode::list_offsets(&offsets, version), version);
            assert_eq!(decoded.topics[0].partitions[0].offset, 42, "v{version}");
        }
        let versions = ApiVersionsResponse {
            error_code: ErrorCode::NONE,
            api_keys: vec![ApiVersionRange { api_key: ApiKey::FETCH, min_version: 12, max_version: 18 }],
            throttle_time_ms: 0,
            finalized_features: Vec::new(),
            finalized_features_epoch: -1,
        };
        for version in 0..=4 {
            let decoded: ApiVersionsResponse = decode(encode::api_versions(&versions, version), version);
            assert_eq!(decoded.api_keys, versions.api_keys, "v{version}");
        }
    }

    /// The request decoders against the library's own encoders.
    #[test]
    fn the_fake_reads_back_what_the_library_sends() {
        use sluice_wire::protocol::messages::Request;
        let fetch = FetchRequest {
            max_wait_ms: 100,
            min_bytes: 1,
            max_bytes: 1 << 20,
            isolation_level: 1,
            session_id: 0,
            session_epoch: -1,
            forgotten: Vec::new(),
            topics: vec![FetchTopic {
                name: "t".to_string(),
                topic_id: TopicId([7; 16]),
                partitions: vec![FetchPartition {
                    partition: 3,
                    current_leader_epoch: 0,
                    fetch_offset: 99,
                    last_fetched_epoch: -1,
                    log_start_offset: -1,
                    partition_max_bytes: 1 << 20,
                }],
            }],
            rack_id: String::new(),
        };
        for version in 12..=18 {
            let mut w = Writer::new();
            fetch.encode(version, &mut w);
            let mut read = read_fetch_request(&mut Reader::new(Bytes::from(w.into_inner())), version).unwrap();
            if version >= 13 {
                read.topics[0].name = "t".to_string();
            } else {
                read.topics[0].topic_id = TopicId([7; 16]);
            }
            assert_eq!(read, fetch, "v{version}");
        }
        let list = ListOffsetsRequest {
            replica_id: -1,
            isolation_level: 1,
            topics: vec![ListOffsetsTopic {
                name: "t".to_string(),
                partitions: vec![ListOffsetsPartition { partition_index: 2, current_leader_epoch: -1, timestamp: -2 }],
            }],
            timeout_ms: 5,
        };
        for version in 2..=10 {
            let mut w = Writer::new();
            list.encode(version, &mut w);
            let read = read_list_offsets_request(&mut Reader::new(Bytes::from(w.into_inner())), version).unwrap();
            assert_eq!(read.topics, list.topics, "v{version}");
            assert_eq!(read.isolation_level, 1, "v{version}");
        }
        let metadata = MetadataRequest { topics: Some(vec!["t".to_string()]), allow_auto_topic_creation: false };
        for version in 4..=13 {
            let mut w = Writer::new();
            metadata.encode(version, &mut w);
            let read = read_metadata_request(&mut Reader::new(Bytes::from(w.into_inner())), version).unwrap();
            assert_eq!(read, metadata, "v{version}");
        }
    }
}
