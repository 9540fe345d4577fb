//! `sluice write`: JSON Lines into a topic, at least once or exactly once.
//!
//! Each line becomes one record ([`line`]): the line itself as the value, or the fields that
//! `--key-field`, `--timestamp-field`, `--headers-field` and `--value-field` name; with
//! `--format rows` the rows that `sluice read` writes give their records back (keys, headers,
//! timestamps, partitions, payloads). A blank line is skipped (it still counts as a line).
//!
//! # Chunks and positions
//!
//! The input is cut into chunks of `--chunk-records` lines (or `--chunk-bytes`). For a file, the
//! position after each chunk ([`position::Position`]: the file's identity, byte offset and line
//! number) goes to the job's key in the compacted offsets topic (`_sluice_offsets` by default;
//! one that exists without `cleanup.policy=compact` is refused, checked with DescribeConfigs),
//! and a restart resumes from the last position committed there, after checking that the file
//! is the same one (device, inode, and a hash of the bytes before the position).
//!
//! * `exactly_once` (files only), as KIP-618's exactly-once source connectors: a chunk is one
//!   Kafka transaction holding its records *and* its position record. The order of events:
//!   1. `init_transactions` under the job's transactional id: an earlier instance is fenced, its
//!      open transaction aborted (or, if it was committing, completed);
//!   2. the position is read back from the offsets topic, read_committed, up to the high
//!      watermark seen after step 1 (so transactions still open at that moment, which may hold
//!      the last stable offset back, are waited for rather than read past);
//!   3. per chunk: begin, send the chunk's records, write its dead letters (fsync), send the
//!      position record, commit.
//!
//!   A crash before the commit aborts the chunk (its records and position never become
//!   visible to read_committed consumers); after it, the position says the chunk is done. The
//!   dead letters of an aborted chunk are removed at the next start (each carries its line
//!   number; those past the committed position go). Nothing is lost or duplicated.
//! * `at_least_once`: idempotent sends; after a chunk's records are all acknowledged, its
//!   position record is written (files). The next chunk is read and sent meanwhile, so that
//!   the acknowledgements of one chunk overlap the sending of the next; a crash re-sends at most
//!   those two chunks, so records since the last position may appear twice; without a crash
//!   nothing is duplicated. Standard
//!   input (`-`) has no position: a restart starts over, and the job is only at least once.
//!
//! A malformed line (not JSON, a mapped field missing or of the wrong type) fails the run with
//! its line number, or with `on_malformed: dead_letter` goes to the dead-letter file
//! (`<input>.dead-letters.jsonl` unless `--dead-letter-file`), one JSON object per line:
//! `{"line":..,"byte_offset":..,"error":"..","text":{"utf8":..}|{"base64":..}}`.
//!
//! # References
//! - KIP-618 (exactly-once support for source connectors), KIP-98 (transactions).

pub mod encode;
pub mod line;
pub mod position;

use std::collections::BTreeMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use sluice_wire::{Client, ClientError, Compression, DeliveryFuture, ProduceRecord, Producer, TopicPartition};

use crate::config::{Config, OnMalformed};
use crate::fault;
use crate::json;
use crate::offsets::{self, OffsetsError};
use crate::read::{self, ReadError, StopSignal};
use encode::{EncoderError, ValueEncoder};
use line::{line_to_record, FieldMapping, InputFormat};
use position::{identify, mismatch, position_key, Position};

/// The default offsets topic.
pub use crate::offsets::DEFAULT_OFFSETS_TOPIC;
/// The longest line read (a longer one fails the run: no record can be that large anyway).
pub const MAX_LINE_BYTES: usize = 16 << 20;

/// `at_least_once` or `exactly_once`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CommitMode {
    #[default]
    AtLeastOnce,
    ExactlyOnce,
}

/// Where lines come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    File(PathBuf),
    Stdin,
}

impl fmt::Display for Input {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Input::File(path) => write!(f, "{}", path.display()),
            Input::Stdin => f.write_str("standard input"),
        }
    }
}

