//! The connector's configuration: one JSON file.
//!
//! ```json
//! {
//!   "brokers": ["kafka-1:9092", "kafka-2:9092"],
//!   "tls_enabled": true,
//!   "sasl_mechanism": "SCRAM-SHA-256",
//!   "sasl_username": "sluice",
//!   "sasl_password": "${KAFKA_PASSWORD}",
//!   "topics": ["orders"],
//!   "destination_dir": "/var/lib/sluice/out"
//! }
//! ```
//!
//! # Fields
//!
//! Connection fields carry the names other Kafka source connectors commonly use:
//!
//! | field | meaning | default |
//! | - | - | - |
//! | `brokers` | bootstrap `host:port` addresses, at least one | required |
//! | `client_id` | Kafka client id | `sluice` |
//! | `tls_enabled` | certificate-verified TLS (system trust store unless `tls_ca_pem`) | `false` |
//! | `tls_ca_pem` | pasted PEM CA certificates, for a private CA | none |
//! | `tls_cert_pem`, `tls_key_pem` | pasted PEM client chain and its private key, for mutual TLS; both or neither | none |
//! | `sasl_mechanism` | `none`, `PLAIN`, `SCRAM-SHA-256`, `SCRAM-SHA-512`, `OAUTHBEARER` or `AWS_MSK_IAM` (case-insensitive) | `none` |
//! | `sasl_username`, `sasl_password` | SASL credentials, required with PLAIN and SCRAM | none |
//! | `sasl_oauth_token` | a fixed bearer token for OAUTHBEARER; or the four fields below | none |
//! | `sasl_oauthbearer_token_endpoint_url` | OAUTHBEARER from an OAuth/OIDC token endpoint (client credentials grant, KIP-768): `https://...` | none |
//! | `sasl_oauthbearer_client_id`, `sasl_oauthbearer_client_secret` | the OAuth client, required with the endpoint (the secret as `${ENV}`) | none |
//! | `sasl_oauthbearer_scope` | the `scope` to ask for | none |
//! | `sasl_oauthbearer_extensions` | SASL extensions (KIP-342) as an object of strings, e.g. `{"logicalCluster": "lkc-...", "identityPoolId": "pool-..."}` for Confluent Cloud | none |
//! | `sasl_oauthbearer_ca_pem` | the CA of the token endpoint, when it is private | system trust store |
//! | `aws_region` | with `AWS_MSK_IAM`: the cluster's region (required) | none |
//! | `aws_role_arn`, `aws_role_session_name` | with `AWS_MSK_IAM`: a role to assume (STS AssumeRole) with the credentials found (environment, web identity, ECS, EC2 metadata) | none, `sluice` |
//! | `sasl_allow_plaintext` | silence the warning PLAIN gives on a connection without TLS | `false` |
//! | `preset` | `event-hubs`: with `namespace` and `connection_string_env` (the name of the variable holding the connection string), sets `brokers`, TLS and SASL PLAIN for Azure Event Hubs | none |
//!
//! Source fields:
//!
//! | field | meaning | default |
//! | - | - | - |
//! | `topics` | the default resources: topic names, or objects `{"name": "orders", "format": "avro", "value_subject": "orders-value"}` (and for `protobuf` `"value_message": "shop.Order"`, the message `discover` lists and a leading tombstone takes; default the file's first), both kinds may be mixed | `[]` (discover) |
//! | `topics[].format` | how values become columns: `json` (objects become columns, see `crate::rows`), `avro` (Confluent-framed Avro with schemas from `schema_registry`, see `crate::registry::avro_rows`), `json_schema` (Confluent-framed JSON whose id must be a registered JSON Schema, then as `json`; see `crate::registry::json_schema_rows`), `protobuf` (Confluent-framed Protobuf, schemas from `schema_registry` as serialized descriptors, see `crate::registry::protobuf_rows`) or `raw` (the bytes in one `payload` column) | `json` |
//! | `topics[].value_subject` | with `avro`: the registry subject whose latest schema gives the columns when the first record read is a tombstone | `<topic>-value` |
//! | `topics[].key_format` | how record keys are decoded into the extra `json` column `_sluice_key_decoded` (the key's bytes stay in `_sluice_key`): `json`, `avro`, `protobuf` or `json_schema` (framed as values are; the schema id and message come from each key), or `raw` (no decoding, no column); see `crate::keys` | `raw` |
//! | `schema_registry` | `{"url": "https://registry:8081"` (a path prefix is kept), `"username"`/`"password"` or `"api_key"`/`"api_secret"` (HTTP basic auth), or `"bearer_token"`; `"tls_ca_pem"`, `"tls_cert_pem"`/`"tls_key_pem"` (https only)`}`; every field takes `${ENV}`, credentials and PEMs are secrets; required by `format` and `key_format` `avro`, `protobuf` and `json_schema` | none |
//! | `start_position` | `earliest` or `latest`, for a partition with no checkpoint in continuous mode; with a group also `group` (the group's committed offset, else `earliest`) | `earliest` |
//! | `group_id` | share the topics' partitions with other `sluice read --mode continuous` workers of this Kafka consumer group (without it, one process reads every partition) | none |
//! | `group_id_prefix` | as `group_id`, the id being the prefix followed by the connection id; not with `group_id` | none |
//! | `group_protocol` | `auto` (KIP-848's `consumer` protocol when the cluster runs it: ConsumerGroupHeartbeat offered and `group.version` 1 finalized, as on Kafka 4.x; else `classic`), `classic` or `consumer` | `auto` |
//! | `group_instance_id` | static membership (KIP-345): a stable id per worker, so that a restart within the session timeout keeps its partitions | none |
//! | `group_session_timeout_ms` | how long a silent worker keeps its partitions (classic: sent to the broker; `consumer`: set it to the broker's `group.consumer.session.timeout.ms`) | `45000` |
//! | `group_heartbeat_interval_ms` | the classic protocol's heartbeat interval (KIP-848's is the broker's) | `3000` |
//! | `connection_id` | the stable source connection id (part of the incarnation); `[A-Za-z0-9._-]`, at most 128 | generated and stored by the destination on first use |
//! | `epoch_max_records` | continuous mode cuts an epoch after this many records | `10000` |
//! | `epoch_max_bytes` | ... or after this many payload bytes | `16777216` (16 MiB) |
//! | `epoch_max_ms` | ... or after this many milliseconds | `1000` |
//! | `fetch_max_bytes` | Fetch request limit | `4194304` (4 MiB) |
//! | `partition_max_bytes` | Fetch limit per partition, at most `fetch_max_bytes` | `1048576` (1 MiB) |
//! | `fetch_max_wait_ms` | how long the broker may hold a Fetch waiting for data | `500` |
//! | `request_timeout_ms` | how long one request may wait for its response before the connection is dropped and the request retried | `30000` |
//! | `connect_timeout_ms` | how long a TCP connect (plus TLS and SASL handshakes) may take | `10000` |
//! | `retry_backoff_ms` | first pause before retrying a retriable failure (lost connection, timeout, leader change); doubles per attempt | `100` |
//! | `retry_backoff_max_ms` | the longest pause between retries | `2000` |
//! | `retry_budget_ms` | how long one operation (a connect, a fetch, a metadata load) may keep retrying, from its first attempt, before the run fails; raise it to ride out longer outages (`sluice check` does not retry unless given `--wait`) | `60000` |
//! | `on_malformed` | `fail`, or `dead_letter` to set aside a record that breaks the schema and go on | `fail` |
//! | `destination_dir` | the embedded destination's directory (when `--dest` is not given) | `sluice-output` |
//! | `destination` | a PostgreSQL database instead: `{"type": "postgres", "url": "postgres://user@host:port/db"` (or `host`, `port`, `dbname`, `user`), `"password"`, `"tls_enabled"`, `"tls_ca_pem"` (TLS always verifies the server), `"schema"` (default `public`), `"table_prefix"`}; `--dest` wins over it | none |
//!
//! Integer fields take a JSON integer, or a string of digits so that `"${VAR}"` works for them.
//!
//! # Rules
//!
//! * `${NAME}` in any string value (also inside arrays) is replaced by the environment variable
//!   `NAME`; an unset variable is an error naming it and the field. `$${` writes a literal `${`.
//! * Unknown fields are rejected. So are the `tls_ca_file`, `tls_cert_file` and `tls_key_file`
//!   fields other connectors take: Sluice takes certificates as pasted PEM text.
//! * Certificate fields need `"tls_enabled": true`; a SASL mechanism needs both credentials, and
//!   credentials need a mechanism.
//! * Duplicate keys are rejected (see [`crate::json`]).
//! * Every rejection names the field and says what to change.
//!
//! # Secrets
//!
//! `sasl_password`, the schema registry's credentials and the PEM fields are held as [`Secret`], whose `Debug` and `Display` print
//! `<redacted>`. No error message includes a field's value after substitution; values that are
//! not secret (a broker address, a mechanism name) are quoted as written.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Map, Value};
use sluice_wire::{Compression, ProducerConfig, RetryPolicy};

use crate::destination::{DestinationTarget, PostgresSettings};
use crate::json::{parse_strict, JsonError};

/// A validated configuration. Build it with [`Config::load`] or [`Config::from_json_str`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    pub brokers: Vec<BrokerAddress>,
    pub client_id: String,
    pub tls: Option<TlsConfig>,
    pub sasl: Option<SaslConfig>,
    pub topics: Vec<String>,
    /// Per topic: how its record values are decoded (`topics` objects); a topic not here (or
    /// given by `--topics`, or discovered) is JSON.
    pub payloads: BTreeMap<String, TopicPayload>,
    /// The `schema_registry` connection, for `format: avro` topics.
    pub schema_registry: Option<SchemaRegistryConfig>,
    pub start_position: StartPosition,
    pub connection_id: Option<String>,
    pub epoch: EpochLimits,
    pub fetch: FetchLimits,
    pub network: NetworkLimits,
    pub on_malformed: OnMalformed,
    pub destination_dir: PathBuf,
    /// The `destination` object: a Postgres database instead of the directory.
    pub destination: Option<PostgresConfig>,
    /// Continuous reads share partitions through this consumer group; `None`: direct
    /// assignment of every partition.
    pub group: Option<GroupSettings>,
}

/// How continuous workers share partitions through a Kafka consumer group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupSettings {
    pub id: GroupId,
    pub protocol: GroupProtocolSetting,
    pub instance_id: Option<String>,
    pub session_timeout_ms: u64,
    pub heartbeat_interval_ms: u64,
}

/// The group id, or how to derive it from the connection id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GroupId {
    Fixed(String),
    Prefix(String),
}

impl GroupId {
    /// The group id for a connection.
    pub fn resolve(&self, connection_id: &str) -> String {
        match self {
            GroupId::Fixed(id) => id.clone(),
            GroupId::Prefix(prefix) => format!("{prefix}{connection_id}"),
        }
    }
}

/// `group_protocol`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupProtocolSetting {
    Auto,
    Classic,
    Consumer,
}

/// How one topic's record values become columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicPayload {
    pub format: PayloadFormat,
    /// The registry subject of the value schema (`format: avro`): `<topic>-value` unless set.
    /// Used for the columns when the first record read is a tombstone.
    pub value_subject: String,
    /// `format: protobuf`: the full name of the message (`shop.Order`) whose columns
    /// `sluice discover` lists and a tombstone read first takes; `None`: the schema file's first
    /// message. Records say their own message (the index array) and need no setting.
    pub value_message: Option<String>,
    /// `key_format`: how record keys are decoded into the `_sluice_key_decoded` column (see
    /// `crate::keys`); `None` (the default, or `raw`): keys are only kept as bytes in
    /// `_sluice_key`, and the row has no `_sluice_key_decoded`.
    pub key_format: Option<PayloadFormat>,
}

impl TopicPayload {
    /// A JSON topic (the default).
    pub fn json(topic: &str) -> TopicPayload {
        TopicPayload {
            format: PayloadFormat::Json,
            value_subject: format!("{topic}-value"),
            value_message: None,
            key_format: None,
        }
    }

    /// Whether the value or the key needs `schema_registry`.
    pub fn uses_registry(&self) -> bool {
        let registered = |format: PayloadFormat| {
            matches!(format, PayloadFormat::Avro | PayloadFormat::Protobuf | PayloadFormat::JsonSchema)
        };
        registered(self.format) || self.key_format.is_some_and(registered)
    }
}

/// A topic's `format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadFormat {
    /// JSON objects become columns (see `crate::rows`); anything else is raw bytes.
    Json,
    /// Confluent-framed Avro, schemas from `schema_registry` (see `crate::registry`).
    Avro,
    /// Confluent-framed JSON (a JSON Schema's id from `schema_registry`), then as `Json`.
    JsonSchema,
    /// Confluent-framed Protobuf (message indexes, then the message), schemas from
    /// `schema_registry`.
    Protobuf,
    /// Every value is kept as bytes in the one `payload` column.
    Raw,
}

impl PayloadFormat {
    pub fn name(self) -> &'static str {
        match self {
            PayloadFormat::Json => "json",
            PayloadFormat::Avro => "avro",
            PayloadFormat::JsonSchema => "json_schema",
            PayloadFormat::Protobuf => "protobuf",
            PayloadFormat::Raw => "raw",
        }
    }
}

/// The `schema_registry` object: a Confluent-compatible schema registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaRegistryConfig {
    /// `http://` or `https://`, with an optional path prefix.
    pub url: String,
    pub auth: RegistryCredentials,
    /// A private CA for an `https` URL; `None`: the system trust store.
    pub ca_pem: Option<Secret>,
    /// A client certificate for mutual TLS.
    pub client: Option<ClientCertificate>,
}

/// How Sluice authenticates to the schema registry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryCredentials {
    None,
    /// `username`/`password`, or `api_key`/`api_secret` (Confluent Cloud), as HTTP basic auth.
    Basic {
        username: Secret,
        password: Secret,
    },
    Bearer(Secret),
}

