//! Command-line parsing (with `clap`), the error report, and the text `check`, `discover` and
//! `read` print. Kept out of `main.rs` so that tests can call it.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum};
use serde_json::json;

use sluice_wire::{AuthFailure, ClientError, Compression, ConnectionError, TlsField, TlsProblem};

use crate::config::{Config, PayloadFormat};
use crate::destination::WritePolicy;
use crate::mirror::{MirrorMode, MirrorSummary};
use crate::read::{self, ReadError, ReadMode, ReadOptions, ReadProgress};
use crate::registry::client::{RegistryClient, RegistrySettings};
use crate::registry::columns::columns as registry_columns;
use crate::registry::framed_rows::column_type;
use crate::registry::framed_rows::RegistryFormat;
use crate::registry::protobuf_rows::{columns as protobuf_columns, Protobuf};
use crate::rows::{METADATA_COLUMNS, TRANSPORT_COLUMNS};
use crate::write::line::{FieldMapping, InputFormat};
use crate::write::{CommitMode, Input, WriteOptions, WriteSummary};

/// A parsed command line: the global options and the command.
#[derive(Debug, Clone)]
pub struct Invocation {
    /// How log lines on stderr look.
    pub log_format: LogFormat,
    pub command: Command,
}

/// A command with its arguments checked.
#[derive(Debug, Clone)]
pub enum Command {
    /// `wait`: how long to keep retrying an unreachable cluster; `None` gives up after one round
    /// over the bootstrap addresses.
    Check {
        config: PathBuf,
        wait: Option<Duration>,
    },
    Discover {
        config: PathBuf,
        json: bool,
    },
    Read {
        config: PathBuf,
        options: ReadOptions,
    },
    /// `dest`: `--dest`, else the configuration's destination.
    Status {
        config: PathBuf,
        dest: Option<String>,
        json: bool,
    },
    Write {
        config: PathBuf,
        options: WriteOptions,
    },
    /// `config`: the mirror configuration file (its own format: `source`, `target`, topics).
    Mirror {
        config: PathBuf,
        mode: MirrorMode,
    },
    Completions {
        shell: CompletionShell,
    },
}

/// The `--log-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, ValueEnum)]
pub enum LogFormat {
    /// One readable line per event, for a terminal.
    #[default]
    Text,
    /// One JSON object per line, for log shippers.
    Json,
}

/// The shells `sluice completions` writes a script for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

/// Parses the arguments after the program name. The error is clap's: print it with
/// [`clap::Error::print`] and exit with [`clap::Error::exit_code`] (0 for `--help` and
/// `--version`, 2 for a usage error).
pub fn parse<I, T>(args: I) -> Result<Invocation, clap::Error>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    let cli = Cli::try_parse_from(std::iter::once(OsString::from("sluice")).chain(args.into_iter().map(Into::into)))?;
    let command = match cli.command {
        CliCommand::Check { config, wait } => Command::Check { config, wait: wait.map(Duration::from_secs) },
        CliCommand::Discover { config, json } => Command::Discover { config, json },
        CliCommand::Read(read) => {
            if read.mode == ModeArg::Continuous && read.write_policy == WritePolicyArg::Replace {
                return Err(usage_error(
                    "read",
                    ErrorKind::ArgumentConflict,
                    "--write-policy replace applies to bounded reads only",
                ));
            }
            let options = ReadOptions {
                mode: match read.mode {
                    ModeArg::Bounded => ReadMode::Bounded,
                    ModeArg::Continuous => ReadMode::Continuous,
                },
                topics: read.topics.map(|list| list.0),
                write_policy: match read.write_policy {
                    WritePolicyArg::Append => WritePolicy::Append,
                    WritePolicyArg::Replace => WritePolicy::Replace,
                },
                destination: read.dest,
                metrics_addr: read.metrics_addr,
            };
            Command::Read { config: read.config, options }
        }
        CliCommand::Status { config, dest, json } => Command::Status { config, dest, json },
        CliCommand::Write(args) => write_command(args)?,
        CliCommand::Mirror { config, mode } => Command::Mirror {
            config,
            mode: match mode {
                ModeArg::Bounded => MirrorMode::Bounded,
                ModeArg::Continuous => MirrorMode::Continuous,
            },
        },
        CliCommand::Completions { shell } => Command::Completions { shell },
    };
    Ok(Invocation { log_format: cli.log_format, command })
}

/// Writes the completion script for `shell`.
pub fn write_completions(shell: CompletionShell, out: &mut dyn std::io::Write) {
    let mut command = Cli::command();
    match shell {
        CompletionShell::Bash => clap_complete::generate(clap_complete::shells::Bash, &mut command, "sluice", out),
        CompletionShell::Zsh => clap_complete::generate(clap_complete::shells::Zsh, &mut command, "sluice", out),
        CompletionShell::Fish => clap_complete::generate(clap_complete::shells::Fish, &mut command, "sluice", out),
    }
}