/// What `sluice write` was asked to do.
#[derive(Debug, Clone)]
pub struct WriteOptions {
    pub topic: String,
    pub input: Input,
    pub format: InputFormat,
    pub mapping: FieldMapping,
    pub commit_mode: CommitMode,
    pub compression: Compression,
    pub offsets_topic: String,
    /// The job's name: its transactional id and its key in the offsets topic. Default:
    /// `sluice-write-<topic>-<hash of the input's absolute path>`.
    pub job_id: Option<String>,
    pub chunk_records: u64,
    pub chunk_bytes: u64,
    pub dead_letter_file: Option<PathBuf>,
    /// A schema file to register under the topic's value subject and encode with
    /// (`format: avro`); without it the subject's latest schema is used.
    pub value_schema: Option<PathBuf>,
}

impl WriteOptions {
    /// Options with the defaults: lines, at least once, no compression, 1000-line chunks.
    pub fn new(topic: impl Into<String>, input: Input) -> Self {
        WriteOptions {
            topic: topic.into(),
            input,
            format: InputFormat::Lines,
            mapping: FieldMapping::default(),
            commit_mode: CommitMode::AtLeastOnce,
            compression: Compression::None,
            offsets_topic: DEFAULT_OFFSETS_TOPIC.to_string(),
            job_id: None,
            chunk_records: 1000,
            chunk_bytes: 4 << 20,
            dead_letter_file: None,
            value_schema: None,
        }
    }
}

/// What a run did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteSummary {
    pub job_id: String,
    /// Lines consumed in total (this run and the ones it resumed).
    pub lines: u64,
    /// Records written in total.
    pub records: u64,
    pub dead_letters: u64,
    /// Chunks committed by this run.
    pub chunks: u64,
    /// The line this run resumed after (`None`: it started at the beginning).
    pub resumed_after_line: Option<u64>,
    /// Stopped by a signal before the end of the input.
    pub stopped: bool,
}

/// Why `sluice write` failed.
#[derive(Debug)]
pub enum WriteError {
    /// Options that do not go together.
    Usage(String),
    /// Connecting (TLS, SASL, the brokers) failed.
    Connect(Box<ReadError>),
    /// A Kafka call failed; `doing` says which.
    Client { doing: String, source: Box<ClientError> },
    /// The target topic does not exist.
    UnknownTopic { topic: String },
    /// Reading the input failed.
    Input { input: String, source: io::Error },
    /// A line cannot become a record and `on_malformed` is `fail`.
    Malformed { input: String, line: u64, problem: String },
    /// The dead-letter file cannot be written.
    DeadLetters { path: PathBuf, source: io::Error },
    /// The stored position belongs to another file.
    InputChanged { input: String, job_id: String, line: u64, byte_offset: u64, detail: String },
    /// The job's stored position is for another topic.
    OtherTopic { job_id: String, stored: String, topic: String },
    /// The offsets topic holds a value for the job that is not a position.
    BadPosition { offsets_topic: String, partition: i32, offset: i64 },
    /// The offsets topic could not be read to its end in time.
    PositionTimeout { offsets_topic: String, partition: i32, reached: i64, end: i64 },
    /// The offsets topic exists and is not compacted: retention would delete positions.
    OffsetsTopicNotCompacted { offsets_topic: String, policy: String },
    /// The schema registry could not give the schema to encode with.
    Registry(Box<crate::registry::serializer::SerializerError>),
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WriteError::Usage(message) => f.write_str(message),
            WriteError::Connect(_) => f.write_str("cannot connect to Kafka"),
            WriteError::Client { doing, .. } => write!(f, "{doing} failed"),
            WriteError::UnknownTopic { topic } => write!(
                f,
                "topic {topic} does not exist or is not accessible: create it first (sluice write does not create \
                 its target), or check --topic and the credentials' permissions"
            ),
            WriteError::Input { input, .. } => write!(f, "cannot read {input}"),
            WriteError::Malformed { input, line, problem } => write!(
                f,
                "{input} line {line}: {problem}; fix the line, or set `\"on_malformed\": \"dead_letter\"` to set such \
                 lines aside and go on"
            ),
            WriteError::DeadLetters { path, .. } => write!(f, "cannot write the dead-letter file {}", path.display()),
            WriteError::InputChanged { input, job_id, line, byte_offset, detail } => write!(
                f,
                "{input} is not the file job {job_id} was writing from: {detail}. Its committed position is line \
                 {line} (byte {byte_offset}) of that file. To go on with it, give that file again; to write this \
                 file as a new job from its first line, give another --job-id"
            ),
            WriteError::OtherTopic { job_id, stored, topic } => write!(
                f,
                "job {job_id} was writing to topic {stored}, not {topic}: give another --job-id for this topic"
            ),
            WriteError::BadPosition { offsets_topic, partition, offset } => write!(
                f,
                "the record at {offsets_topic}-{partition} offset {offset} has this job's key but is not a position \
                 of sluice write: is another program writing this topic? Give another --offsets-topic or --job-id"
            ),
            WriteError::PositionTimeout { offsets_topic, partition, reached, end } => write!(
                f,
                "could not read {offsets_topic}-{partition} to offset {end} within 120 s (stuck at {reached}): an \
                 open transaction of another producer holds the last stable offset back; retry once it ended"
            ),
            WriteError::OffsetsTopicNotCompacted { offsets_topic, policy } => write!(
                f,
                "the offsets topic {offsets_topic} has cleanup.policy={policy}: retention would delete the jobs' \
                 positions, and a restart would then write its input again. Make it compacted \
                 (kafka-configs --alter --entity-type topics --entity-name {offsets_topic} --add-config \
                 cleanup.policy=compact) or give another --offsets-topic"
            ),
            WriteError::Registry(error) => write!(f, "{error}"),
        }
    }
}