/// Why a configuration was rejected. `Display` says what to fix; it never contains a secret.
#[derive(Debug)]
pub enum ConfigError {
    /// The file could not be read.
    Io { path: PathBuf, error: std::io::Error },
    /// The file is not a JSON object, or has duplicate keys.
    Json(JsonError),
    /// A field is wrong; the message names the field and the fix.
    Invalid { field: String, message: String },
}

impl ConfigError {
    /// The field the error is about, when there is one.
    pub fn field(&self) -> Option<&str> {
        match self {
            ConfigError::Invalid { field, .. } => Some(field),
            _ => None,
        }
    }

    fn invalid(field: &str, message: impl Into<String>) -> Self {
        ConfigError::Invalid { field: field.to_string(), message: message.into() }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // The cause (the `io::Error`, the `JsonError`) is the `source()`.
            ConfigError::Io { path, .. } => {
                write!(f, "cannot read the configuration file {} (check the path and its permissions)", path.display())
            }
            ConfigError::Json(_) => {
                f.write_str("the configuration is not usable (it must be one JSON object with each field once)")
            }
            ConfigError::Invalid { message, .. } => f.write_str(message),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ConfigError::Io { error, .. } => Some(error),
            ConfigError::Json(error) => Some(error),
            ConfigError::Invalid { .. } => None,
        }
    }
}

/// Text that must not be shown: its `Debug` and `Display` print `<redacted>`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Secret(value.into())
    }

    /// The secret itself, for the one place that needs it (the TLS or SASL handshake).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// A bootstrap address as written, split into host and port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerAddress {
    pub host: String,
    pub port: u16,
}

impl fmt::Display for BrokerAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// TLS is on when this is present.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsConfig {
    /// Private CA certificates; `None` means the system trust store.
    pub ca_pem: Option<Secret>,
    /// Client certificate chain and key for mutual TLS.
    pub client: Option<ClientCertificate>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCertificate {
    pub cert_pem: Secret,
    pub key_pem: Secret,
}

/// The SASL mechanisms, as the wire client names them.
pub use sluice_wire::SaslMechanism;

/// SASL is on when this is present. The username is not secret; the password (or, for
/// OAUTHBEARER, a fixed token, held in `password` with an empty `username`) is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaslConfig {
    /// On the wire: `AWS_MSK_IAM` and OIDC are both OAUTHBEARER.
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: Secret,
    /// No warning for PLAIN without TLS.
    pub allow_plaintext: bool,
    /// OAUTHBEARER tokens from a token endpoint instead of `password`.
    pub oidc: Option<OidcSettings>,
    /// OAUTHBEARER tokens signed for AWS MSK IAM instead of `password`.
    pub aws: Option<AwsSettings>,
    /// OAUTHBEARER SASL extensions (KIP-342).
    pub extensions: Vec<(String, String)>,
}

/// `sasl_oauthbearer_*`: the OAuth client-credentials grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OidcSettings {
    pub token_endpoint_url: String,
    pub client_id: String,
    pub client_secret: Secret,
    pub scope: Option<String>,
    pub ca_pem: Option<Secret>,
}

/// `sasl_mechanism: AWS_MSK_IAM` with `aws_*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AwsSettings {
    pub region: String,
    pub role_arn: Option<String>,
    pub role_session_name: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartPosition {
    Earliest,
    Latest,
    /// The consumer group's committed offset, else the log start (needs a group).
    Group,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnMalformed {
    Fail,
    DeadLetter,
}

/// When continuous mode cuts an epoch: whichever limit is reached first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochLimits {
    pub max_records: u64,
    pub max_bytes: u64,
    pub max_ms: u64,
}

/// Timeouts and retries of the connection to the brokers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NetworkLimits {
    pub request_timeout_ms: u64,
    pub connect_timeout_ms: u64,
    pub retry_backoff_ms: u64,
    pub retry_backoff_max_ms: u64,
    /// How long one operation may keep retrying, counted from its first attempt.
    pub retry_budget_ms: u64,
}

impl NetworkLimits {
    /// The wire client's retry policy for these limits.
    pub fn retry_policy(&self) -> RetryPolicy {
        RetryPolicy::new(
            Duration::from_millis(self.retry_backoff_ms),
            Duration::from_millis(self.retry_backoff_max_ms),
            Duration::from_millis(self.retry_budget_ms),
        )
    }

    /// The producer settings for a connection with these limits (`sluice write`, `sluice
    /// mirror`): its requests wait `request_timeout_ms` and retry with the connection's backoff,
    /// and a record may take `retry_budget_ms` from `send` to its answer (`delivery.timeout.ms`;
    /// at least linger plus the request timeout). Before, the producer kept the library's
    /// defaults whatever the connection said, so a short `request_timeout_ms` or budget chosen
    /// to notice an outage quickly did not apply to anything the producer sent.
    pub fn producer_config(&self, compression: Compression) -> ProducerConfig {
        let config = ProducerConfig::default()
            .with_compression(compression)
            .with_request_timeout(Duration::from_millis(self.request_timeout_ms))
            .with_retry(self.retry_policy());
        let floor = config.linger + config.request_timeout;
        let delivery = Duration::from_millis(self.retry_budget_ms).max(floor);
        config.with_delivery_timeout(delivery)
    }
}

/// Fetch request limits. Kafka may still return one oversized first record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchLimits {
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub max_wait_ms: i32,
}

/// The connection, network and fetch fields: part of every `sluice read` configuration, and
/// all that a `sluice mirror` `source` or `target` object takes.
pub const CONNECTION_FIELDS: &[&str] = &[
    "brokers",
    "client_id",
    "tls_enabled",
    "tls_ca_pem",
    "tls_cert_pem",
    "tls_key_pem",
    "sasl_mechanism",
    "sasl_username",
    "sasl_password",
    "sasl_oauth_token",
    "sasl_allow_plaintext",
    "sasl_oauthbearer_token_endpoint_url",
    "sasl_oauthbearer_client_id",
    "sasl_oauthbearer_client_secret",
    "sasl_oauthbearer_scope",
    "sasl_oauthbearer_extensions",
    "sasl_oauthbearer_ca_pem",
    "aws_region",
    "aws_role_arn",
    "aws_role_session_name",
    "preset",
    "namespace",
    "connection_string_env",
    "fetch_max_bytes",
    "partition_max_bytes",
    "fetch_max_wait_ms",
    "request_timeout_ms",
    "connect_timeout_ms",
    "retry_backoff_ms",
    "retry_backoff_max_ms",
    "retry_budget_ms",
];

/// The fields of a `sluice read` configuration besides [`CONNECTION_FIELDS`].
const READ_FIELDS: &[&str] = &[
    "topics",
    "schema_registry",
    "start_position",
    "connection_id",
    "epoch_max_records",
    "epoch_max_bytes",
    "epoch_max_ms",
    "on_malformed",
    "destination_dir",
    "destination",
];

impl Config {
    /// Reads and validates the file at `path`, substituting `${VAR}` from the process environment.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text =
            std::fs::read_to_string(path).map_err(|error| ConfigError::Io { path: path.to_path_buf(), error })?;
        Config::from_json_str(&text, |name| std::env::var(name).ok())
    }

    /// Validates configuration text; `env_lookup` resolves `${VAR}` (tests pass a map).
    pub fn from_json_str(text: &str, env_lookup: impl Fn(&str) -> Option<String>) -> Result<Config, ConfigError> {
        let value = parse_strict(text.as_bytes()).map_err(ConfigError::Json)?;
        let Value::Object(mut fields) = value else {
            return Err(ConfigError::Json(JsonError::Syntax("the top level is not an object".to_string())));
        };
        reject_unknown_fields(&fields)?;
        for (name, value) in fields.iter_mut() {
            substitute_in_value(name, value, &env_lookup)?;
        }
        expand_preset(&mut fields, &env_lookup)?;
        let mut fields = Fields(fields);

        let brokers = fields.brokers()?;
        let client_id = fields.string("client_id")?.unwrap_or_else(|| "sluice".to_string());
        if client_id.is_empty() {
            return Err(ConfigError::invalid(
                "client_id",
                "`client_id` is empty: remove it to use `sluice`, or give a name",
            ));
        }
        let tls = fields.tls()?;
        let sasl = fields.sasl()?;
        let (topics, payloads) = fields.topics()?;
        let schema_registry = fields.schema_registry()?;
        if schema_registry.is_none() {
            if let Some((topic, payload)) = payloads.iter().find(|(_, p)| p.uses_registry()) {
                let setting = match payload.key_format {
                    Some(key)
                        if !matches!(
                            payload.format,
                            PayloadFormat::Avro | PayloadFormat::Protobuf | PayloadFormat::JsonSchema
                        ) =>
                    {
                        format!("key_format: {}", key.name())
                    }
                    _ => format!("format: {}", payload.format.name()),
                };
                return Err(ConfigError::invalid(
                    "schema_registry",
                    format!(
                        "topic {topic} has `{setting}` but there is no `schema_registry`: add \
                         `\"schema_registry\": {{\"url\": \"https://registry:8081\"}}`, or use another format",
                    ),
                ));
            }
        }
        let start_position = match fields.string("start_position")?.as_deref() {
            None | Some("earliest") => StartPosition::Earliest,
            Some("latest") => StartPosition::Latest,
            Some("group") => StartPosition::Group,
            Some(other) => {
                return Err(ConfigError::invalid(
                    "start_position",
                    format!(
                        "`start_position` is \"{other}\": use \"earliest\", \"latest\" or (with `group_id`) \"group\""
                    ),
                ))
            }
        };
        let connection_id = fields.string("connection_id")?;
        if let Some(id) = &connection_id {
            if !is_connection_id(id) {
                return Err(ConfigError::invalid(
                    "connection_id",
                    "`connection_id` must be 1 to 128 characters from A-Z, a-z, 0-9, `.`, `_` and `-`: \
                     use a stable name, or remove it to have one generated",
                ));
            }
        }
        let epoch = EpochLimits {
            max_records: fields.positive("epoch_max_records", 10_000, u64::MAX)?,
            max_bytes: fields.positive("epoch_max_bytes", 16 << 20, u64::MAX)?,
            max_ms: fields.positive("epoch_max_ms", 1_000, u64::MAX)?,
        };
        let int32 = i32::MAX as u64;
        let fetch = FetchLimits {
            max_bytes: fields.positive("fetch_max_bytes", 4 << 20, int32)? as i32,
            partition_max_bytes: fields.positive("partition_max_bytes", 1 << 20, int32)? as i32,
            max_wait_ms: fields.positive("fetch_max_wait_ms", 500, int32)? as i32,
        };
        if fetch.partition_max_bytes > fetch.max_bytes {
            return Err(ConfigError::invalid(
                "partition_max_bytes",
                format!(
                    "`partition_max_bytes` ({}) is larger than `fetch_max_bytes` ({}): lower it or raise `fetch_max_bytes`",
                    fetch.partition_max_bytes, fetch.max_bytes
                ),
            ));
        }
        // A day at most: beyond that a "timeout" no longer bounds anything a user would wait for.
        let day = 86_400_000;
        let network = NetworkLimits {
            request_timeout_ms: fields.positive("request_timeout_ms", 30_000, day)?,
            connect_timeout_ms: fields.positive("connect_timeout_ms", 10_000, day)?,
            retry_backoff_ms: fields.positive("retry_backoff_ms", 100, day)?,
            retry_backoff_max_ms: fields.positive("retry_backoff_max_ms", 2_000, day)?,
            retry_budget_ms: fields.positive("retry_budget_ms", 60_000, 30 * day)?,
        };
        if network.retry_backoff_max_ms < network.retry_backoff_ms {
            return Err(ConfigError::invalid(
                "retry_backoff_max_ms",
                format!(
                    "`retry_backoff_max_ms` ({}) is below `retry_backoff_ms` ({}): raise it or lower `retry_backoff_ms`",
                    network.retry_backoff_max_ms, network.retry_backoff_ms
                ),
            ));
        }
        let on_malformed = match fields.string("on_malformed")?.as_deref() {
            None | Some("fail") => OnMalformed::Fail,
            Some("dead_letter") => OnMalformed::DeadLetter,
            Some(other) => {
                return Err(ConfigError::invalid(
                    "on_malformed",
                    format!("`on_malformed` is \"{other}\": use \"fail\" or \"dead_letter\""),
                ))
            }
        };
        let destination_dir =
            PathBuf::from(fields.string("destination_dir")?.unwrap_or_else(|| "sluice-output".into()));
        let destination = fields.destination()?;
        let group = fields.group()?;
        if group.is_none() && start_position == StartPosition::Group {
            return Err(ConfigError::invalid(
                "start_position",
                "`start_position` is \"group\" but no group is configured: set `group_id` (or `group_id_prefix`), \
                 or use \"earliest\" or \"latest\"",
            ));
        }

        Ok(Config {
            brokers,
            client_id,
            tls,
            sasl,
            topics,
            payloads,
            schema_registry,
            start_position,
            connection_id,
            epoch,
            fetch,
            network,
            on_malformed,
            destination_dir,
            destination,
            group,
        })
    }

    /// How `topic`'s values are decoded: its `topics` object, else JSON.
    pub fn payload(&self, topic: &str) -> TopicPayload {
        self.payloads.get(topic).cloned().unwrap_or_else(|| TopicPayload::json(topic))
    }

    /// Where `sluice read` writes: `dest` (`--dest`: a `postgres://` URL, else a directory),
    /// else the `destination` object, else `destination_dir`. A URL's password comes from it or
    /// from `PGPASSWORD` (looked up with `env_lookup`).
    pub fn destination_target(
        &self,
        dest: Option<&str>,
        env_lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<DestinationTarget, ConfigError> {
        let postgres = match dest {
            Some("") => {
                return Err(ConfigError::invalid("--dest", "`--dest` is empty: give a directory or a postgres:// URL"))
            }
            Some(url) if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                let mut postgres = PostgresConfig::from_url("--dest", url)?;
                if postgres.password.is_none() {
                    postgres.password = env_lookup("PGPASSWORD").filter(|p| !p.is_empty()).map(Secret);
                }
                postgres
            }
            Some(path) => return Ok(DestinationTarget::Directory(PathBuf::from(path))),
            None => match &self.destination {
                Some(postgres) => postgres.clone(),
                None => return Ok(DestinationTarget::Directory(self.destination_dir.clone())),
            },
        };
        Ok(DestinationTarget::Postgres(Box::new(PostgresSettings {
            connection: postgres,
            connect_timeout: Duration::from_millis(self.network.connect_timeout_ms),
            retry_budget: Duration::from_millis(self.network.retry_budget_ms),
        })))
    }
}