/// The whole report of an error: its `Display`, then each `source()`'s, joined with ": ". A cause
/// whose text is already in the report (an error that repeats its cause) is left out.
pub fn error_report(error: &(dyn std::error::Error + 'static)) -> String {
    let mut report = error.to_string();
    let mut cause = error.source();
    while let Some(error) = cause {
        let text = error.to_string();
        if !report.contains(&text) {
            report.push_str(": ");
            report.push_str(&text);
        }
        cause = error.source();
    }
    if let Some(hint) = config_hint(error) {
        report.push_str("; ");
        report.push_str(&hint);
    }
    report
}

/// What to change in the configuration file, in its own keys, for a failure the library reports
/// in its own terms (it knows TLS and SASL settings, not this file's field names).
fn config_hint(error: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(hint) = error.downcast_ref::<ClientError>().and_then(client_hint) {
            return Some(hint);
        }
        if let Some(hint) = error.downcast_ref::<ConnectionError>().and_then(connection_hint) {
            return Some(hint);
        }
        current = error.source();
    }
    None
}

fn client_hint(error: &ClientError) -> Option<String> {
    match error {
        ClientError::Connection(error) => connection_hint(error),
        ClientError::NoBootstrap { last: Some(last), .. } => {
            connection_hint(last).or_else(|| Some("check `brokers`".to_string()))
        }
        ClientError::NoBootstrap { last: None, .. } => Some("check `brokers`".to_string()),
        ClientError::RetriesExhausted { last, .. } => client_hint(last),
        _ => None,
    }
}

fn connection_hint(error: &ConnectionError) -> Option<String> {
    let hint = match error {
        ConnectionError::Authentication { failure, .. } => match failure {
            AuthFailure::UnknownUser => "check `sasl_username` (and that it has credentials for `sasl_mechanism`)",
            AuthFailure::WrongPassword => "check `sasl_password`",
            AuthFailure::WrongUserOrPassword => "check `sasl_username` and `sasl_password`",
            AuthFailure::TokenRejected => {
                "check `sasl_oauth_token` (or the token endpoint's client, `sasl_oauthbearer_scope` and the broker's expected audience and issuer; with AWS_MSK_IAM, `aws_region` and the credentials' IAM permissions)"
            }
            AuthFailure::TokenUnavailable { .. } => {
                "check `sasl_oauthbearer_token_endpoint_url`, `sasl_oauthbearer_client_id` and `sasl_oauthbearer_client_secret` (with AWS_MSK_IAM: the AWS credentials, `aws_role_arn`)"
            }
            AuthFailure::MechanismNotEnabled { .. } => "set `sasl_mechanism` to one the broker offers",
            AuthFailure::Client(error) if error.is_authentication_failure() => {
                "check `sasl_username`, `sasl_password` (or `sasl_oauth_token`) and `sasl_mechanism`"
            }
            _ => return None,
        },
        ConnectionError::Tls { problem, .. } => match (problem, problem.setting()) {
            (_, Some(TlsField::CaPem)) => "put the CA that signed the broker's certificate in `tls_ca_pem`",
            (_, Some(TlsField::CertPem | TlsField::KeyPem)) => {
                "set `tls_cert_pem` and `tls_key_pem` to a client certificate the broker trusts"
            }
            (TlsProblem::NotTls, _) => "check `tls_enabled` against the listener's security protocol",
            _ => return None,
        },
        // A first response that is not Kafka: often a TLS listener spoken to in plaintext.
        ConnectionError::Frame { .. } | ConnectionError::UnexpectedEof { .. } => {
            "check that `tls_enabled` and `sasl_mechanism` match the listener's security protocol"
        }
        _ => return None,
    };
    Some(hint.to_string())
}

/// A usage error of `subcommand`, formatted like clap's own (exit code 2).
fn usage_error(subcommand: &str, kind: ErrorKind, message: &str) -> clap::Error {
    let mut command = Cli::command();
    command.build();
    match command.find_subcommand_mut(subcommand) {
        Some(subcommand) => subcommand.error(kind, message),
        None => command.error(kind, message),
    }
}

/// Reads Kafka topics into a directory: bounded windows or continuously, certifying each epoch
/// after it is durably written; writes JSON Lines into a topic, at least or exactly once.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, arg_required_else_help = true, disable_help_subcommand = false)]
struct Cli {
    /// Log lines on stderr: `text`, or `json` (one object per line). SLUICE_LOG (else RUST_LOG)
    /// picks them, e.g. `sluice=debug,warn`; default `sluice=info,sluice_wire=info,warn`.
    #[arg(long, global = true, value_enum, value_name = "FORMAT", default_value_t = LogFormat::Text)]
    log_format: LogFormat,