impl std::error::Error for WriteError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            WriteError::Connect(error) => Some(error.as_ref()),
            WriteError::Client { source, .. } => Some(source.as_ref()),
            WriteError::Registry(error) => error.source(),
            WriteError::Input { source, .. } | WriteError::DeadLetters { source, .. } => Some(source),
            _ => None,
        }
    }
}

fn client_error(doing: impl Into<String>) -> impl FnOnce(ClientError) -> WriteError {
    let doing = doing.into();
    move |source| WriteError::Client { doing, source: Box::new(source) }
}

/// One line of the input, without its line end.
struct Line {
    /// 1-based.
    number: u64,
    /// Where the line starts and where the next one starts.
    start: u64,
    end: u64,
    bytes: Vec<u8>,
}

/// The default job id: the topic and a hash of the input's absolute path.
pub fn default_job_id(topic: &str, path: &Path) -> String {
    let absolute = fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    format!("sluice-write-{topic}-{:016x}", position::fnv1a64(absolute.to_string_lossy().as_bytes()))
}

/// Runs `sluice write`. `progress` is called after each committed chunk.
pub async fn write(
    config: &Config,
    options: &WriteOptions,
    stop: &StopSignal,
    progress: &mut dyn FnMut(&WriteSummary),
) -> Result<WriteSummary, WriteError> {
    let exactly_once = options.commit_mode == CommitMode::ExactlyOnce;
    let path =
        match &options.input {
            Input::File(path) => Some(path.clone()),
            Input::Stdin if exactly_once => return Err(WriteError::Usage(
                "--commit-mode exactly_once needs a file (--input FILE): standard input cannot be read again from a \
                 committed position after a crash, so it supports only at_least_once"
                    .into(),
            )),
            Input::Stdin => None,
        };
    let input_name = options.input.to_string();
    let dead_letter_path = match (config.on_malformed, &options.dead_letter_file, &path) {
        (OnMalformed::Fail, _, _) => None,
        (OnMalformed::DeadLetter, Some(file), _) => Some(file.clone()),
        (OnMalformed::DeadLetter, None, Some(path)) => {
            let mut name = path.as_os_str().to_owned();
            name.push(".dead-letters.jsonl");
            Some(PathBuf::from(name))
        }
        (OnMalformed::DeadLetter, None, None) => {
            return Err(WriteError::Usage(
                "`on_malformed` is \"dead_letter\" and the input is standard input: give --dead-letter-file".into(),
            ))
        }
    };
    let mut file = match &path {
        Some(path) => Some(File::open(path).map_err(|source| WriteError::Input { input: input_name.clone(), source })?),
        None => None,
    };
    let job_id = options
        .job_id
        .clone()
        .unwrap_or_else(|| default_job_id(&options.topic, path.as_deref().unwrap_or(Path::new("-"))));

    let value_schema = match &options.value_schema {
        Some(path) => Some(
            // Text for Avro and JSON Schema, a binary descriptor set for Protobuf.
            fs::read(path).map_err(|source| WriteError::Input { input: path.display().to_string(), source })?,
        ),
        None => None,
    };
    let encoder =
        ValueEncoder::for_topic(config, &options.topic, value_schema.as_deref()).await.map_err(
            |error| match error {
                EncoderError::Serializer(error) => WriteError::Registry(Box::new(error)),
                EncoderError::Unsupported(message) => WriteError::Usage(message),
            },
        )?;
    let client = read::connect(config).await.map_err(|error| WriteError::Connect(Box::new(error)))?;
    offsets::topic_partitions(&client, &options.topic)
        .await?
        .ok_or_else(|| WriteError::UnknownTopic { topic: options.topic.clone() })?;
    let offsets_partition = match &path {
        Some(_) => Some(
            offsets::ensure_offsets_topic(&client, &options.offsets_topic, &position_key(&job_id), "--offsets-topic")
                .await?,
        ),
        None => None,
    };

    let mut producer_config = config.network.producer_config(options.compression);
    if exactly_once {
        producer_config = producer_config.with_transactional_id(job_id.clone());
    }
    let producer =
        Producer::new(client.clone(), producer_config).await.map_err(client_error("starting the producer"))?;
    if exactly_once {
        producer.init_transactions().await.map_err(client_error(format!("init_transactions for job {job_id}")))?;
    }

    let mut summary = WriteSummary { job_id: job_id.clone(), ..WriteSummary::default() };
    let mut byte_offset = 0;
    if let (Some(partition), Some(path), Some(file)) = (&offsets_partition, &path, &mut file) {
        if let Some(stored) = load_position(&client, partition, &job_id).await? {
            if stored.topic != options.topic {
                return Err(WriteError::OtherTopic { job_id, stored: stored.topic, topic: options.topic.clone() });
            }
            let input = |source| WriteError::Input { input: input_name.clone(), source };
            let (identity, size) = identify(path, file, stored.byte_offset).map_err(input)?;
            if let Some(detail) = mismatch(&stored, &identity, size) {
                return Err(WriteError::InputChanged {
                    input: input_name,
                    job_id,
                    line: stored.line,
                    byte_offset: stored.byte_offset,
                    detail,
                });
            }
            file.seek(SeekFrom::Start(stored.byte_offset)).map_err(input)?;
            byte_offset = stored.byte_offset;
            summary.lines = stored.line;
            summary.records = stored.records;
            summary.dead_letters = stored.dead_letters;
            summary.resumed_after_line = Some(stored.line);
            tracing::info!(
                job = %job_id,
                line = stored.line,
                byte_offset = stored.byte_offset,
                "resuming {input_name} after line {} (byte {})",
                stored.line,
                stored.byte_offset
            );
        }
    }
    let mut dead_letters = match &dead_letter_path {
        Some(dead_path) => Some(DeadLetterFile::open(dead_path, path.is_some().then_some(summary.lines))?),
        None => None,
    };
    fault::point("write.begun");

    // A second handle on the same open file: each chunk's position identifies the file being
    // read, even if its path is replaced meanwhile.
    let identity_file = match &file {
        Some(file) => Some(file.try_clone().map_err(|source| WriteError::Input { input: input_name.clone(), source })?),
        None => None,
    };
    let reader: Box<dyn Read + Send> = match file {
        Some(file) => Box::new(file),
        None => Box::new(io::stdin()),
    };
    let mut lines = spawn_reader(reader, summary.lines, byte_offset);
    let now_millis = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_millis().min(i64::MAX as u128) as i64)
    };

    let mut end_of_input = false;
    // Totals up to the last chunk sent (records, dead letters); `summary` has them up to the
    // last chunk done (committed, or acknowledged with its position written).
    let mut sent = (summary.records, summary.dead_letters);
    let mut unacked: Option<Chunk> = None;
    while !end_of_input && !summary.stopped {
        // The first line of the chunk opens it, so that no transaction is begun for nothing.
        let mut chunk_lines = 0u64;
        let mut chunk_bytes = 0u64;
        let mut chunk_records = 0u64;
        let mut deliveries: Vec<(u64, DeliveryFuture)> = Vec::new();
        let mut pending_letters: Vec<Vec<u8>> = Vec::new();
        let mut in_transaction = false;
        while chunk_lines < options.chunk_records && chunk_bytes < options.chunk_bytes {
            let next = tokio::select! {
                next = lines.recv() => next,
                _ = stop.stopped() => {
                    summary.stopped = true;
                    break;
                }
            };
            let line = match next {
                None => {
                    end_of_input = true;
                    break;
                }
                Some(Err(source)) => return Err(WriteError::Input { input: input_name, source }),
                Some(Ok(line)) => line,
            };
            chunk_lines += 1;
            chunk_bytes += line.end - line.start;
            summary.lines = line.number;
            byte_offset = line.end;
            if line.bytes.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let record = line_to_record(&line.bytes, options.format, &options.mapping, now_millis())
                .and_then(|mut record| encoder.encode(&mut record.record).map(|()| record));
            match record {
                Ok(record) => {
                    if exactly_once && !in_transaction {
                        producer.begin_transaction().await.map_err(client_error("beginning a transaction"))?;
                        in_transaction = true;
                    }
                    let sent = match record.partition {
                        None => producer.send(&options.topic, record.record).await,
                        Some(partition) => {
                            producer.send_to(&TopicPartition::new(&options.topic, partition), record.record).await
                        }
                    };
                    let delivery =
                        sent.map_err(client_error(format!("sending line {} of {input_name}", line.number)))?;
                    deliveries.push((line.number, delivery));
                    chunk_records += 1;
                }
                Err(problem) => match &dead_letters {
                    None => {
                        return Err(WriteError::Malformed { input: input_name, line: line.number, problem: problem.0 })
                    }
                    Some(_) => pending_letters.push(dead_letter_line(&line, &problem.0)),
                },
            }
        }
        if chunk_lines == 0 {
            break;
        }
        fault::point("write.records.sent");
        if let Some(file) = &mut dead_letters {
            file.append(&pending_letters)?;
            fault::point("write.dead_letters.written");
        }
        sent = (sent.0 + chunk_records, sent.1 + pending_letters.len() as u64);
        let (records, letters) = sent;
        let mut position = None;
        if let (Some(path), Some(file)) = (&path, &identity_file) {
            let (identity, _) = identify(path, file, byte_offset)
                .map_err(|source| WriteError::Input { input: input_name.clone(), source })?;
            position = Some(Position {
                version: 1,
                topic: options.topic.clone(),
                byte_offset,
                line: summary.lines,
                records,
                dead_letters: letters,
                input: identity,
            });
        }
        let chunk = Chunk { deliveries, position, records, letters };
        if exactly_once {
            if let (Some(partition), Some(stored)) = (&offsets_partition, &chunk.position) {
                if !in_transaction {
                    // Only dead letters or blank lines: the position still moves, in a transaction.
                    producer.begin_transaction().await.map_err(client_error("beginning a transaction"))?;
                    in_transaction = true;
                }
                let record = ProduceRecord::new(Some(&position_key(&job_id)), Some(&stored.encode()));
                // Not awaited: the commit answers for every record of the transaction.
                let _delivery = producer
                    .send_to(partition, record)
                    .await
                    .map_err(client_error(format!("sending the position to {}", options.offsets_topic)))?;
                fault::point("write.position.sent");
            }
            if in_transaction {
                if let Err(error) = producer.commit_transaction().await {
                    let detail = format!("committing the transaction of lines up to {}", summary.lines);
                    if !error.is_fenced() {
                        let _ = producer.abort_transaction().await;
                    }
                    return Err(client_error(detail)(error));
                }
            }
            fault::point("write.committed");
            chunk.done(&mut summary, progress);
        } else if let Some(mut previous) = unacked.replace(chunk) {
            // At least once: this chunk's records are in flight while the next chunk is read
            // and sent; the previous chunk's acknowledgements are awaited now, and only then is
            // its position written (a position never runs ahead of an unacknowledged record).
            previous.acknowledge(&producer, offsets_partition.as_ref(), &job_id, options, &input_name).await?;
            previous.done(&mut summary, progress);
        }
    }
    if let Some(mut last) = unacked.take() {
        last.acknowledge(&producer, offsets_partition.as_ref(), &job_id, options, &input_name).await?;
        last.done(&mut summary, progress);
    }
    producer.close(Duration::from_secs(30)).await.map_err(client_error("closing the producer"))?;
    Ok(summary)
}