/// The `destination` object of type `postgres` (or a `postgres://` URL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PostgresConfig {
    pub host: String,
    pub port: u16,
    pub dbname: String,
    pub user: String,
    pub password: Option<Secret>,
    /// TLS with a verified server certificate: `Some(private CA PEM, or None for the system store)`.
    pub tls: Option<Option<Secret>>,
    pub schema: String,
    pub table_prefix: String,
}

impl PostgresConfig {
    /// `postgres[ql]://[user[:password]@]host[:port][/dbname][?sslmode=..&schema=..&table_prefix=..]`;
    /// user and password may be percent-encoded. `field` names where the URL came from.
    pub fn from_url(field: &str, url: &str) -> Result<PostgresConfig, ConfigError> {
        let invalid = |detail: &str| {
            ConfigError::invalid(
                field,
                format!(
                    "`{field}` is not a usable PostgreSQL URL ({detail}); write \
                     postgres://user@host:port/dbname, with the password in PGPASSWORD"
                ),
            )
        };
        let rest = url
            .strip_prefix("postgres://")
            .or_else(|| url.strip_prefix("postgresql://"))
            .ok_or_else(|| invalid("it must start with postgres://"))?;
        let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
        let (authority, dbname) = rest.split_once('/').unwrap_or((rest, ""));
        let (userinfo, hostport) = match authority.rsplit_once('@') {
            Some((userinfo, hostport)) => (Some(userinfo), hostport),
            None => (None, authority),
        };
        let (user, password) = match userinfo {
            Some(info) => match info.split_once(':') {
                Some((user, password)) => (percent_decode(user), Some(percent_decode(password))),
                None => (percent_decode(info), None),
            },
            None => (None, None),
        };
        let user = user.ok_or_else(|| invalid("bad percent-encoding in the user"))?;
        let password = match password {
            Some(Some(password)) => Some(password),
            Some(None) => return Err(invalid("bad percent-encoding in the password")),
            None => None,
        };
        let (host, port) = if let Some(bracketed) = hostport.strip_prefix('[') {
            let (host, after) = bracketed.split_once(']').ok_or_else(|| invalid("an unclosed [ in the host"))?;
            (host.to_string(), after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((host, port)) => (host.to_string(), Some(port)),
                None => (hostport.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err(invalid("no host"));
        }
        let port = match port {
            None => 5432,
            Some(port) => port.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| invalid("a bad port"))?,
        };
        let user = if user.is_empty() { "postgres".to_string() } else { user };
        let dbname = percent_decode(dbname).ok_or_else(|| invalid("bad percent-encoding in the database name"))?;
        let dbname = if dbname.is_empty() { user.clone() } else { dbname };
        let mut config = PostgresConfig {
            host,
            port,
            dbname,
            user,
            password: password.filter(|p| !p.is_empty()).map(Secret),
            tls: None,
            schema: "public".to_string(),
            table_prefix: String::new(),
        };
        for pair in query.split('&').filter(|pair| !pair.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value).ok_or_else(|| invalid("bad percent-encoding in a parameter"))?;
            match key {
                "sslmode" => match value.as_str() {
                    "disable" => config.tls = None,
                    // Sluice always verifies the server's certificate and name.
                    "require" | "verify-ca" | "verify-full" => config.tls = Some(None),
                    _ => return Err(invalid("sslmode must be disable, require, verify-ca or verify-full")),
                },
                "schema" => config.schema = value,
                "table_prefix" => config.table_prefix = value,
                other => {
                    return Err(invalid(&format!(
                        "unknown parameter \"{other}\"; Sluice takes sslmode, schema and table_prefix"
                    )))
                }
            }
        }
        config.check(field)?;
        Ok(config)
    }

    fn check(&self, field: &str) -> Result<(), ConfigError> {
        for (what, name) in [("schema", &self.schema), ("database", &self.dbname), ("user", &self.user)] {
            if name.is_empty() || name.len() > 63 || name.contains('\0') {
                return Err(ConfigError::invalid(
                    field,
                    format!("the PostgreSQL {what} name must be 1 to 63 bytes without NUL"),
                ));
            }
        }
        if self.table_prefix.len() > 32 || self.table_prefix.contains('\0') {
            return Err(ConfigError::invalid(field, "`table_prefix` must be at most 32 bytes, without NUL"));
        }
        if self.schema == "_sluice" {
            return Err(ConfigError::invalid(
                field,
                "the schema `_sluice` is Sluice's own bookkeeping: choose another",
            ));
        }
        Ok(())
    }
}

/// `%XX` sequences decoded; `None` for a bad sequence or bytes that are not UTF-8.
fn percent_decode(text: &str) -> Option<String> {
    let mut out = Vec::with_capacity(text.len());
    let mut bytes = text.bytes();
    while let Some(byte) = bytes.next() {
        if byte == b'%' {
            let hex = [bytes.next()?, bytes.next()?];
            out.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            out.push(byte);
        }
    }
    String::from_utf8(out).ok()
}

/// Expands `preset` into the connection fields it stands for, before anything is validated or
/// connected. `event-hubs` (as Azure documents its Kafka endpoint): `namespace` + `connection_string_env` give
/// brokers `<namespace>.servicebus.windows.net:9093`, TLS with the system trust store, and SASL
/// PLAIN with the fixed user `$ConnectionString` and the connection string as password.
fn expand_preset(
    fields: &mut Map<String, Value>,
    env_lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    let text = |fields: &Map<String, Value>, name: &str| -> Result<Option<String>, ConfigError> {
        match fields.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(Some(text.trim().to_string())),
            Some(_) => Err(ConfigError::invalid(name, format!("`{name}` must be a non-empty string"))),
        }
    };
    let preset = text(fields, "preset")?;
    let namespace = text(fields, "namespace")?;
    let connection_string_env = text(fields, "connection_string_env")?;
    let Some(preset) = preset else {
        for (name, set) in
            [("namespace", namespace.is_some()), ("connection_string_env", connection_string_env.is_some())]
        {
            if set {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` belongs to a preset: add `\"preset\": \"event-hubs\"` or remove `{name}`"),
                ));
            }
        }
        return Ok(());
    };
    if preset != "event-hubs" {
        return Err(ConfigError::invalid(
            "preset",
            format!("`preset` is \"{preset}\", which Sluice does not know: the only preset is \"event-hubs\""),
        ));
    }
    for name in ["brokers", "tls_enabled", "tls_ca_pem", "sasl_mechanism", "sasl_username", "sasl_password"] {
        if fields.contains_key(name) {
            return Err(ConfigError::invalid(
                name,
                format!("`{name}` cannot be combined with `preset: event-hubs`, which sets it: remove `{name}`"),
            ));
        }
    }
    let namespace = namespace.ok_or_else(|| {
        ConfigError::invalid(
            "namespace",
            "`preset: event-hubs` needs `namespace`: the Event Hubs namespace, without .servicebus.windows.net",
        )
    })?;
    let valid_namespace = namespace.len() <= 63
        && namespace.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
        && !namespace.contains(".servicebus.");
    if !valid_namespace {
        return Err(ConfigError::invalid(
            "namespace",
            format!("`namespace` is \"{namespace}\": give the bare namespace name (letters, digits and `-`), without .servicebus.windows.net"),
        ));
    }
    let variable = connection_string_env.ok_or_else(|| {
        ConfigError::invalid(
            "connection_string_env",
            "`preset: event-hubs` needs `connection_string_env`: the name of the environment variable holding the \
             namespace's connection string",
        )
    })?;
    let connection_string = env_lookup(&variable).filter(|value| !value.is_empty()).ok_or_else(|| {
        ConfigError::invalid(
            "connection_string_env",
            format!("`connection_string_env` names {variable}, which is not set: export the Event Hubs connection string as {variable}"),
        )
    })?;
    fields.remove("preset");
    fields.remove("namespace");
    fields.remove("connection_string_env");
    fields.insert(
        "brokers".to_string(),
        Value::Array(vec![Value::String(format!("{namespace}.servicebus.windows.net:9093"))]),
    );
    fields.insert("tls_enabled".to_string(), Value::Bool(true));
    fields.insert("sasl_mechanism".to_string(), Value::String("PLAIN".to_string()));
    fields.insert("sasl_username".to_string(), Value::String("$ConnectionString".to_string()));
    fields.insert("sasl_password".to_string(), Value::String(connection_string));
    Ok(())
}

fn reject_unknown_fields(fields: &Map<String, Value>) -> Result<(), ConfigError> {
    for name in fields.keys() {
        let known = name.as_str();
        if [CONNECTION_FIELDS, READ_FIELDS, GROUP_FIELDS].iter().any(|fields| fields.contains(&known)) {
            continue;
        }
        let message = match name.as_str() {
            "retry_max_attempts" => replaced_retry_max_attempts(fields),
            "tls_ca_file" | "tls_cert_file" | "tls_key_file" => {
                let pem = name.replace("_file", "_pem");
                format!("unknown field `{name}`: Sluice takes certificates as pasted PEM text; put the PEM in `{pem}`")
            }
            _ => format!(
                "unknown field `{name}`: remove it or fix its spelling; known fields are {}",
                CONNECTION_FIELDS.iter().chain(READ_FIELDS).chain(GROUP_FIELDS).copied().collect::<Vec<_>>().join(", ")
            ),
        };
        return Err(ConfigError::invalid(name, message));
    }
    Ok(())
}

/// The rejection of the field `retry_budget_ms` replaced: an attempt count meant little when
/// the pauses between attempts grow, so the budget is now time. The suggested budget is what the
/// attempts took at the longest pause (`retry_backoff_max_ms`, default 2000 ms).
fn replaced_retry_max_attempts(fields: &Map<String, Value>) -> String {
    let integer = |name: &str| match fields.get(name) {
        Some(Value::Number(number)) => number.to_string().parse::<u64>().ok(),
        Some(Value::String(text)) => text.parse::<u64>().ok(),
        _ => None,
    };
    let mut message = "`retry_max_attempts` was replaced by `retry_budget_ms`, how long one operation may keep \
                       retrying in milliseconds (default 60000): remove `retry_max_attempts`"
        .to_string();
    if let Some(attempts) = integer("retry_max_attempts").filter(|n| *n > 0) {
        let pause = integer("retry_backoff_max_ms").unwrap_or(2_000);
        let budget = attempts.saturating_mul(pause).clamp(1, 30 * 86_400_000);
        message.push_str(&format!(
            " and, to keep retrying about as long as {attempts} attempts did, set `\"retry_budget_ms\": {budget}`"
        ));
    } else {
        message.push_str(" and set `retry_budget_ms` if 60 seconds is not right");
    }
    message
}

/// Replaces `${VAR}` in every string inside `value`; `field` names the top-level field.
fn substitute_in_value(
    field: &str,
    value: &mut Value,
    env_lookup: &impl Fn(&str) -> Option<String>,
) -> Result<(), ConfigError> {
    match value {
        Value::String(text) => *text = substitute(field, text, env_lookup)?,
        Value::Array(items) => {
            for item in items {
                substitute_in_value(field, item, env_lookup)?;
            }
        }
        Value::Object(map) => {
            for item in map.values_mut() {
                substitute_in_value(field, item, env_lookup)?;
            }
        }
        _ => {}
    }
    Ok(())
}