    #[command(subcommand)]
    command: CliCommand,
}

#[derive(Debug, Subcommand)]
enum CliCommand {
    /// Connects, authenticates and loads metadata; prints the cluster id and brokers.
    ///
    /// Gives up after one round over the bootstrap addresses unless given --wait.
    Check {
        /// The configuration file (JSON).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Keep retrying an unreachable cluster for this many seconds.
        #[arg(long, value_name = "SECONDS")]
        wait: Option<u64>,
    },
    /// Lists the readable topics with partitions, topic ids and the columns each row has.
    Discover {
        /// The configuration file (JSON).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// Print the listing as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Reads topics into DIR: bounded reads [log start, last stable offset) and finishes;
    /// continuous reads until SIGINT/SIGTERM, certifying each epoch after writing it.
    Read(ReadArgs),
    /// Shows what a destination has certified against the cluster: per partition the certified
    /// position, log start, last stable offset, lag, the incarnation and the last bounded run;
    /// warns about retention loss, recreated topics and unfinished runs. Reads only.
    Status {
        /// The configuration file (JSON).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// The destination: a directory, or a `postgres://user@host:port/dbname` URL (the password
        /// from PGPASSWORD). Default: the configuration's `destination`, else `destination_dir`.
        #[arg(long, value_name = "DIR|URL")]
        dest: Option<String>,
        /// Print the status as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Writes JSON Lines (a file, or `-` for standard input) into a topic, one record per line:
    /// at least once, or (files) exactly once, a transaction per chunk with the input position
    /// in the offsets topic; a restart resumes from the last committed position.
    Write(WriteArgs),
    /// Mirrors topics from a source cluster into a target cluster: keys, values, headers and
    /// timestamps unchanged, at least once or exactly once (the source positions committed in
    /// the target's offsets topic in the same transaction as the records).
    Mirror {
        /// The mirror configuration file (JSON: `source`, `target`, `topics` or `topic_pattern`,
        /// `target_topic`, `commit_mode`, `create_topics`, ...).
        #[arg(long, value_name = "FILE")]
        config: PathBuf,
        /// `continuous` mirrors until SIGINT/SIGTERM; `bounded` stops once every partition
        /// reached the source's last stable offset as listed at start.
        #[arg(long, value_enum, default_value = "continuous")]
        mode: ModeArg,
    },
    /// Prints a shell completion script, e.g. `sluice completions bash > /etc/bash_completion.d/sluice`.
    Completions {
        #[arg(value_enum)]
        shell: CompletionShell,
    },
}

#[derive(Debug, Args)]
struct ReadArgs {
    /// The configuration file (JSON).
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The destination: a directory, or a `postgres://user@host:port/dbname` URL (the password
    /// from PGPASSWORD). Default: the configuration's `destination`, else `destination_dir`.
    #[arg(long, value_name = "DIR|URL")]
    dest: Option<String>,
    /// `bounded`: the window [log start, last stable offset) captured at the start, then finish;
    /// `continuous`: until SIGINT/SIGTERM.
    #[arg(long, value_enum)]
    mode: ModeArg,
    /// Comma-separated topics to read instead of the configured ones.
    #[arg(long, value_name = "a,b", value_parser = parse_topics)]
    topics: Option<TopicList>,
    /// `append` adds this run's output; `replace` (bounded only) replaces the topic's earlier output.
    #[arg(long, value_enum, value_name = "POLICY", default_value_t = WritePolicyArg::Append)]
    write_policy: WritePolicyArg,
    /// Serve Prometheus metrics (records, lag, epochs, fetches, retries) at
    /// http://HOST:PORT/metrics while the read runs, e.g. `127.0.0.1:9464`. Off by default.
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_host_port)]
    metrics_addr: Option<String>,
}

#[derive(Debug, Args)]
struct WriteArgs {
    /// The configuration file (JSON): the connection, and `on_malformed`.
    #[arg(long, value_name = "FILE")]
    config: PathBuf,
    /// The topic to write (it must exist).
    #[arg(long, value_name = "TOPIC")]
    topic: String,
    /// The JSON Lines file, or `-` for standard input.
    #[arg(long, value_name = "FILE|-", default_value = "-")]
    input: PathBuf,
    /// `lines`: any JSON per line; `rows`: the rows `sluice read` writes into a directory's
    /// segments, written back with their keys, headers, timestamps and partitions.
    #[arg(long, value_enum, value_name = "FORMAT", default_value_t = FormatArg::Lines)]
    format: FormatArg,
    /// `at_least_once`, or `exactly_once` (a file only): a transaction per chunk.
    #[arg(long, value_enum, value_name = "MODE", default_value_t = CommitModeArg::AtLeastOnce)]
    commit_mode: CommitModeArg,
    /// A string field whose text is the record's key.
    #[arg(long, value_name = "FIELD")]
    key_field: Option<String>,
    /// A field with the record's timestamp: milliseconds since the epoch, or an RFC 3339 string.
    #[arg(long, value_name = "FIELD")]
    timestamp_field: Option<String>,
    /// A field with the record's headers: an object of string (or null) values, or an array of
    /// [key, value] pairs.
    #[arg(long, value_name = "FIELD")]
    headers_field: Option<String>,
    /// A field that is the record's value (a string's text, null for a tombstone, else its
    /// JSON) instead of the whole line.
    #[arg(long, value_name = "FIELD")]
    value_field: Option<String>,
    /// The codec of the record batches.
    #[arg(long, value_enum, value_name = "CODEC", default_value_t = CompressionArg::None)]
    compression: CompressionArg,
    /// The compacted topic holding each job's input position (created if missing).
    #[arg(long, value_name = "TOPIC", default_value = crate::write::DEFAULT_OFFSETS_TOPIC)]
    offsets_topic: String,
    /// The job's name: its transactional id and its key in the offsets topic. Default: from the
    /// topic and the input's absolute path.
    #[arg(long, value_name = "NAME")]
    job_id: Option<String>,
    /// Lines per chunk (a transaction with exactly_once, a position commit with at_least_once).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..))]
    chunk_records: u64,
    /// Input bytes per chunk at most.
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20, value_parser = clap::value_parser!(u64).range(1..))]
    chunk_bytes: u64,
    /// Where `on_malformed: dead_letter` sets malformed lines aside. Default: the input's path
    /// followed by `.dead-letters.jsonl`.
    #[arg(long, value_name = "FILE")]
    dead_letter_file: Option<PathBuf>,
    /// For a topic configured with `format: avro` or `json_schema`: a schema (Avro or JSON
    /// Schema, JSON text; for `format: protobuf` a FileDescriptorSet from `protoc
    /// --include_imports --descriptor_set_out=FILE`) to register under the value subject and
    /// encode the values with. Default: the subject's latest schema.
    #[arg(long, value_name = "FILE")]
    value_schema: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum FormatArg {
    Lines,
    Rows,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CommitModeArg {
    #[value(name = "at_least_once")]
    AtLeastOnce,
    #[value(name = "exactly_once")]
    ExactlyOnce,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum CompressionArg {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

fn write_command(args: WriteArgs) -> Result<Command, clap::Error> {
    let input = if args.input.as_os_str() == "-" { Input::Stdin } else { Input::File(args.input) };
    let commit_mode = match args.commit_mode {
        CommitModeArg::AtLeastOnce => CommitMode::AtLeastOnce,
        CommitModeArg::ExactlyOnce => CommitMode::ExactlyOnce,
    };
    if commit_mode == CommitMode::ExactlyOnce && input == Input::Stdin {
        return Err(usage_error(
            "write",
            ErrorKind::ArgumentConflict,
            "--commit-mode exactly_once needs --input FILE: standard input cannot be read again from a committed \
             position after a crash, so it supports only at_least_once",
        ));
    }
    let mapping = FieldMapping {
        key_field: args.key_field,
        timestamp_field: args.timestamp_field,
        headers_field: args.headers_field,
        value_field: args.value_field,
    };
    let format = match args.format {
        FormatArg::Lines => InputFormat::Lines,
        FormatArg::Rows => InputFormat::Rows,
    };
    if format == InputFormat::Rows && !mapping.is_empty() {
        return Err(usage_error(
            "write",
            ErrorKind::ArgumentConflict,
            "--format rows takes the key, headers, timestamp and value from the row's columns: drop --key-field, \
             --timestamp-field, --headers-field and --value-field",
        ));
    }
    let mut options = WriteOptions::new(args.topic, input);
    options.format = format;
    options.mapping = mapping;
    options.commit_mode = commit_mode;
    options.compression = match args.compression {
        CompressionArg::None => Compression::None,
        CompressionArg::Gzip => Compression::Gzip,
        CompressionArg::Snappy => Compression::Snappy,
        CompressionArg::Lz4 => Compression::Lz4,
        CompressionArg::Zstd => Compression::Zstd,
    };
    options.offsets_topic = args.offsets_topic;
    options.job_id = args.job_id;
    options.chunk_records = args.chunk_records;
    options.chunk_bytes = args.chunk_bytes;
    options.dead_letter_file = args.dead_letter_file;
    options.value_schema = args.value_schema;
    Ok(Command::Write { config: args.config, options })
}

/// The summary line of `sluice write`.
pub fn write_summary_line(summary: &WriteSummary, elapsed: Duration) -> String {
    let resumed = summary.resumed_after_line.map_or(String::new(), |line| format!(", resumed after line {line}"));
    let stopped = if summary.stopped { ", stopped by a signal before the end of the input" } else { "" };
    format!(
        "wrote {} records ({} dead letters) from {} lines in {} chunks in {:.1} s, job {}{resumed}{stopped}",
        summary.records,
        summary.dead_letters,
        summary.lines,
        summary.chunks,
        elapsed.as_secs_f64(),
        summary.job_id
    )
}

/// The summary line of `sluice mirror`.
pub fn mirror_summary_line(summary: &MirrorSummary, elapsed: Duration) -> String {
    let created = match summary.created.is_empty() {
        true => String::new(),
        false => format!(", created {}", summary.created.join(", ")),
    };
    let resumed = if summary.resumed { ", resumed from stored positions" } else { "" };
    let stopped = if summary.stopped { ", stopped by a signal" } else { "" };
    format!(
        "mirrored {} records of {} topics ({} partitions) in {} chunks in {:.1} s, job {}{created}{resumed}{stopped}",
        summary.records,
        summary.topics,
        summary.partitions,
        summary.chunks,
        elapsed.as_secs_f64(),
        summary.job_id
    )
}

/// `HOST:PORT` with a port number (`[v6]:PORT` for IPv6); the host is resolved when binding.
fn parse_host_port(text: &str) -> Result<String, String> {
    match text.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => Ok(text.to_string()),
        _ => Err(format!("{text:?} is not HOST:PORT (e.g. 127.0.0.1:9464, or [::1]:9464)")),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ModeArg {
    Bounded,
    Continuous,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum WritePolicyArg {
    Append,
    Replace,
}

/// The topics of `--topics` (one value, split at commas; not a repeated flag).
#[derive(Debug, Clone)]
struct TopicList(Vec<String>);

fn parse_topics(text: &str) -> Result<TopicList, String> {
    let list: Vec<String> = text.split(',').map(str::trim).filter(|t| !t.is_empty()).map(String::from).collect();
    if list.is_empty() {
        return Err("--topics needs at least one topic name".to_string());
    }
    Ok(TopicList(list))
}

/// `sluice check`: connect, load metadata, describe the cluster. It is interactive: without
/// `wait` it gives up after one round over the bootstrap addresses (with `wait`, once that is
/// spent), where a read rides out an outage for its whole retry budget.
pub async fn check(config: &Config, wait: Option<Duration>) -> Result<String, ReadError> {
    let retry = config.network.retry_policy().with_budget(wait.unwrap_or(Duration::ZERO));
    let client = read::connect_with_retry(config, retry).await?;
    let metadata = client.refresh_metadata(None).await?;
    let cluster_id = read::cluster_id(&metadata)?;
    let mut out = format!("cluster id: {cluster_id}\nbrokers:\n");
    for broker in metadata.brokers.values() {
        let controller = if broker.node_id == metadata.controller_id { " (controller)" } else { "" };
        out.push_str(&format!("  {} {}{controller}\n", broker.node_id, broker.address()));
    }
    Ok(out)
}

/// `sluice discover`: the readable, non-internal topics.
pub async fn discover(config: &Config, as_json: bool) -> Result<String, ReadError> {
    let client = read::connect(config).await?;
    let metadata = client.refresh_metadata(None).await?;
    let cluster_id = read::cluster_id(&metadata)?;
    let mut topics: Vec<_> = metadata.topics.values().filter(|t| !t.is_internal && t.error_code.is_ok()).collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    let columns: Vec<&str> = TRANSPORT_COLUMNS.iter().chain(METADATA_COLUMNS.iter()).copied().collect();
    // A `format: avro` (or `protobuf`) topic's payload columns are those of its value subject's
    // latest schema (JSON topics learn theirs from the first record read). A subject that cannot
    // give them is reported with the topic, not as a failure of the whole listing.
    let registry =
        config.schema_registry.as_ref().map(|settings| RegistryClient::new(RegistrySettings::from_config(settings)));
    let mut payloads = Vec::with_capacity(topics.len());
    for topic in &topics {
        let payload = config.payload(&topic.name);
        let columns = match (&registry, payload.format) {
            (Some(registry), PayloadFormat::Avro) => {
                Some(match registry.latest_avro_schema(&payload.value_subject).await {
                    Ok(schema) => registry_columns(&schema)
                        .map_err(|e| format!("subject {}: the fields cannot be columns: {e}", payload.value_subject)),
                    Err(error) => Err(error_report(&error)),
                })
            }
            // The columns of `value_message` (default: the file's first message), which a
            // tombstone read first takes too.
            (Some(registry), PayloadFormat::Protobuf) => {
                Some(match registry.latest_protobuf_schema(&payload.value_subject).await {
                    Ok(schema) => Protobuf::subject_message(&schema, payload.value_message.as_deref())
                        .and_then(|message| protobuf_columns(&schema, message).map_err(|e| e.to_string()))
                        .map_err(|e| format!("subject {}: {e}", payload.value_subject)),
                    Err(error) => Err(error_report(&error)),
                })
            }
            _ => None,
        };
        payloads.push((payload.format, payload.key_format, columns));
    }
    // A topic with `key_format` has the decoded key's column after the metadata columns.
    let columns_of = |key_format: Option<PayloadFormat>| {
        let mut listed = columns.clone();
        if key_format.is_some() {
            listed.push(crate::keys::DECODED_KEY_COLUMN);
        }
        listed
    };
    if as_json {
        let list: Vec<_> = topics
            .iter()
            .zip(&payloads)
            .map(|(t, (format, key_format, payload))| {
                let mut entry = serde_json::Map::new();
                entry.insert("topic".into(), json!(t.name));
                entry.insert("topic_id".into(), json!(t.topic_id.to_string()));
                entry.insert("partitions".into(), json!(t.partitions.len()));
                entry.insert("columns".into(), json!(columns_of(*key_format)));
                entry.insert("format".into(), json!(format.name()));
                entry.insert("key_format".into(), json!(key_format.map_or("raw", PayloadFormat::name)));
                match payload {
                    Some(Ok(payload)) => {
                        let described: Vec<_> = payload
                            .iter()
                            .map(|c| {
                                json!({"name": c.name, "type": column_type(c.column_type).name(), "nullable": c.nullable})
                            })
                            .collect();
                        entry.insert("payload_columns".into(), json!(described));
                    }
                    Some(Err(error)) => {
                        entry.insert("payload_error".into(), json!(error));
                    }
                    None => {}
                }
                serde_json::Value::Object(entry)
            })
            .collect();
        let value = json!({ "cluster_id": cluster_id, "topics": list });
        return Ok(format!("{}\n", serde_json::to_string_pretty(&value).unwrap_or_default()));
    }
    let width = topics.iter().map(|t| t.name.len()).max().unwrap_or(5).max(5);
    let mut out = format!("{:width$}  {:>10}  {:22}  columns\n", "topic", "partitions", "topic id");
    for (topic, (_, key_format, payload)) in topics.iter().zip(&payloads) {
        let payload = match payload {
            None => "payload columns".to_string(),
            Some(Ok(payload)) => payload
                .iter()
                .map(|c| format!("{} ({})", c.name, column_type(c.column_type).name()))
                .collect::<Vec<_>>()
                .join(", "),
            Some(Err(error)) => format!("payload columns unknown: {error}"),
        };
        out.push_str(&format!(
            "{:width$}  {:>10}  {:22}  {} + {payload}\n",
            topic.name,
            topic.partitions.len(),
            topic.topic_id.to_string(),
            columns_of(*key_format).join(", ")
        ));
    }
    Ok(out)
}

/// One line of progress: rows, bytes, and each partition's position against its window end.
pub fn progress_line(progress: &ReadProgress) -> String {
    let mut line = format!("{} rows, {}", progress.rows(), human_bytes(progress.bytes()));
    for topic in &progress.topics {
        let (done, total): (i64, i64) = topic.partitions.values().fold((0, 0), |(d, t), p| match p.end {
            Some(end) => (d + p.position.min(end), t + end),
            None => (d + p.position, t + p.position),
        });
        let percent = if total > 0 { done as f64 * 100.0 / total as f64 } else { 100.0 };
        line.push_str(&format!(" | {} {:.0}%", topic.topic, percent));
        for (partition, p) in &topic.partitions {
            match p.end {
                Some(end) => line.push_str(&format!(" p{partition} {}/{end}", p.position)),
                None => line.push_str(&format!(" p{partition} @{}", p.position)),
            }
        }
    }
    line
}

/// The one-line summary printed at the end of a read.
pub fn summary_line(progress: &ReadProgress, elapsed: Duration) -> String {
    let topics: Vec<&str> = progress.topics.iter().map(|t| t.topic.as_str()).collect();
    let epochs: u64 = progress.topics.iter().map(|t| t.epochs).sum();
    let mut line = format!(
        "{} {} rows ({}) from {} topic(s) [{}] in {:.1}s, {} epochs certified",
        if progress.stopped { "stopped after" } else { "read" },
        progress.rows(),
        human_bytes(progress.bytes()),
        topics.len(),
        topics.join(", "),
        elapsed.as_secs_f64(),
        epochs
    );
    if progress.dead_letters() > 0 {
        line.push_str(&format!(", {} dead letters", progress.dead_letters()));
    }
    line
}

fn human_bytes(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        format!("{:.1} MiB", bytes as f64 / f64::from(1 << 20))
    } else if bytes >= 1 << 10 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        format!("{bytes} B")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<String> {
        line.split_whitespace().map(String::from).collect()
    }

    /// The usage error for `line`, as printed.
    fn usage_error(line: &str) -> String {
        let error = parse(args(line)).unwrap_err();
        assert_eq!(error.exit_code(), 2, "{line}: {error}");
        error.to_string()
    }

    #[test]
    fn read_needs_mode_and_takes_dest() {
        let message = usage_error("read --config c.json --dest out");
        assert!(message.contains("--mode <MODE>"), "{message}");
        let Command::Read { options, .. } =
            parse(args("read --config c.json --dest out --mode bounded --topics a,b --write-policy replace"))
                .unwrap()
                .command
        else {
            panic!("read expected");
        };
        assert_eq!(options.topics, Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(options.write_policy, WritePolicy::Replace);
        assert_eq!(options.mode, ReadMode::Bounded);
        assert_eq!(options.destination.as_deref(), Some("out"));
        assert_eq!(options.metrics_addr, None);
        let Command::Read { options, .. } =
            parse(args("read --config c.json --mode continuous --metrics-addr 127.0.0.1:9464")).unwrap().command
        else {
            panic!("read expected");
        };
        assert_eq!(options.metrics_addr.as_deref(), Some("127.0.0.1:9464"));
        let message = usage_error("read --config c.json --mode continuous --metrics-addr 9464");
        assert!(message.contains("is not HOST:PORT"), "{message}");
    }

    #[test]
    fn the_commands_and_their_defaults() {
        let invocation = parse(args("check --config c.json")).unwrap();
        assert_eq!(invocation.log_format, LogFormat::Text);
        assert!(matches!(invocation.command, Command::Check { wait: None, .. }));
        let invocation = parse(args("check --config c.json --wait 30 --log-format json")).unwrap();
        assert_eq!(invocation.log_format, LogFormat::Json);
        assert!(
            matches!(invocation.command, Command::Check { wait: Some(wait), .. } if wait == Duration::from_secs(30))
        );
        assert!(matches!(
            parse(args("--log-format json discover --config c.json --json")).unwrap().command,
            Command::Discover { json: true, .. }
        ));
        let Command::Read { options, .. } =
            parse(args("read --config c --dest d --mode continuous --topics ,x,, --write-policy append"))
                .unwrap()
                .command
        else {
            panic!("read expected");
        };
        assert_eq!(options.mode, ReadMode::Continuous);
        assert_eq!(options.topics, Some(vec!["x".to_string()]));
        assert_eq!(options.write_policy, WritePolicy::Append);
        assert!(matches!(
            parse(args("status --config c.json --dest postgres://u@h/db --json")).unwrap().command,
            Command::Status { json: true, dest: Some(dest), .. } if dest == "postgres://u@h/db"
        ));
        assert!(matches!(
            parse(args("status --config c.json")).unwrap().command,
            Command::Status { json: false, dest: None, .. }
        ));
        assert!(matches!(
            parse(args("completions zsh")).unwrap().command,
            Command::Completions { shell: CompletionShell::Zsh }
        ));
    }

    #[test]
    fn bad_arguments_are_named() {
        assert!(usage_error("check").contains("--config <FILE>"));
        assert!(usage_error("frobnicate --config c").contains("unrecognized subcommand 'frobnicate'"));
        let message = usage_error("read --config c --dest d --mode sometimes");
        assert!(message.contains("invalid value 'sometimes' for '--mode <MODE>'"), "{message}");
        assert!(message.contains("[possible values: bounded, continuous]"), "{message}");
        let message = usage_error("read --config c --dest d --mode continuous --write-policy replace");
        assert!(message.contains("--write-policy replace applies to bounded reads only"), "{message}");
        assert!(message.contains("Usage: sluice read"), "{message}");
        let message = usage_error("read --config c --dest d --mode bounded --topics ,");
        assert!(message.contains("--topics needs at least one topic name"), "{message}");
        assert!(usage_error("check --config c --wait soon").contains("invalid value 'soon' for '--wait <SECONDS>'"));
        assert!(usage_error("check --config c --log-format xml").contains("[possible values: text, json]"));
    }

    #[test]
    fn misplaced_flags_are_rejected() {
        for (line, flag) in [
            ("check --config c --dest x", "--dest"),
            ("check --config c --json", "--json"),
            ("discover --config c --mode bounded", "--mode"),
            ("read --config c --dest d --mode bounded --wait 3", "--wait"),
        ] {
            let message = usage_error(line);
            assert!(message.contains(&format!("unexpected argument '{flag}' found")), "{line}: {message}");
        }
    }

    #[test]
    fn mirror_takes_a_config_and_a_mode() {
        let parsed = parse(args("mirror --config m.json")).unwrap();
        assert!(matches!(parsed.command, Command::Mirror { mode: MirrorMode::Continuous, .. }), "{parsed:?}");
        let parsed = parse(args("mirror --config m.json --mode bounded")).unwrap();
        assert!(matches!(parsed.command, Command::Mirror { mode: MirrorMode::Bounded, .. }), "{parsed:?}");
        assert_eq!(parse(args("mirror")).unwrap_err().exit_code(), 2, "--config is required");
        assert!(usage_error("mirror --config m.json --mode sometimes").contains("invalid value 'sometimes'"));
    }

    #[test]
    fn help_and_version_exit_0() {
        for line in ["--help", "read --help", "help read", "check -h", "--version"] {
            let error = parse(args(line)).unwrap_err();
            assert_eq!(error.exit_code(), 0, "{line}");
        }
        let help = parse(args("read --help")).unwrap_err().to_string();
        for flag in [
            "--config <FILE>",
            "--dest <DIR|URL>",
            "--mode <MODE>",
            "--topics <a,b>",
            "--write-policy <POLICY>",
            "--metrics-addr <HOST:PORT>",
            "--log-format",
        ] {
            assert!(help.contains(flag), "read --help names {flag}: {help}");
        }
        let version = parse(args("--version")).unwrap_err().to_string();
        assert_eq!(version.trim(), format!("sluice {}", env!("CARGO_PKG_VERSION")));
        // No command: the help, as a usage error.
        assert_eq!(parse(Vec::<String>::new()).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn completions_name_the_commands() {
        let mut script = Vec::new();
        write_completions(CompletionShell::Bash, &mut script);
        let script = String::from_utf8(script).unwrap();
        assert!(script.contains("sluice") && script.contains("discover") && script.contains("--write-policy"));
    }

    #[test]
    fn the_report_joins_the_causes_once() {
        #[derive(Debug)]
        struct Layer(&'static str, Option<Box<Layer>>);
        impl std::fmt::Display for Layer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.0)
            }
        }
        impl std::error::Error for Layer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                self.1.as_deref().map(|layer| layer as _)
            }
        }
        let chain = Layer("top", Some(Box::new(Layer("middle: cause", Some(Box::new(Layer("cause", None)))))));
        assert_eq!(error_report(&chain), "top: middle: cause");

        let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "No space left on device");
        let error = ReadError::Destination(crate::destination::DestinationError::Io {
            action: "write",
            path: PathBuf::from("/out/t/x.jsonl"),
            error: io,
        });
        assert_eq!(
            error_report(&error),
            "the destination failed: cannot write /out/t/x.jsonl (check that the destination directory exists, \
             is writable and has free space): No space left on device"
        );
        let error = crate::config::Config::load(std::path::Path::new("/nonexistent/sluice.json")).unwrap_err();
        let report = error_report(&error);
        assert!(report.starts_with("cannot read the configuration file /nonexistent/sluice.json"), "{report}");
        assert!(report.ends_with(": No such file or directory (os error 2)"), "{report}");
    }

    #[test]
    fn library_failures_get_a_hint_in_this_files_keys() {
        let authentication = |failure| {
            ReadError::Client(ClientError::Connection(ConnectionError::Authentication {
                broker: "b:9093".to_string(),
                mechanism: sluice_wire::SaslMechanism::ScramSha512,
                failure,
                broker_message: None,
                reauthentication: false,
            }))
        };
        let report = error_report(&authentication(AuthFailure::WrongPassword));
        assert!(report.contains("wrong password") && report.ends_with("; check `sasl_password`"), "{report}");
        let report = error_report(&authentication(AuthFailure::UnknownUser));
        assert!(report.contains("check `sasl_username`"), "{report}");
        let report = error_report(&authentication(AuthFailure::MechanismNotEnabled { offered: vec!["PLAIN".into()] }));
        assert!(report.contains("it offers: PLAIN") && report.contains("set `sasl_mechanism`"), "{report}");
        let tls = ReadError::Client(ClientError::NoBootstrap {
            addresses: vec!["b:9093".to_string()],
            last: Some(ConnectionError::Tls {
                broker: "b:9093".to_string(),
                problem: TlsProblem::UnknownIssuer,
                source: None,
            }),
        });
        let report = error_report(&tls);
        assert!(report.contains("not signed by a trusted CA") && report.contains("`tls_ca_pem`"), "{report}");
        let refused = ReadError::Client(ClientError::NoBootstrap { addresses: vec!["b:9093".to_string()], last: None });
        assert!(error_report(&refused).ends_with("; check `brokers`"), "{}", error_report(&refused));
    }
}