/// A chunk sent: its records' deliveries, the position that marks it done (files only), and the
/// totals after it.
struct Chunk {
    deliveries: Vec<(u64, DeliveryFuture)>,
    position: Option<Position>,
    records: u64,
    letters: u64,
}

impl Chunk {
    /// At least once: waits for every record of the chunk, then writes its position and waits
    /// for that too.
    async fn acknowledge(
        &mut self,
        producer: &Producer,
        offsets_partition: Option<&TopicPartition>,
        job_id: &str,
        options: &WriteOptions,
        input_name: &str,
    ) -> Result<(), WriteError> {
        for (number, delivery) in self.deliveries.drain(..) {
            delivery.await.map_err(client_error(format!("writing line {number} of {input_name}")))?;
        }
        if let (Some(partition), Some(stored)) = (offsets_partition, &self.position) {
            let record = ProduceRecord::new(Some(&position_key(job_id)), Some(&stored.encode()));
            let delivery = producer
                .send_to(partition, record)
                .await
                .map_err(client_error(format!("sending the position to {}", options.offsets_topic)))?;
            fault::point("write.position.sent");
            delivery.await.map_err(client_error(format!("writing the position to {}", options.offsets_topic)))?;
        }
        fault::point("write.committed");
        Ok(())
    }

    /// The chunk is done: the summary counts it.
    fn done(self, summary: &mut WriteSummary, progress: &mut dyn FnMut(&WriteSummary)) {
        summary.records = self.records;
        summary.dead_letters = self.letters;
        summary.chunks += 1;
        progress(summary);
    }
}