fn substitute(field: &str, text: &str, env_lookup: &impl Fn(&str) -> Option<String>) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        if let Some(tail) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = tail;
        } else if let Some(tail) = after.strip_prefix("${") {
            let Some(end) = tail.find('}') else {
                return Err(ConfigError::invalid(
                    field,
                    format!("`{field}` has a `${{` without a closing `}}`: write `${{NAME}}`, or `$${{` for a literal `${{`"),
                ));
            };
            let name = &tail[..end];
            let valid = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ConfigError::invalid(
                    field,
                    format!(
                        "`{field}` refers to `${{{name}}}`, which is not a variable name: use letters, digits and `_`"
                    ),
                ));
            }
            match env_lookup(name) {
                Some(value) => out.push_str(&value),
                None => {
                    return Err(ConfigError::invalid(
                        field,
                        format!("`{field}` refers to the environment variable {name}, which is not set: set it, or write the value into the file"),
                    ))
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// One object of `topics`: `{"name", "format", "value_subject"}`.
fn topic_object(object: Map<String, Value>) -> Result<(String, TopicPayload), ConfigError> {
    const KNOWN: &[&str] = &["name", "format", "value_subject", "value_message", "key_format"];
    let name = match object.get("name") {
        Some(Value::String(name)) => name.clone(),
        _ => {
            return Err(ConfigError::invalid(
                "topics",
                "a `topics` object needs a string `name`, e.g. {\"name\": \"orders\", \"format\": \"avro\"}",
            ))
        }
    };
    if let Some(unknown) = object.keys().find(|key| !KNOWN.contains(&key.as_str())) {
        return Err(ConfigError::invalid(
            "topics",
            format!("topic {name}: unknown field `{unknown}`; a `topics` object takes {}", KNOWN.join(", ")),
        ));
    }
    let text = |key: &str| match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(ConfigError::invalid("topics", format!("topic {name}: `{key}` must be a string"))),
    };
    let format = match text("format")?.as_deref() {
        None | Some("json") => PayloadFormat::Json,
        Some("avro") => PayloadFormat::Avro,
        Some("json_schema") => PayloadFormat::JsonSchema,
        Some("raw") => PayloadFormat::Raw,
        Some("protobuf") => PayloadFormat::Protobuf,
        Some(other) => {
            return Err(ConfigError::invalid(
                "topics",
                format!("topic {name}: `format` is \"{other}\": use \"json\" (the default), \"avro\", \"protobuf\", \"json_schema\" or \"raw\""),
            ))
        }
    };
    let value_subject = text("value_subject")?;
    if let Some(subject) = &value_subject {
        if !matches!(format, PayloadFormat::Avro | PayloadFormat::Protobuf) {
            return Err(ConfigError::invalid(
                "topics",
                format!("topic {name}: `value_subject` is for `format: avro` and `format: protobuf`; remove it or set the format"),
            ));
        }
        if subject.is_empty() {
            return Err(ConfigError::invalid(
                "topics",
                format!("topic {name}: `value_subject` is empty: remove it for {name}-value"),
            ));
        }
    }
    let value_subject = value_subject.unwrap_or_else(|| format!("{name}-value"));
    let value_message = text("value_message")?;
    if let Some(message) = &value_message {
        if format != PayloadFormat::Protobuf {
            return Err(ConfigError::invalid(
                "topics",
                format!("topic {name}: `value_message` is for `format: protobuf`; remove it or set the format"),
            ));
        }
        if message.is_empty() || message.starts_with('.') {
            return Err(ConfigError::invalid(
                "topics",
                format!("topic {name}: `value_message` must be a message's full name without a leading dot, like `shop.Order`"),
            ));
        }
    }
    let key_format = match text("key_format")?.as_deref() {
        None | Some("raw") => None,
        Some("json") => Some(PayloadFormat::Json),
        Some("avro") => Some(PayloadFormat::Avro),
        Some("json_schema") => Some(PayloadFormat::JsonSchema),
        Some("protobuf") => Some(PayloadFormat::Protobuf),
        Some(other) => {
            return Err(ConfigError::invalid(
                "topics",
                format!("topic {name}: `key_format` is \"{other}\": use \"raw\" (the default: keys stay bytes), \"json\", \"avro\", \"protobuf\" or \"json_schema\""),
            ))
        }
    };
    Ok((name, TopicPayload { format, value_subject, value_message, key_format }))
}

fn is_connection_id(id: &str) -> bool {
    (1..=128).contains(&id.len()) && id.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// Kafka's own rule for topic names: 1 to 249 of `[A-Za-z0-9._-]`, and not `.` or `..`.
pub fn is_valid_topic_name(name: &str) -> bool {
    (1..=249).contains(&name.len())
        && name != "."
        && name != ".."
        && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
}

/// The top-level fields, taken one by one so each is read once.
struct Fields(Map<String, Value>);

/// The group fields (`group_id`, `group_id_prefix`, `group_protocol`, `group_instance_id`,
/// `group_session_timeout_ms`, `group_heartbeat_interval_ms`) taken out of `fields` and checked
/// as `sluice read` checks them; `None` without a group.
pub(crate) fn group_settings(fields: &mut Map<String, Value>) -> Result<Option<GroupSettings>, ConfigError> {
    let mut taken = Fields(std::mem::take(fields));
    let settings = taken.group();
    *fields = taken.0;
    settings
}

/// The names [`group_settings`] reads.
pub(crate) const GROUP_FIELDS: &[&str] = &[
    "group_id",
    "group_id_prefix",
    "group_protocol",
    "group_instance_id",
    "group_session_timeout_ms",
    "group_heartbeat_interval_ms",
];

impl Fields {
    fn string(&mut self, name: &str) -> Result<Option<String>, ConfigError> {
        match self.0.remove(name) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(ConfigError::invalid(name, format!("`{name}` must be a string"))),
        }
    }

    fn secret(&mut self, name: &str) -> Result<Option<Secret>, ConfigError> {
        Ok(self.string(name)?.filter(|text| !text.is_empty()).map(Secret))
    }

    fn bool(&mut self, name: &str) -> Result<bool, ConfigError> {
        match self.0.remove(name) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(flag)) => Ok(flag),
            Some(Value::String(text)) if text == "true" || text == "false" => Ok(text == "true"),
            Some(_) => Err(ConfigError::invalid(name, format!("`{name}` must be true or false"))),
        }
    }

    /// A positive integer up to `max`, from a JSON integer or a string of digits.
    fn positive(&mut self, name: &str, default: u64, max: u64) -> Result<u64, ConfigError> {
        let text = match self.0.remove(name) {
            None | Some(Value::Null) => return Ok(default),
            Some(Value::Number(number)) => number.to_string(),
            Some(Value::String(text)) => text,
            Some(_) => String::new(),
        };
        match text.parse::<u64>() {
            Ok(n) if n >= 1 && n <= max => Ok(n),
            _ => Err(ConfigError::invalid(
                name,
                format!("`{name}` must be a whole number from 1 to {max}; remove it for the default {default}"),
            )),
        }
    }

    /// The `destination` object: `{"type": "postgres", "url": ... | "host", "port", "dbname",
    /// "user"; "password", "tls_enabled", "tls_ca_pem", "schema", "table_prefix"}`.
    fn destination(&mut self) -> Result<Option<PostgresConfig>, ConfigError> {
        let field = "destination";
        let object =
            match self.0.remove(field) {
                None | Some(Value::Null) => return Ok(None),
                Some(Value::Object(object)) => object,
                Some(_) => return Err(ConfigError::invalid(
                    field,
                    "`destination` must be an object such as {\"type\": \"postgres\", \"url\": \"postgres://...\"}; \
                     for a directory use `destination_dir`",
                )),
            };
        const KNOWN: &[&str] = &[
            "type",
            "url",
            "host",
            "port",
            "dbname",
            "user",
            "password",
            "tls_enabled",
            "tls_ca_pem",
            "schema",
            "table_prefix",
        ];
        if let Some(unknown) = object.keys().find(|key| !KNOWN.contains(&key.as_str())) {
            return Err(ConfigError::invalid(
                field,
                format!("unknown field `destination.{unknown}`; the fields are {}", KNOWN.join(", ")),
            ));
        }
        let mut inner = Fields(object);
        let name = |key: &str| format!("destination.{key}");
        let text = |inner: &mut Fields, key: &str| -> Result<Option<String>, ConfigError> {
            inner.string(key).map_err(|_| ConfigError::invalid(&name(key), format!("`{}` must be a string", name(key))))
        };
        match text(&mut inner, "type")?.as_deref() {
            Some("postgres") => {}
            Some(other) => {
                return Err(ConfigError::invalid(
                    &name("type"),
                    format!("`destination.type` is \"{other}\": the only type is \"postgres\" (a directory is `destination_dir`)"),
                ))
            }
            None => return Err(ConfigError::invalid(&name("type"), "`destination.type` is missing: set it to \"postgres\"")),
        }
        let url = text(&mut inner, "url")?;
        let host = text(&mut inner, "host")?;
        let port = inner.0.remove("port");
        let dbname = text(&mut inner, "dbname")?;
        let user = text(&mut inner, "user")?;
        let mut config = match (url, &host) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(&name("host"), "give either `destination.url` or `destination.host`, not both"))
            }
            (Some(url), None) => {
                if port.is_some() || dbname.is_some() || user.is_some() {
                    return Err(ConfigError::invalid(
                        &name("url"),
                        "`destination.url` already names the host, port, database and user: remove the separate fields",
                    ));
                }
                PostgresConfig::from_url(&name("url"), &url)?
            }
            (None, Some(host)) => {
                let port = match port {
                    None | Some(Value::Null) => 5432,
                    Some(Value::Number(n)) => n.to_string().parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                        ConfigError::invalid(&name("port"), "`destination.port` must be a port number (1 to 65535)")
                    })?,
                    Some(Value::String(s)) => s.parse::<u16>().ok().filter(|p| *p > 0).ok_or_else(|| {
                        ConfigError::invalid(&name("port"), "`destination.port` must be a port number (1 to 65535)")
                    })?,
                    Some(_) => {
                        return Err(ConfigError::invalid(&name("port"), "`destination.port` must be a port number (1 to 65535)"))
                    }
                };
                let user = user.unwrap_or_else(|| "postgres".to_string());
                PostgresConfig {
                    host: host.clone(),
                    port,
                    dbname: dbname.unwrap_or_else(|| user.clone()),
                    user,
                    password: None,
                    tls: None,
                    schema: "public".to_string(),
                    table_prefix: String::new(),
                }
            }
            (None, None) => {
                return Err(ConfigError::invalid(
                    &name("url"),
                    "the Postgres destination needs `destination.url` (postgres://user@host:port/dbname) or `destination.host`",
                ))
            }
        };
        if let Some(password) = inner
            .secret("password")
            .map_err(|_| ConfigError::invalid(&name("password"), "`destination.password` must be a string"))?
        {
            config.password = Some(password);
        }
        let tls_enabled = inner.bool("tls_enabled").map_err(|_| {
            ConfigError::invalid(&name("tls_enabled"), "`destination.tls_enabled` must be true or false")
        })?;
        let ca = inner
            .secret("tls_ca_pem")
            .map_err(|_| ConfigError::invalid(&name("tls_ca_pem"), "`destination.tls_ca_pem` must be a string"))?;
        if let Some(ca) = &ca {
            if !tls_enabled && config.tls.is_none() {
                return Err(ConfigError::invalid(
                    &name("tls_ca_pem"),
                    "`destination.tls_ca_pem` is set but TLS is not: set `\"tls_enabled\": true` in `destination`",
                ));
            }
            require_pem(&name("tls_ca_pem"), ca, "CERTIFICATE-----")?;
        }
        if tls_enabled || config.tls.is_some() {
            config.tls = Some(ca);
        }
        if let Some(schema) = text(&mut inner, "schema")? {
            config.schema = schema;
        }
        if let Some(prefix) = text(&mut inner, "table_prefix")? {
            config.table_prefix = prefix;
        }
        config.check(field)?;
        Ok(Some(config))
    }

    /// `group_id` / `group_id_prefix` and the settings that only mean something with one.
    fn group(&mut self) -> Result<Option<GroupSettings>, ConfigError> {
        let fixed = self.string("group_id")?;
        let prefix = self.string("group_id_prefix")?;
        let protocol = self.string("group_protocol")?;
        let instance_id = self.string("group_instance_id")?;
        let day = 86_400_000;
        let session_timeout_ms = self.positive("group_session_timeout_ms", 45_000, day)?;
        let heartbeat_interval_ms = self.positive("group_heartbeat_interval_ms", 3_000, day)?;
        let id = match (fixed, prefix) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::invalid(
                    "group_id_prefix",
                    "both `group_id` and `group_id_prefix` are set: keep one",
                ))
            }
            (Some(id), None) => GroupId::Fixed(id),
            (None, Some(prefix)) => GroupId::Prefix(prefix),
            (None, None) => {
                let stray = [("group_protocol", protocol.is_some()), ("group_instance_id", instance_id.is_some())];
                if let Some((field, _)) = stray.iter().find(|(_, set)| *set) {
                    return Err(ConfigError::invalid(
                        field,
                        format!(
                            "`{field}` is set but no group is: set `group_id` (or `group_id_prefix`), or remove it"
                        ),
                    ));
                }
                return Ok(None);
            }
        };
        let (field, text) = match &id {
            GroupId::Fixed(text) => ("group_id", text),
            GroupId::Prefix(text) => ("group_id_prefix", text),
        };
        if text.is_empty() || text.len() > 200 || text.chars().any(char::is_control) {
            return Err(ConfigError::invalid(field, format!("`{field}` must be 1 to 200 printable characters")));
        }
        let protocol = match protocol.as_deref() {
            None | Some("auto") => GroupProtocolSetting::Auto,
            Some("classic") => GroupProtocolSetting::Classic,
            Some("consumer") => GroupProtocolSetting::Consumer,
            Some(other) => {
                return Err(ConfigError::invalid(
                    "group_protocol",
                    format!("`group_protocol` is \"{other}\": use \"auto\", \"classic\" or \"consumer\""),
                ))
            }
        };
        if instance_id.as_deref() == Some("") {
            return Err(ConfigError::invalid(
                "group_instance_id",
                "`group_instance_id` is empty: give each worker its own stable id, or remove it",
            ));
        }
        if heartbeat_interval_ms >= session_timeout_ms {
            return Err(ConfigError::invalid(
                "group_heartbeat_interval_ms",
                format!(
                    "`group_heartbeat_interval_ms` ({heartbeat_interval_ms}) must be below `group_session_timeout_ms` \
                     ({session_timeout_ms}); a third of it is usual"
                ),
            ));
        }
        Ok(Some(GroupSettings { id, protocol, instance_id, session_timeout_ms, heartbeat_interval_ms }))
    }

    fn string_list(&mut self, name: &str) -> Result<Option<Vec<String>>, ConfigError> {
        let items = match self.0.remove(name) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(items)) => items,
            Some(_) => {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` must be a list of strings, e.g. [\"a\", \"b\"]"),
                ))
            }
        };
        items
            .into_iter()
            .map(|item| match item {
                Value::String(text) => Ok(text),
                _ => {
                    Err(ConfigError::invalid(name, format!("`{name}` must be a list of strings, e.g. [\"a\", \"b\"]")))
                }
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn brokers(&mut self) -> Result<Vec<BrokerAddress>, ConfigError> {
        let Some(list) = self.string_list("brokers")? else {
            return Err(ConfigError::invalid(
                "brokers",
                "`brokers` is missing: give the bootstrap addresses, e.g. \"brokers\": [\"localhost:9092\"]",
            ));
        };
        if list.is_empty() {
            return Err(ConfigError::invalid(
                "brokers",
                "`brokers` is empty: give at least one bootstrap address as \"host:port\"",
            ));
        }
        list.iter().map(|text| parse_broker(text)).collect()
    }

    /// `topics`: names, or objects `{"name", "format", "value_subject"}`, mixed freely.
    fn topics(&mut self) -> Result<(Vec<String>, BTreeMap<String, TopicPayload>), ConfigError> {
        let field = "topics";
        let shape =
            "`topics` must be a list of topic names or objects such as {\"name\": \"orders\", \"format\": \"avro\"}";
        let items = match self.0.remove(field) {
            None | Some(Value::Null) => return Ok((Vec::new(), BTreeMap::new())),
            Some(Value::Array(items)) => items,
            Some(_) => return Err(ConfigError::invalid(field, shape)),
        };
        let mut names = Vec::with_capacity(items.len());
        let mut payloads = BTreeMap::new();
        for item in items {
            let (name, payload) = match item {
                Value::String(name) => (name, None),
                Value::Object(object) => {
                    let (name, payload) = topic_object(object)?;
                    (name, Some(payload))
                }
                _ => return Err(ConfigError::invalid(field, shape)),
            };
            if !is_valid_topic_name(&name) {
                return Err(ConfigError::invalid(
                    field,
                    format!("`topics` has \"{name}\", which is not a Kafka topic name: use 1 to 249 characters from A-Z, a-z, 0-9, `.`, `_` and `-`"),
                ));
            }
            if names.contains(&name) {
                return Err(ConfigError::invalid(field, format!("`topics` names {name} twice: list each topic once")));
            }
            if let Some(payload) = payload {
                payloads.insert(name.clone(), payload);
            }
            names.push(name);
        }
        Ok((names, payloads))
    }

    /// The `schema_registry` object.
    fn schema_registry(&mut self) -> Result<Option<SchemaRegistryConfig>, ConfigError> {
        let field = "schema_registry";
        let object = match self.0.remove(field) {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Object(object)) => object,
            Some(_) => {
                return Err(ConfigError::invalid(
                    field,
                    "`schema_registry` must be an object such as {\"url\": \"https://registry:8081\"}",
                ))
            }
        };
        const KNOWN: &[&str] = &[
            "url",
            "username",
            "password",
            "api_key",
            "api_secret",
            "bearer_token",
            "tls_ca_pem",
            "tls_cert_pem",
            "tls_key_pem",
        ];
        if let Some(unknown) = object.keys().find(|key| !KNOWN.contains(&key.as_str())) {
            return Err(ConfigError::invalid(
                field,
                format!("unknown field `schema_registry.{unknown}`; the fields are {}", KNOWN.join(", ")),
            ));
        }
        let mut inner = Fields(object);
        let name = |key: &str| format!("schema_registry.{key}");
        let mut text = |key: &str| -> Result<Option<String>, ConfigError> {
            inner
                .string(key)
                .map(|value| value.filter(|v| !v.is_empty()))
                .map_err(|_| ConfigError::invalid(&name(key), format!("`{}` must be a string", name(key))))
        };
        let url = text("url")?;
        let username = text("username")?.map(Secret);
        let password = text("password")?.map(Secret);
        let api_key = text("api_key")?.map(Secret);
        let api_secret = text("api_secret")?.map(Secret);
        let bearer = text("bearer_token")?.map(Secret);
        let ca_pem = text("tls_ca_pem")?.map(Secret);
        let cert_pem = text("tls_cert_pem")?.map(Secret);
        let key_pem = text("tls_key_pem")?.map(Secret);
        // The URL is not quoted back: it may carry credentials (substituted from the environment).
        let url = url.ok_or_else(|| {
            ConfigError::invalid(
                &name("url"),
                "`schema_registry.url` is missing: give the registry's http:// or https:// URL",
            )
        })?;
        let https = url.starts_with("https://");
        let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else {
            return Err(ConfigError::invalid(
                &name("url"),
                "`schema_registry.url` must start with http:// or https://",
            ));
        };
        let authority = rest.split('/').next().unwrap_or_default();
        if authority.is_empty() {
            return Err(ConfigError::invalid(&name("url"), "`schema_registry.url` has no host"));
        }
        if authority.contains('@') {
            return Err(ConfigError::invalid(
                &name("url"),
                "`schema_registry.url` holds credentials (user@host): put them in `schema_registry.username` and `password` (as ${ENV})",
            ));
        }
        let pair = |a: &str, a_value: &Option<Secret>, b: &str, b_value: &Option<Secret>| match (
            a_value.is_some(),
            b_value.is_some(),
        ) {
            (true, false) => Err(ConfigError::invalid(
                &name(b),
                format!("`schema_registry.{a}` is set but `schema_registry.{b}` is missing: give both, or neither"),
            )),
            (false, true) => Err(ConfigError::invalid(
                &name(a),
                format!("`schema_registry.{b}` is set but `schema_registry.{a}` is missing: give both, or neither"),
            )),
            _ => Ok(()),
        };
        pair("username", &username, "password", &password)?;
        pair("api_key", &api_key, "api_secret", &api_secret)?;
        pair("tls_cert_pem", &cert_pem, "tls_key_pem", &key_pem)?;
        let auth = match (username.zip(password), api_key.zip(api_secret), bearer) {
            (None, None, None) => RegistryCredentials::None,
            (Some((username, password)), None, None) | (None, Some((username, password)), None) => {
                RegistryCredentials::Basic { username, password }
            }
            (None, None, Some(token)) => RegistryCredentials::Bearer(token),
            _ => {
                return Err(ConfigError::invalid(
                    field,
                    "`schema_registry` has more than one kind of credentials: give one of username/password, \
                     api_key/api_secret or bearer_token",
                ))
            }
        };
        if !https {
            let set = [("tls_ca_pem", &ca_pem), ("tls_cert_pem", &cert_pem)];
            if let Some((key, _)) = set.iter().find(|(_, value)| value.is_some()) {
                return Err(ConfigError::invalid(
                    &name(key),
                    format!("`schema_registry.{key}` is set but the URL is http://: use an https:// URL, or remove the certificate fields"),
                ));
            }
        }
        if let Some(ca) = &ca_pem {
            require_pem(&name("tls_ca_pem"), ca, "CERTIFICATE-----")?;
        }
        let client = match cert_pem.zip(key_pem) {
            Some((cert_pem, key_pem)) => {
                require_pem(&name("tls_cert_pem"), &cert_pem, "CERTIFICATE-----")?;
                require_pem(&name("tls_key_pem"), &key_pem, "PRIVATE KEY-----")?;
                Some(ClientCertificate { cert_pem, key_pem })
            }
            None => None,
        };
        Ok(Some(SchemaRegistryConfig { url, auth, ca_pem, client }))
    }

    fn tls(&mut self) -> Result<Option<TlsConfig>, ConfigError> {
        let enabled = self.bool("tls_enabled")?;
        let ca_pem = self.secret("tls_ca_pem")?;
        let cert_pem = self.secret("tls_cert_pem")?;
        let key_pem = self.secret("tls_key_pem")?;
        if !enabled {
            let set = [("tls_ca_pem", &ca_pem), ("tls_cert_pem", &cert_pem), ("tls_key_pem", &key_pem)];
            if let Some((name, _)) = set.iter().find(|(_, value)| value.is_some()) {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` is set but `tls_enabled` is false: set `\"tls_enabled\": true` or remove the certificate fields"),
                ));
            }
            return Ok(None);
        }
        if let Some(ca) = &ca_pem {
            require_pem("tls_ca_pem", ca, "CERTIFICATE-----")?;
        }
        let client = match (cert_pem, key_pem) {
            (None, None) => None,
            (Some(_), None) => {
                return Err(ConfigError::invalid(
                    "tls_key_pem",
                    "`tls_cert_pem` is set but `tls_key_pem` is missing: mutual TLS needs the client certificate chain and its private key; paste both, or remove `tls_cert_pem`",
                ))
            }
            (None, Some(_)) => {
                return Err(ConfigError::invalid(
                    "tls_cert_pem",
                    "`tls_key_pem` is set but `tls_cert_pem` is missing: mutual TLS needs the client certificate chain and its private key; paste both, or remove `tls_key_pem`",
                ))
            }
            (Some(cert_pem), Some(key_pem)) => {
                require_pem("tls_cert_pem", &cert_pem, "CERTIFICATE-----")?;
                require_pem("tls_key_pem", &key_pem, "PRIVATE KEY-----")?;
                Some(ClientCertificate { cert_pem, key_pem })
            }
        };
        Ok(Some(TlsConfig { ca_pem, client }))
    }

    fn sasl(&mut self) -> Result<Option<SaslConfig>, ConfigError> {
        let mechanism_text = self.string("sasl_mechanism")?;
        let username = self.string("sasl_username")?.filter(|name| !name.is_empty());
        let password = self.secret("sasl_password")?;
        let token = self.secret("sasl_oauth_token")?;
        let allow_plaintext = self.bool("sasl_allow_plaintext")?;
        let endpoint = self.string("sasl_oauthbearer_token_endpoint_url")?.filter(|text| !text.is_empty());
        let client_id = self.string("sasl_oauthbearer_client_id")?.filter(|text| !text.is_empty());
        let client_secret = self.secret("sasl_oauthbearer_client_secret")?;
        let scope = self.string("sasl_oauthbearer_scope")?.filter(|text| !text.is_empty());
        let extensions = self.extensions("sasl_oauthbearer_extensions")?;
        let oauth_ca_pem = self.secret("sasl_oauthbearer_ca_pem")?;
        let region = self.string("aws_region")?.filter(|text| !text.is_empty());
        let role_arn = self.string("aws_role_arn")?.filter(|text| !text.is_empty());
        let role_session_name = self.string("aws_role_session_name")?.filter(|text| !text.is_empty());
        let upper = mechanism_text.as_deref().map(str::to_ascii_uppercase);
        let aws_mechanism = upper.as_deref() == Some("AWS_MSK_IAM");
        let mechanism = match upper.as_deref() {
            None | Some("NONE") => None,
            Some("PLAIN") => Some(SaslMechanism::Plain),
            Some("SCRAM-SHA-256") => Some(SaslMechanism::ScramSha256),
            Some("SCRAM-SHA-512") => Some(SaslMechanism::ScramSha512),
            Some("OAUTHBEARER") | Some("AWS_MSK_IAM") => Some(SaslMechanism::OAuthBearer),
            Some(_) => {
                return Err(ConfigError::invalid(
                    "sasl_mechanism",
                    format!(
                        "`sasl_mechanism` is \"{}\": use one of none, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM",
                        mechanism_text.unwrap_or_default()
                    ),
                ))
            }
        };
        let oidc_fields = [
            ("sasl_oauthbearer_token_endpoint_url", endpoint.is_some()),
            ("sasl_oauthbearer_client_id", client_id.is_some()),
            ("sasl_oauthbearer_client_secret", client_secret.is_some()),
            ("sasl_oauthbearer_scope", scope.is_some()),
            ("sasl_oauthbearer_ca_pem", oauth_ca_pem.is_some()),
        ];
        let aws_fields = [
            ("aws_region", region.is_some()),
            ("aws_role_arn", role_arn.is_some()),
            ("aws_role_session_name", role_session_name.is_some()),
        ];
        if !aws_mechanism {
            if let Some((name, _)) = aws_fields.iter().find(|(_, set)| *set) {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` is set but `sasl_mechanism` is not AWS_MSK_IAM: set it to AWS_MSK_IAM or remove `{name}`"),
                ));
            }
        }
        if mechanism != Some(SaslMechanism::OAuthBearer) || aws_mechanism {
            let what = if aws_mechanism { "is AWS_MSK_IAM, which signs its own tokens" } else { "is not OAUTHBEARER" };
            if let Some((name, _)) = oidc_fields.iter().find(|(_, set)| *set) {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` is set but `sasl_mechanism` {what}: set it to OAUTHBEARER or remove `{name}`"),
                ));
            }
            if !extensions.is_empty() && !aws_mechanism {
                return Err(ConfigError::invalid(
                    "sasl_oauthbearer_extensions",
                    "`sasl_oauthbearer_extensions` is set but `sasl_mechanism` is not OAUTHBEARER: set it to OAUTHBEARER or remove the extensions",
                ));
            }
        }
        if mechanism == Some(SaslMechanism::OAuthBearer) {
            let label = if aws_mechanism { "AWS_MSK_IAM" } else { "OAUTHBEARER" };
            for (name, set) in [("sasl_username", username.is_some()), ("sasl_password", password.is_some())] {
                if set {
                    let fix = if aws_mechanism {
                        "AWS credentials come from the environment, web identity, ECS or EC2 metadata"
                    } else {
                        "put the token in `sasl_oauth_token`, or use `sasl_oauthbearer_token_endpoint_url` with a client id and secret"
                    };
                    return Err(ConfigError::invalid(
                        name,
                        format!("`{name}` does not apply to {label}: remove it ({fix})"),
                    ));
                }
            }
            let base = |password: Secret, oidc, aws| SaslConfig {
                mechanism: SaslMechanism::OAuthBearer,
                username: String::new(),
                password,
                allow_plaintext,
                oidc,
                aws,
                extensions: extensions.clone(),
            };
            if aws_mechanism {
                if token.is_some() {
                    return Err(ConfigError::invalid(
                        "sasl_oauth_token",
                        "`sasl_oauth_token` does not apply to AWS_MSK_IAM, which signs its own tokens: remove it",
                    ));
                }
                let region = region.ok_or_else(|| {
                    ConfigError::invalid(
                        "aws_region",
                        "`sasl_mechanism` is AWS_MSK_IAM but `aws_region` is missing: add the cluster's region (e.g. \"us-east-1\")",
                    )
                })?;
                if !region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-') {
                    return Err(ConfigError::invalid(
                        "aws_region",
                        format!("`aws_region` is \"{region}\", which is not an AWS region name: write it like \"us-east-1\""),
                    ));
                }
                if let Some(arn) = &role_arn {
                    if !arn.starts_with("arn:") || !arn.contains(":role/") {
                        return Err(ConfigError::invalid(
                            "aws_role_arn",
                            format!("`aws_role_arn` is \"{arn}\", which is not a role ARN: write it like \"arn:aws:iam::123456789012:role/msk-reader\""),
                        ));
                    }
                } else if role_session_name.is_some() {
                    return Err(ConfigError::invalid(
                        "aws_role_session_name",
                        "`aws_role_session_name` is set without `aws_role_arn`: add the role to assume, or remove it",
                    ));
                }
                if let Some(name) = &role_session_name {
                    let valid = (2..=64).contains(&name.len())
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || "+=,.@_-".contains(c));
                    if !valid {
                        return Err(ConfigError::invalid(
                            "aws_role_session_name",
                            format!("`aws_role_session_name` is \"{name}\": use 2 to 64 letters, digits and +=,.@_-"),
                        ));
                    }
                }
                return Ok(Some(base(
                    Secret(String::new()),
                    None,
                    Some(AwsSettings { region, role_arn, role_session_name }),
                )));
            }
            if let Some(endpoint) = endpoint {
                if token.is_some() {
                    return Err(ConfigError::invalid(
                        "sasl_oauth_token",
                        "`sasl_oauth_token` and `sasl_oauthbearer_token_endpoint_url` are both set: keep one (a fixed token, or tokens from the endpoint)",
                    ));
                }
                match sluice_wire::http::Url::parse(&endpoint) {
                    Err(problem) => {
                        return Err(ConfigError::invalid(
                            "sasl_oauthbearer_token_endpoint_url",
                            format!("`sasl_oauthbearer_token_endpoint_url` is not usable: the URL {problem}"),
                        ))
                    }
                    Ok(url) if !url.https && !url.is_loopback() => {
                        return Err(ConfigError::invalid(
                            "sasl_oauthbearer_token_endpoint_url",
                            "`sasl_oauthbearer_token_endpoint_url` must be https:// (the client secret would travel in clear)",
                        ))
                    }
                    Ok(_) => {}
                }
                let missing = |name: &str, example: &str| {
                    ConfigError::invalid(
                        name,
                        format!("`sasl_oauthbearer_token_endpoint_url` is set but `{name}` is missing: add it (e.g. {example})"),
                    )
                };
                let client_id = client_id.ok_or_else(|| missing("sasl_oauthbearer_client_id", "\"my-client\""))?;
                let client_secret = client_secret
                    .ok_or_else(|| missing("sasl_oauthbearer_client_secret", "\"${OAUTH_CLIENT_SECRET}\""))?;
                let oidc = OidcSettings {
                    token_endpoint_url: endpoint,
                    client_id,
                    client_secret,
                    scope,
                    ca_pem: oauth_ca_pem,
                };
                return Ok(Some(base(Secret(String::new()), Some(oidc), None)));
            }
            if let Some((name, _)) = oidc_fields.iter().find(|(_, set)| *set) {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` is set but `sasl_oauthbearer_token_endpoint_url` is missing: add the token endpoint, or remove `{name}`"),
                ));
            }
            let token = token.ok_or_else(|| {
                ConfigError::invalid(
                    "sasl_oauth_token",
                    "`sasl_mechanism` is OAUTHBEARER but it has no token: add `sasl_oauth_token` (e.g. \"${KAFKA_TOKEN}\"), or `sasl_oauthbearer_token_endpoint_url` with `sasl_oauthbearer_client_id` and `sasl_oauthbearer_client_secret`",
                )
            })?;
            return Ok(Some(base(token, None, None)));
        }
        if token.is_some() {
            return Err(ConfigError::invalid(
                "sasl_oauth_token",
                "`sasl_oauth_token` is set but `sasl_mechanism` is not OAUTHBEARER: set it to OAUTHBEARER or remove the token",
            ));
        }
        let Some(mechanism) = mechanism else {
            for name in ["sasl_username", "sasl_password"] {
                let set = if name == "sasl_username" { username.is_some() } else { password.is_some() };
                if set {
                    return Err(ConfigError::invalid(
                        name,
                        format!("`{name}` is set but `sasl_mechanism` is none: set `sasl_mechanism` to PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, or remove the credentials"),
                    ));
                }
            }
            return Ok(None);
        };
        let missing = |name: &str| {
            ConfigError::invalid(
                name,
                format!(
                    "`sasl_mechanism` is {} but `{name}` is missing: add `{name}` (e.g. \"${{KAFKA_{}}}\")",
                    mechanism.name(),
                    if name == "sasl_username" { "USERNAME" } else { "PASSWORD" }
                ),
            )
        };
        let username = username.ok_or_else(|| missing("sasl_username"))?;
        let password = password.ok_or_else(|| missing("sasl_password"))?;
        Ok(Some(SaslConfig {
            mechanism,
            username,
            password,
            allow_plaintext,
            oidc: None,
            aws: None,
            extensions: Vec::new(),
        }))
    }

    /// `sasl_oauthbearer_extensions`: an object of strings, keys letters only (not `auth`),
    /// values printable ASCII (KIP-342).
    fn extensions(&mut self, name: &str) -> Result<Vec<(String, String)>, ConfigError> {
        let object = match self.0.remove(name) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Object(object)) => object,
            Some(_) => {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` must be an object of strings, like {{\"logicalCluster\": \"lkc-abc123\"}}"),
                ))
            }
        };
        let mut out = Vec::with_capacity(object.len());
        for (key, value) in object {
            let Value::String(value) = value else {
                return Err(ConfigError::invalid(name, format!("`{name}`: the value of \"{key}\" must be a string")));
            };
            if key.is_empty() || !key.bytes().all(|b| b.is_ascii_alphabetic()) || key == "auth" {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}` has the key \"{key}\": keys are letters only and `auth` is reserved (KIP-342)"),
                ));
            }
            if value.is_empty() || !value.bytes().all(|b| (0x20..=0x7e).contains(&b) || b == b'\t') {
                return Err(ConfigError::invalid(
                    name,
                    format!("`{name}`: the value of \"{key}\" must be printable ASCII and not empty"),
                ));
            }
            out.push((key, value));
        }
        Ok(out)
    }
}

fn parse_broker(text: &str) -> Result<BrokerAddress, ConfigError> {
    let invalid = || {
        ConfigError::invalid(
            "brokers",
            format!("`brokers` has \"{text}\", which is not host:port: write it like \"kafka-1:9092\" (IPv6 as \"[::1]:9092\")"),
        )
    };
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, port) = rest.split_once("]:").ok_or_else(invalid)?;
        (host, port)
    } else {
        let (host, port) = text.rsplit_once(':').ok_or_else(invalid)?;
        if host.contains(':') {
            return Err(invalid());
        }
        (host, port)
    };
    let port: u16 = port.parse().map_err(|_| invalid())?;
    if host.is_empty() || port == 0 || host.chars().any(|c| c.is_whitespace() || c == '/') {
        return Err(invalid());
    }
    Ok(BrokerAddress { host: host.to_string(), port })
}

fn require_pem(field: &str, pem: &Secret, label_end: &str) -> Result<(), ConfigError> {
    let text = pem.expose();
    if text.contains("-----BEGIN ") && text.contains(label_end) {
        Ok(())
    } else {
        Err(ConfigError::invalid(
            field,
            format!("`{field}` does not look like PEM text (no `-----BEGIN ...{label_end}` block): paste the whole PEM file content, newlines included (as \\n in JSON)"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CERT: &str = "-----BEGIN CERTIFICATE-----\\nMIIBcert\\n-----END CERTIFICATE-----\\n";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----\\nTOPSECRETKEYBYTES\\n-----END PRIVATE KEY-----\\n";

    fn no_env(_: &str) -> Option<String> {
        None
    }

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::from_json_str(text, no_env)
    }

    fn rejection(text: &str) -> String {
        match parse(text) {
            Ok(config) => panic!("accepted: {config:?}"),
            Err(error) => error.to_string(),
        }
    }

    #[test]
    fn oidc_client_credentials_with_secrets_from_the_environment() {
        let env = |name: &str| match name {
            "OAUTH_SECRET" => Some("the-client-secret".to_string()),
            "POOL" => Some("pool-Ab12".to_string()),
            _ => None,
        };
        let config = Config::from_json_str(
            r#"{"brokers": ["b:9093"], "sasl_mechanism": "oauthbearer",
                "sasl_oauthbearer_token_endpoint_url": "https://idp.example.com/oauth2/token",
                "sasl_oauthbearer_client_id": "sluice", "sasl_oauthbearer_client_secret": "${OAUTH_SECRET}",
                "sasl_oauthbearer_scope": "kafka", "sasl_oauthbearer_ca_pem": "-----BEGIN CERTIFICATE-----",
                "sasl_oauthbearer_extensions": {"logicalCluster": "lkc-1", "identityPoolId": "${POOL}"}}"#,
            env,
        )
        .unwrap();
        let sasl = config.sasl.unwrap();
        assert_eq!(sasl.mechanism, SaslMechanism::OAuthBearer);
        let oidc = sasl.oidc.as_ref().unwrap();
        assert_eq!(oidc.token_endpoint_url, "https://idp.example.com/oauth2/token");
        assert_eq!((oidc.client_id.as_str(), oidc.client_secret.expose()), ("sluice", "the-client-secret"));
        assert_eq!(oidc.scope.as_deref(), Some("kafka"));
        let mut extensions = sasl.extensions.clone();
        extensions.sort();
        assert_eq!(
            extensions,
            [
                ("identityPoolId".to_string(), "pool-Ab12".to_string()),
                ("logicalCluster".to_string(), "lkc-1".to_string())
            ]
        );
        let debug = format!("{sasl:?}");
        assert!(!debug.contains("the-client-secret") && !debug.contains("BEGIN CERTIFICATE"), "{debug}");
    }

    #[test]
    fn oidc_fields_are_checked_by_name() {
        let base = r#""brokers": ["b:1"], "sasl_mechanism": "OAUTHBEARER""#;
        let endpoint = r#""sasl_oauthbearer_token_endpoint_url": "https://idp/token""#;
        for (fields, field, needle) in [
            (format!(r#"{base}, {endpoint}"#), "sasl_oauthbearer_client_id", "`sasl_oauthbearer_client_id` is missing"),
            (format!(r#"{base}, {endpoint}, "sasl_oauthbearer_client_id": "c""#), "sasl_oauthbearer_client_secret", "${OAUTH_CLIENT_SECRET}"),
            (format!(r#"{base}, "sasl_oauthbearer_token_endpoint_url": "http://idp.example.com/token", "sasl_oauthbearer_client_id": "c", "sasl_oauthbearer_client_secret": "s""#), "sasl_oauthbearer_token_endpoint_url", "must be https://"),
            (format!(r#"{base}, "sasl_oauthbearer_token_endpoint_url": "idp/token""#), "sasl_oauthbearer_token_endpoint_url", "must start with https://"),
            (format!(r#"{base}, {endpoint}, "sasl_oauth_token": "t""#), "sasl_oauth_token", "both set"),
            (format!(r#"{base}, "sasl_oauthbearer_client_id": "c""#), "sasl_oauthbearer_client_id", "`sasl_oauthbearer_token_endpoint_url` is missing"),
            (base.to_string(), "sasl_oauth_token", "has no token"),
            (format!(r#"{base}, "sasl_oauth_token": "t", "sasl_oauthbearer_extensions": {{"auth": "x"}}"#), "sasl_oauthbearer_extensions", "`auth` is reserved"),
            (format!(r#"{base}, "sasl_oauth_token": "t", "sasl_oauthbearer_extensions": {{"a-b": "x"}}"#), "sasl_oauthbearer_extensions", "letters only"),
            (format!(r#"{base}, "sasl_oauth_token": "t", "sasl_oauthbearer_extensions": ["x"]"#), "sasl_oauthbearer_extensions", "must be an object"),
            (r#""brokers": ["b:1"], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "p", "sasl_oauthbearer_client_id": "c""#.to_string(), "sasl_oauthbearer_client_id", "is not OAUTHBEARER"),
        ] {
            let error = parse(&format!("{{{fields}}}")).unwrap_err();
            assert_eq!(error.field(), Some(field), "{fields}: {error}");
            assert!(error.to_string().contains(needle), "{fields}: {error}");
            assert!(!error.to_string().contains("\"s\""), "{error}");
        }
    }

    #[test]
    fn aws_msk_iam_fields() {
        let config = parse(
            r#"{"brokers": ["b-1.msk.example:9098"], "tls_enabled": true, "sasl_mechanism": "AWS_MSK_IAM",
                "aws_region": "eu-west-1", "aws_role_arn": "arn:aws:iam::123456789012:role/msk-reader",
                "aws_role_session_name": "sluice-prod"}"#,
        )
        .unwrap();
        let sasl = config.sasl.unwrap();
        assert_eq!(sasl.mechanism, SaslMechanism::OAuthBearer);
        assert_eq!(
            sasl.aws,
            Some(AwsSettings {
                region: "eu-west-1".into(),
                role_arn: Some("arn:aws:iam::123456789012:role/msk-reader".into()),
                role_session_name: Some("sluice-prod".into())
            })
        );
        let base = r#""brokers": ["b:1"], "sasl_mechanism": "aws_msk_iam""#;
        for (fields, field, needle) in [
            (base.to_string(), "aws_region", "`aws_region` is missing"),
            (format!(r#"{base}, "aws_region": "EU West""#), "aws_region", "not an AWS region name"),
            (format!(r#"{base}, "aws_region": "us-east-1", "aws_role_arn": "msk-reader""#), "aws_role_arn", "not a role ARN"),
            (format!(r#"{base}, "aws_region": "us-east-1", "aws_role_session_name": "s1""#), "aws_role_session_name", "without `aws_role_arn`"),
            (format!(r#"{base}, "aws_region": "us-east-1", "sasl_password": "p""#), "sasl_password", "does not apply to AWS_MSK_IAM"),
            (format!(r#"{base}, "aws_region": "us-east-1", "sasl_oauth_token": "t""#), "sasl_oauth_token", "signs its own tokens"),
            (format!(r#"{base}, "aws_region": "us-east-1", "sasl_oauthbearer_client_id": "c""#), "sasl_oauthbearer_client_id", "signs its own tokens"),
            (r#""brokers": ["b:1"], "sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token": "t", "aws_region": "us-east-1""#.to_string(), "aws_region", "is not AWS_MSK_IAM"),
        ] {
            let error = parse(&format!("{{{fields}}}")).unwrap_err();
            assert_eq!(error.field(), Some(field), "{fields}: {error}");
            assert!(error.to_string().contains(needle), "{fields}: {error}");
        }
    }

    #[test]
    fn minimal_config_takes_the_defaults() {
        let config = parse(r#"{"brokers": ["localhost:9092"]}"#).unwrap();
        assert_eq!(config.brokers, vec![BrokerAddress { host: "localhost".into(), port: 9092 }]);
        assert_eq!(config.client_id, "sluice");
        assert_eq!(config.tls, None);
        assert_eq!(config.sasl, None);
        assert!(config.topics.is_empty());
        assert_eq!(config.start_position, StartPosition::Earliest);
        assert_eq!(config.connection_id, None);
        assert_eq!(config.fetch, FetchLimits { max_bytes: 4 << 20, partition_max_bytes: 1 << 20, max_wait_ms: 500 });
        assert_eq!(config.epoch, EpochLimits { max_records: 10_000, max_bytes: 16 << 20, max_ms: 1000 });
        assert_eq!(
            config.network,
            NetworkLimits {
                request_timeout_ms: 30_000,
                connect_timeout_ms: 10_000,
                retry_backoff_ms: 100,
                retry_backoff_max_ms: 2_000,
                retry_budget_ms: 60_000
            }
        );
        assert_eq!(config.on_malformed, OnMalformed::Fail);
        assert_eq!(config.destination_dir, PathBuf::from("sluice-output"));
    }

    #[test]
    fn network_limits_are_read_and_checked() {
        let config = parse(
            r#"{"brokers": ["b:1"], "request_timeout_ms": 1500, "connect_timeout_ms": "700",
                "retry_backoff_ms": 50, "retry_backoff_max_ms": 400, "retry_budget_ms": 600000}"#,
        )
        .unwrap();
        assert_eq!(
            config.network,
            NetworkLimits {
                request_timeout_ms: 1500,
                connect_timeout_ms: 700,
                retry_backoff_ms: 50,
                retry_backoff_max_ms: 400,
                retry_budget_ms: 600_000
            }
        );
        assert_eq!(
            config.network.retry_policy(),
            RetryPolicy::new(Duration::from_millis(50), Duration::from_millis(400), Duration::from_secs(600))
        );
        let error = parse(r#"{"brokers": ["b:1"], "retry_backoff_ms": 500, "retry_backoff_max_ms": 400}"#)
            .unwrap_err()
            .to_string();
        assert!(error.contains("`retry_backoff_max_ms` (400) is below `retry_backoff_ms` (500)"), "{error}");
        let error = parse(r#"{"brokers": ["b:1"], "request_timeout_ms": 0}"#).unwrap_err().to_string();
        assert!(error.contains("`request_timeout_ms` must be a whole number from 1"), "{error}");
    }

    #[test]
    fn group_settings() {
        assert_eq!(parse(r#"{"brokers": ["b:1"]}"#).unwrap().group, None);
        let config = parse(
            r#"{"brokers": ["b:1"], "group_id": "loaders", "group_protocol": "classic", "group_instance_id": "w1",
                "group_session_timeout_ms": 6000, "group_heartbeat_interval_ms": 500, "start_position": "group"}"#,
        )
        .unwrap();
        assert_eq!(config.start_position, StartPosition::Group);
        assert_eq!(
            config.group,
            Some(GroupSettings {
                id: GroupId::Fixed("loaders".into()),
                protocol: GroupProtocolSetting::Classic,
                instance_id: Some("w1".into()),
                session_timeout_ms: 6000,
                heartbeat_interval_ms: 500,
            })
        );
        let prefixed = parse(r#"{"brokers": ["b:1"], "group_id_prefix": "sluice-"}"#).unwrap().group.unwrap();
        assert_eq!(prefixed.id.resolve("conn-7"), "sluice-conn-7");
        assert_eq!(prefixed.protocol, GroupProtocolSetting::Auto);
        assert_eq!((prefixed.session_timeout_ms, prefixed.heartbeat_interval_ms), (45_000, 3_000));

        assert!(rejection(r#"{"brokers": ["b:1"], "group_id": "a", "group_id_prefix": "b"}"#)
            .starts_with("both `group_id` and `group_id_prefix` are set"));
        assert!(rejection(r#"{"brokers": ["b:1"], "start_position": "group"}"#)
            .starts_with("`start_position` is \"group\" but no group is configured"));
        assert!(rejection(r#"{"brokers": ["b:1"], "group_protocol": "consumer"}"#)
            .starts_with("`group_protocol` is set but no group is"));
        assert!(rejection(r#"{"brokers": ["b:1"], "group_id": "g", "group_protocol": "new"}"#)
            .starts_with("`group_protocol` is \"new\""));
        assert!(rejection(r#"{"brokers": ["b:1"], "group_id": ""}"#).starts_with("`group_id` must be 1 to 200"));
        assert!(rejection(r#"{"brokers": ["b:1"], "group_id": "g", "group_instance_id": ""}"#)
            .starts_with("`group_instance_id` is empty"));
        assert!(rejection(
            r#"{"brokers": ["b:1"], "group_id": "g", "group_session_timeout_ms": 3000, "group_heartbeat_interval_ms": 3000}"#
        )
        .starts_with("`group_heartbeat_interval_ms` (3000) must be below"));
    }

    #[test]
    fn retry_max_attempts_points_to_the_budget() {
        assert_eq!(
            rejection(r#"{"brokers": ["b:1"], "retry_backoff_max_ms": 500, "retry_max_attempts": 1000}"#),
            "`retry_max_attempts` was replaced by `retry_budget_ms`, how long one operation may keep retrying in \
             milliseconds (default 60000): remove `retry_max_attempts` and, to keep retrying about as long as 1000 \
             attempts did, set `\"retry_budget_ms\": 500000`"
        );
        let message = rejection(r#"{"brokers": ["b:1"], "retry_max_attempts": "${N}"}"#);
        assert!(message.starts_with("`retry_max_attempts` was replaced by `retry_budget_ms`"), "{message}");
        assert!(message.ends_with("set `retry_budget_ms` if 60 seconds is not right"), "{message}");
        assert_eq!(
            parse(r#"{"brokers": ["b:1"], "retry_max_attempts": 3}"#).unwrap_err().field(),
            Some("retry_max_attempts")
        );
    }

    #[test]
    fn full_config_with_environment_substitution() {
        let text = format!(
            r#"{{"brokers": ["${{HOST}}:9093", "[::1]:9094"], "client_id": "etl",
                "tls_enabled": true, "tls_ca_pem": "{CERT}", "tls_cert_pem": "{CERT}", "tls_key_pem": "{KEY}",
                "sasl_mechanism": "scram-sha-512", "sasl_username": "svc", "sasl_password": "${{PW}}",
                "topics": ["orders", "customers"], "start_position": "latest", "connection_id": "conn-1",
                "epoch_max_records": "${{RECORDS}}", "epoch_max_bytes": 1000, "epoch_max_ms": 250,
                "fetch_max_bytes": 2000, "partition_max_bytes": 1000, "fetch_max_wait_ms": 100,
                "on_malformed": "dead_letter", "destination_dir": "/tmp/out-$${{literal}}"}}"#
        );
        let env = |name: &str| match name {
            "HOST" => Some("kafka-1".to_string()),
            "PW" => Some("s3cr3t-pw".to_string()),
            "RECORDS" => Some("77".to_string()),
            _ => None,
        };
        let config = Config::from_json_str(&text, env).unwrap();
        assert_eq!(config.brokers[0].to_string(), "kafka-1:9093");
        assert_eq!(config.brokers[1], BrokerAddress { host: "::1".into(), port: 9094 });
        let sasl = config.sasl.as_ref().unwrap();
        assert_eq!(sasl.mechanism, SaslMechanism::ScramSha512);
        assert_eq!(sasl.password.expose(), "s3cr3t-pw");
        let tls = config.tls.as_ref().unwrap();
        assert!(tls.client.as_ref().unwrap().key_pem.expose().contains("TOPSECRETKEYBYTES"));
        assert_eq!(config.epoch.max_records, 77);
        assert_eq!(config.start_position, StartPosition::Latest);
        assert_eq!(config.on_malformed, OnMalformed::DeadLetter);
        assert_eq!(config.destination_dir, PathBuf::from("/tmp/out-${literal}"));

        let debug = format!("{config:?}");
        assert!(!debug.contains("s3cr3t-pw"), "{debug}");
        assert!(!debug.contains("TOPSECRETKEYBYTES"), "{debug}");
        assert!(debug.contains("<redacted>"), "{debug}");
        assert!(debug.contains("svc"), "the username is not secret: {debug}");
    }

    #[test]
    fn file_fields_point_to_the_pem_fields() {
        assert_eq!(
            rejection(r#"{"brokers": ["a:1"], "tls_enabled": true, "tls_ca_file": "/etc/ca.pem"}"#),
            "unknown field `tls_ca_file`: Sluice takes certificates as pasted PEM text; put the PEM in `tls_ca_pem`"
        );
        assert_eq!(
            rejection(r#"{"brokers": ["a:1"], "tls_key_file": "/k"}"#),
            "unknown field `tls_key_file`: Sluice takes certificates as pasted PEM text; put the PEM in `tls_key_pem`"
        );
    }

    #[test]
    fn unknown_fields_are_named() {
        let message = rejection(r#"{"brokers": ["a:1"], "bootstrap_servers": "a:1"}"#);
        assert!(message.starts_with("unknown field `bootstrap_servers`: remove it or fix its spelling"), "{message}");
        assert!(message.contains("brokers, client_id"), "{message}");
    }

    #[test]
    fn certificates_need_tls_enabled() {
        let text = format!(r#"{{"brokers": ["a:1"], "tls_cert_pem": "{CERT}", "tls_key_pem": "{KEY}"}}"#);
        let message = rejection(&text);
        assert_eq!(
            message,
            "`tls_cert_pem` is set but `tls_enabled` is false: set `\"tls_enabled\": true` or remove the certificate fields"
        );
        assert!(!message.contains("TOPSECRET"));
    }

    #[test]
    fn client_certificate_and_key_come_together_and_must_be_pem() {
        let text = format!(r#"{{"brokers": ["a:1"], "tls_enabled": true, "tls_cert_pem": "{CERT}"}}"#);
        assert!(rejection(&text).starts_with("`tls_cert_pem` is set but `tls_key_pem` is missing"));
        let text = r#"{"brokers": ["a:1"], "tls_enabled": true, "tls_ca_pem": "/etc/ssl/ca.pem"}"#;
        assert!(rejection(text).starts_with("`tls_ca_pem` does not look like PEM text"));
        let text = format!(
            r#"{{"brokers": ["a:1"], "tls_enabled": true, "tls_cert_pem": "{CERT}", "tls_key_pem": "NOTPEMSECRET"}}"#
        );
        let message = rejection(&text);
        assert!(message.starts_with("`tls_key_pem` does not look like PEM text"), "{message}");
        assert!(!message.contains("NOTPEMSECRET"), "{message}");
    }

    #[test]
    fn sasl_mechanism_needs_credentials() {
        assert_eq!(
            rejection(r#"{"brokers": ["a:1"], "sasl_mechanism": "SCRAM-SHA-256", "sasl_username": "u"}"#),
            "`sasl_mechanism` is SCRAM-SHA-256 but `sasl_password` is missing: add `sasl_password` (e.g. \"${KAFKA_PASSWORD}\")"
        );
        assert_eq!(
            rejection(r#"{"brokers": ["a:1"], "sasl_mechanism": "PLAIN", "sasl_password": "pw"}"#),
            "`sasl_mechanism` is PLAIN but `sasl_username` is missing: add `sasl_username` (e.g. \"${KAFKA_USERNAME}\")"
        );
        let message = rejection(r#"{"brokers": ["a:1"], "sasl_password": "hunter2"}"#);
        assert!(message.starts_with("`sasl_password` is set but `sasl_mechanism` is none"), "{message}");
        assert!(!message.contains("hunter2"));
        assert_eq!(
            rejection(r#"{"brokers": ["a:1"], "sasl_mechanism": "GSSAPI"}"#),
            "`sasl_mechanism` is \"GSSAPI\": use one of none, PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER, AWS_MSK_IAM"
        );
    }

    #[test]
    fn unset_environment_variable_is_named_with_its_field() {
        assert_eq!(
            rejection(r#"{"brokers": ["a:1"], "sasl_mechanism": "PLAIN", "sasl_username": "u", "sasl_password": "${KAFKA_PW}"}"#),
            "`sasl_password` refers to the environment variable KAFKA_PW, which is not set: set it, or write the value into the file"
        );
        assert!(rejection(r#"{"brokers": ["${HOST"]}"#).starts_with("`brokers` has a `${` without a closing `}`"));
    }

    #[test]
    fn brokers_must_be_a_nonempty_list_of_host_port() {
        assert!(rejection(r#"{}"#).starts_with("`brokers` is missing"));
        assert!(rejection(r#"{"brokers": []}"#).starts_with("`brokers` is empty"));
        for bad in ["localhost", "localhost:", ":9092", "host:99999", "::1:9092", "host:0"] {
            let message = rejection(&format!(r#"{{"brokers": ["{bad}"]}}"#));
            assert_eq!(
                message,
                format!("`brokers` has \"{bad}\", which is not host:port: write it like \"kafka-1:9092\" (IPv6 as \"[::1]:9092\")")
            );
        }
    }

    #[test]
    fn other_field_checks() {
        assert!(rejection(r#"{"brokers": ["a:1"], "start_position": "beginning"}"#).starts_with(
            "`start_position` is \"beginning\": use \"earliest\", \"latest\" or (with `group_id`) \"group\""
        ));
        assert!(rejection(r#"{"brokers": ["a:1"], "on_malformed": "skip"}"#).starts_with("`on_malformed` is \"skip\""));
        assert!(rejection(r#"{"brokers": ["a:1"], "fetch_max_bytes": 0}"#)
            .starts_with("`fetch_max_bytes` must be a whole number from 1 to 2147483647"));
        assert!(rejection(r#"{"brokers": ["a:1"], "partition_max_bytes": 8388608}"#)
            .starts_with("`partition_max_bytes` (8388608) is larger than `fetch_max_bytes` (4194304)"));
        assert!(rejection(r#"{"brokers": ["a:1"], "topics": ["ok", "no/slash"]}"#)
            .starts_with("`topics` has \"no/slash\", which is not a Kafka topic name"));
        assert!(rejection(r#"{"brokers": ["a:1"], "connection_id": "has space"}"#)
            .starts_with("`connection_id` must be 1 to 128 characters"));
        let error = parse(r#"{"brokers": ["a:1"], "brokers": ["b:2"]}"#).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the configuration is not usable (it must be one JSON object with each field once)"
        );
        let cause = std::error::Error::source(&error).map(ToString::to_string).unwrap_or_default();
        assert_eq!(cause, "duplicate JSON key `brokers` in the object at $");
    }

    #[test]
    fn event_hubs_preset_expands_to_brokers_tls_and_plain() {
        let env = |name: &str| {
            (name == "EH_CONN").then(|| "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKey=k3y".to_string())
        };
        let config = Config::from_json_str(
            r#"{"preset": "event-hubs", "namespace": "ns1", "connection_string_env": "EH_CONN", "topics": ["t"]}"#,
            env,
        )
        .unwrap();
        assert_eq!(config.brokers, vec![BrokerAddress { host: "ns1.servicebus.windows.net".to_string(), port: 9093 }]);
        assert_eq!(config.tls, Some(TlsConfig { ca_pem: None, client: None }));
        let sasl = config.sasl.as_ref().unwrap();
        assert_eq!(sasl.mechanism, SaslMechanism::Plain);
        assert_eq!(sasl.username, "$ConnectionString");
        assert_eq!(sasl.password.expose(), "Endpoint=sb://ns1.servicebus.windows.net/;SharedAccessKey=k3y");
        assert!(!format!("{config:?}").contains("k3y"));
    }

    #[test]
    fn event_hubs_preset_inputs_are_checked_before_connecting() {
        let env = |name: &str| (name == "EH_CONN").then(|| "Endpoint=sb://x/".to_string());
        let rejection = |text: &str| Config::from_json_str(text, env).unwrap_err().to_string();
        assert_eq!(
            rejection(r#"{"preset": "confluent-cloud"}"#),
            "`preset` is \"confluent-cloud\", which Sluice does not know: the only preset is \"event-hubs\""
        );
        assert!(rejection(r#"{"preset": "event-hubs", "connection_string_env": "EH_CONN"}"#)
            .starts_with("`preset: event-hubs` needs `namespace`"));
        assert!(rejection(r#"{"preset": "event-hubs", "namespace": "ns1"}"#)
            .starts_with("`preset: event-hubs` needs `connection_string_env`"));
        assert_eq!(
            rejection(r#"{"preset": "event-hubs", "namespace": "ns1", "connection_string_env": "NOPE"}"#),
            "`connection_string_env` names NOPE, which is not set: export the Event Hubs connection string as NOPE"
        );
        assert!(rejection(
            r#"{"preset": "event-hubs", "namespace": "ns1", "connection_string_env": "EH_CONN", "brokers": ["a:1"]}"#
        )
        .starts_with("`brokers` cannot be combined with `preset: event-hubs`"));
        assert!(rejection(
            r#"{"preset": "event-hubs", "namespace": "ns1.servicebus.windows.net", "connection_string_env": "EH_CONN"}"#
        )
        .contains("without .servicebus.windows.net"));
        assert!(rejection(r#"{"brokers": ["a:1"], "namespace": "ns1"}"#).starts_with("`namespace` belongs to a preset"));
    }

    #[test]
    fn secret_prints_redacted() {
        let secret = Secret::new("pw");
        assert_eq!(format!("{secret} {secret:?}"), "<redacted> <redacted>");
    }

    #[test]
    fn load_names_the_missing_file() {
        let error = Config::load(Path::new("/nonexistent/sluice.json")).unwrap_err();
        assert!(error.to_string().starts_with("cannot read the configuration file /nonexistent/sluice.json"));
    }

    #[test]
    fn topics_take_names_and_objects_with_a_format() {
        let config = parse(
            r#"{"brokers": ["b:1"], "topics": ["plain", {"name": "orders", "format": "avro"},
                {"name": "audit", "format": "avro", "value_subject": "audit-v"}, {"name": "blobs", "format": "raw"},
                {"name": "events", "format": "json"}, {"name": "typed", "format": "json_schema", "key_format": "protobuf"}],
                "schema_registry": {"url": "http://registry:8081"}}"#,
        )
        .unwrap();
        assert_eq!(config.topics, ["plain", "orders", "audit", "blobs", "events", "typed"]);
        assert_eq!(config.payload("typed").format, PayloadFormat::JsonSchema);
        assert_eq!(config.payload("typed").key_format, Some(PayloadFormat::Protobuf));
        assert_eq!(config.payload("plain"), TopicPayload::json("plain"));
        assert_eq!(
            config.payload("orders"),
            TopicPayload {
                format: PayloadFormat::Avro,
                value_subject: "orders-value".into(),
                value_message: None,
                key_format: None
            }
        );
        assert_eq!(config.payload("audit").value_subject, "audit-v");
        assert_eq!(config.payload("blobs").format, PayloadFormat::Raw);
        assert_eq!(config.payload("events").format, PayloadFormat::Json);
        assert_eq!(config.payload("not-listed").format, PayloadFormat::Json);
        let registry = config.schema_registry.unwrap();
        assert_eq!(registry.url, "http://registry:8081");
        assert_eq!(registry.auth, RegistryCredentials::None);
    }

    #[test]
    fn topic_objects_are_checked() {
        let base = r#""brokers": ["b:1"], "schema_registry": {"url": "http://r:1"}"#;
        for (topics, expected) in [
            (r#"[{"name": "t", "format": "xml"}]"#, "topic t: `format` is \"xml\""),
            (r#"[{"name": "t", "format": 1}]"#, "topic t: `format` must be a string"),
            (r#"[{"format": "avro"}]"#, "needs a string `name`"),
            (r#"[{"name": "t", "key_format": "xml"}]"#, "topic t: `key_format` is \"xml\": use \"raw\""),
            (r#"[{"name": "t", "colour": "red"}]"#, "topic t: unknown field `colour`"),
            (
                r#"[{"name": "t", "value_subject": "s"}]"#,
                "`value_subject` is for `format: avro` and `format: protobuf`",
            ),
            (r#"[{"name": "t", "format": "avro", "value_subject": ""}]"#, "`value_subject` is empty"),
            (
                r#"[{"name": "t", "format": "avro", "value_message": "a.B"}]"#,
                "`value_message` is for `format: protobuf`",
            ),
            (r#"[{"name": "t", "format": "protobuf", "value_message": ".a.B"}]"#, "without a leading dot"),
            (r#"[{"name": "bad name", "format": "avro"}]"#, "not a Kafka topic name"),
            (r#"["t", {"name": "t", "format": "avro"}]"#, "names t twice"),
            (r#"[7]"#, "`topics` must be a list of topic names or objects"),
            (r#""t""#, "`topics` must be a list of topic names or objects"),
        ] {
            let message = rejection(&format!(r#"{{{base}, "topics": {topics}}}"#));
            assert!(message.contains(expected), "{topics}: {message}");
        }
        let message = rejection(r#"{"brokers": ["b:1"], "topics": [{"name": "orders", "format": "avro"}]}"#);
        assert!(message.contains("topic orders has `format: avro` but there is no `schema_registry`"), "{message}");
        let message = rejection(r#"{"brokers": ["b:1"], "topics": [{"name": "orders", "key_format": "avro"}]}"#);
        assert!(message.contains("topic orders has `key_format: avro` but there is no `schema_registry`"), "{message}");
        let config = parse(r#"{"brokers": ["b:1"], "topics": [{"name": "a", "key_format": "json"}, {"name": "b", "key_format": "raw"}]}"#)
            .unwrap();
        assert_eq!(config.payload("a").key_format, Some(PayloadFormat::Json));
        assert_eq!(config.payload("b").key_format, None);
    }

    #[test]
    fn schema_registry_credentials_and_tls() {
        let env = |name: &str| match name {
            "SR_SECRET" => Some("sr-secret-value".to_string()),
            "SR_TOKEN" => Some("sr-token-value".to_string()),
            _ => None,
        };
        let config = Config::from_json_str(
            &format!(
                r#"{{"brokers": ["b:1"], "schema_registry": {{"url": "https://sr.example:8081/prefix",
                    "api_key": "KEY1", "api_secret": "${{SR_SECRET}}", "tls_ca_pem": "{CERT}",
                    "tls_cert_pem": "{CERT}", "tls_key_pem": "{KEY}"}}}}"#
            ),
            env,
        )
        .unwrap();
        let registry = config.schema_registry.clone().unwrap();
        assert_eq!(
            registry.auth,
            RegistryCredentials::Basic { username: Secret::new("KEY1"), password: Secret::new("sr-secret-value") }
        );
        assert!(registry.ca_pem.is_some() && registry.client.is_some());
        let debug = format!("{config:?}");
        assert!(!debug.contains("sr-secret-value") && !debug.contains("TOPSECRETKEYBYTES"), "{debug}");
        let bearer = Config::from_json_str(
            r#"{"brokers": ["b:1"], "schema_registry": {"url": "http://sr:8081", "bearer_token": "${SR_TOKEN}"}}"#,
            env,
        )
        .unwrap();
        assert_eq!(bearer.schema_registry.unwrap().auth, RegistryCredentials::Bearer(Secret::new("sr-token-value")));
        let basic =
            parse(r#"{"brokers": ["b:1"], "schema_registry": {"url": "http://sr", "username": "u", "password": "p"}}"#)
                .unwrap();
        assert!(matches!(basic.schema_registry.unwrap().auth, RegistryCredentials::Basic { .. }));
    }

    #[test]
    fn schema_registry_rejections_name_the_field_and_never_a_secret() {
        let registry = |fields: &str| rejection(&format!(r#"{{"brokers": ["b:1"], "schema_registry": {{{fields}}}}}"#));
        for (fields, expected) in [
            (r#""username": "u", "password": "p""#, "`schema_registry.url` is missing"),
            (r#""url": "ftp://sr""#, "must start with http:// or https://"),
            (r#""url": "https://""#, "`schema_registry.url` has no host"),
            (r#""url": "https://user:hunter2@sr""#, "holds credentials"),
            (
                r#""url": "http://sr", "username": "u""#,
                "`schema_registry.username` is set but `schema_registry.password` is missing",
            ),
            (
                r#""url": "http://sr", "password": "hunter2""#,
                "`schema_registry.password` is set but `schema_registry.username` is missing",
            ),
            (r#""url": "http://sr", "api_key": "k""#, "`schema_registry.api_secret` is missing"),
            (r#""url": "http://sr", "api_secret": "hunter2""#, "`schema_registry.api_key` is missing"),
            (
                r#""url": "http://sr", "username": "u", "password": "hunter2", "bearer_token": "hunter2""#,
                "more than one kind of credentials",
            ),
            (
                r#""url": "http://sr", "username": "u", "password": "hunter2", "api_key": "k", "api_secret": "hunter2""#,
                "more than one kind of credentials",
            ),
            (r#""url": "http://sr", "tls_ca_pem": "x""#, "`schema_registry.tls_ca_pem` is set but the URL is http://"),
            (r#""url": "https://sr", "tls_ca_pem": "hunter2""#, "`schema_registry.tls_ca_pem` does not look like PEM"),
            (r#""url": "https://sr", "tls_cert_pem": "hunter2""#, "`schema_registry.tls_key_pem` is missing"),
            (r#""url": "https://sr", "tls_key_pem": "hunter2""#, "`schema_registry.tls_cert_pem` is missing"),
            (r#""url": "http://sr", "bearer_token": 5"#, "`schema_registry.bearer_token` must be a string"),
            (r#""url": "http://sr", "tls_ca_file": "/x""#, "unknown field `schema_registry.tls_ca_file`"),
        ] {
            let message = registry(fields);
            assert!(message.contains(expected), "{fields}: {message}");
            assert!(!message.contains("hunter2"), "{fields}: {message}");
        }
        assert!(rejection(r#"{"brokers": ["b:1"], "schema_registry": "http://sr"}"#).contains("must be an object"));
        let unset =
            rejection(r#"{"brokers": ["b:1"], "schema_registry": {"url": "http://sr", "bearer_token": "${NO_SUCH}"}}"#);
        assert!(unset.contains("NO_SUCH"), "{unset}");
    }
}