/// The job's last committed position: its key's last value in the offsets partition, read
/// read_committed up to the high watermark as it is now (see the module docs, step 2).
async fn load_position(
    client: &Client,
    partition: &TopicPartition,
    job_id: &str,
) -> Result<Option<Position>, WriteError> {
    let Some((value, offset)) = offsets::load_latest(client, partition, &position_key(job_id)).await? else {
        return Ok(None);
    };
    match value {
        None => Ok(None),
        Some(value) => Position::decode(&value).map(Some).ok_or_else(|| WriteError::BadPosition {
            offsets_topic: partition.topic.clone(),
            partition: partition.partition,
            offset,
        }),
    }
}

impl From<OffsetsError> for WriteError {
    fn from(error: OffsetsError) -> Self {
        match error {
            OffsetsError::Client { doing, source } => WriteError::Client { doing, source },
            OffsetsError::NotCompacted { topic, policy } => {
                WriteError::OffsetsTopicNotCompacted { offsets_topic: topic, policy }
            }
            OffsetsError::Timeout { topic, partition, reached, end } => {
                WriteError::PositionTimeout { offsets_topic: topic, partition, reached, end }
            }
        }
    }
}

/// Reads lines on a thread of its own (standard input may block for any time), numbering them
/// from `line + 1` and counting bytes from `offset`.
fn spawn_reader(
    reader: Box<dyn Read + Send>,
    line: u64,
    offset: u64,
) -> tokio::sync::mpsc::Receiver<Result<Line, io::Error>> {
    let (sender, receiver) = tokio::sync::mpsc::channel(1024);
    std::thread::spawn(move || {
        let mut reader = BufReader::with_capacity(256 * 1024, reader);
        let (mut number, mut start) = (line, offset);
        loop {
            let mut bytes = Vec::new();
            let read = (&mut reader).take(MAX_LINE_BYTES as u64 + 1).read_until(b'\n', &mut bytes);
            let result = match read {
                Ok(0) => return,
                Ok(read) => {
                    number += 1;
                    let end = start + read as u64;
                    if bytes.last() == Some(&b'\n') {
                        bytes.pop();
                        if bytes.last() == Some(&b'\r') {
                            bytes.pop();
                        }
                    } else if bytes.len() > MAX_LINE_BYTES {
                        let message = format!("line {number} is longer than {MAX_LINE_BYTES} bytes");
                        let _ = sender.blocking_send(Err(io::Error::new(io::ErrorKind::InvalidData, message)));
                        return;
                    }
                    let line = Line { number, start, end, bytes };
                    start = end;
                    Ok(line)
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => Err(error),
            };
            let failed = result.is_err();
            if sender.blocking_send(result).is_err() || failed {
                return;
            }
        }
    });
    receiver
}

fn dead_letter_line(line: &Line, problem: &str) -> Vec<u8> {
    let mut object = serde_json::Map::new();
    object.insert("line".into(), line.number.into());
    object.insert("byte_offset".into(), line.start.into());
    object.insert("error".into(), Value::String(problem.to_string()));
    object.insert("text".into(), json::bytes_to_json(&line.bytes));
    let mut bytes = serde_json::to_vec(&Value::Object(object)).unwrap_or_else(|_| unreachable!("a Value serialises"));
    bytes.push(b'\n');
    bytes
}

/// The dead-letter file, appended to and fsynced before each chunk commits.
struct DeadLetterFile {
    path: PathBuf,
    file: File,
}

impl DeadLetterFile {
    /// Opens `path` for appending. With `keep_through = Some(line)` (a file input), first drops
    /// the entries of lines after `line`: they belong to chunks that never committed.
    fn open(path: &Path, keep_through: Option<u64>) -> Result<DeadLetterFile, WriteError> {
        let failed = |source| WriteError::DeadLetters { path: path.to_path_buf(), source };
        if let Some(line) = keep_through {
            prune_dead_letters(path, line).map_err(failed)?;
        }
        let file = OpenOptions::new().create(true).append(true).open(path).map_err(failed)?;
        Ok(DeadLetterFile { path: path.to_path_buf(), file })
    }

    fn append(&mut self, lines: &[Vec<u8>]) -> Result<(), WriteError> {
        if lines.is_empty() {
            return Ok(());
        }
        let failed = |source| WriteError::DeadLetters { path: self.path.clone(), source };
        for line in lines {
            self.file.write_all(line).map_err(failed)?;
        }
        self.file.sync_data().map_err(failed)
    }
}

/// Rewrites the dead-letter file without the entries of lines after `line` (temp file, fsync,
/// rename, fsync of the directory). A missing file is left missing.
fn prune_dead_letters(path: &Path, line: u64) -> io::Result<()> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    let mut kept = Vec::with_capacity(text.len());
    let mut dropped = 0;
    for entry in text.split_inclusive(|byte| *byte == b'\n') {
        let number = serde_json::from_slice::<BTreeMap<String, Value>>(entry)
            .ok()
            .and_then(|object| object.get("line").and_then(Value::as_u64));
        match number {
            Some(number) if number > line => dropped += 1,
            // A torn last entry (a crash while appending) is dropped too.
            None if !entry.ends_with(b"\n") => dropped += 1,
            _ => kept.extend_from_slice(entry),
        }
    }
    if dropped == 0 {
        return Ok(());
    }
    let directory = path.parent().filter(|parent| !parent.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mut temporary_name = std::ffi::OsString::from(".");
    temporary_name.push(path.file_name().unwrap_or_default());
    temporary_name.push(".tmp");
    let temporary = directory.join(temporary_name);
    let mut file = File::create(&temporary)?;
    file.write_all(&kept)?;
    file.sync_all()?;
    fs::rename(&temporary, path)?;
    File::open(directory)?.sync_all()?;
    tracing::info!(dropped, "removed {dropped} dead letters of uncommitted chunks from {}", path.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pruning_keeps_committed_dead_letters_only() {
        let dir = std::env::temp_dir().join(format!("sluice-prune-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("dl.jsonl");
        fs::write(&path, "{\"line\":2}\n{\"line\":5}\n{\"line\":9}\n{\"line\":1").unwrap();
        prune_dead_letters(&path, 5).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"line\":2}\n{\"line\":5}\n");
        prune_dead_letters(&path, 5).unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "{\"line\":2}\n{\"line\":5}\n");
        prune_dead_letters(&dir.join("missing"), 1).unwrap();
        assert!(!dir.join("missing").exists());
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn reader_numbers_lines_and_offsets() {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let text = b"{\"a\":1}\r\n\n{\"b\":2}".to_vec();
        let mut lines = spawn_reader(Box::new(io::Cursor::new(text)), 10, 100);
        let collected: Vec<(u64, u64, u64, Vec<u8>)> = runtime.block_on(async {
            let mut all = Vec::new();
            while let Some(line) = lines.recv().await {
                let line = line.unwrap();
                all.push((line.number, line.start, line.end, line.bytes));
            }
            all
        });
        assert_eq!(
            collected,
            vec![
                (11, 100, 109, b"{\"a\":1}".to_vec()),
                (12, 109, 110, Vec::new()),
                (13, 110, 117, b"{\"b\":2}".to_vec())
            ]
        );
    }
}
