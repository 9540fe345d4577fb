//! A Confluent-compatible schema registry client: schemas fetched by id, cached for the
//! process, their references resolved.
//!
//! Two layers, as everywhere in Sluice: the answers are decoded sans-IO
//! ([`decode_schema_response`], bounded and fuzzed: `registry_response`), and
//! [`RegistryClient`] only sends requests over `sluice-wire`'s small HTTPS client (rustls, the
//! broker connections' provider) and keeps the cache.
//!
//! * `GET /schemas/ids/{id}`: `{"schema": "<text>", "schemaType": "AVRO"|"PROTOBUF"|"JSON",
//!   "references": [{"name", "subject", "version"}]}` (`schemaType` absent means Avro).
//! * A reference is fetched as `GET /subjects/{subject}/versions/{version}` and parsed before
//!   the schema that names it (dependencies first); at most [`MAX_REFERENCES`] per schema, at
//!   most [`MAX_REFERENCE_DEPTH`] deep, a cycle is an error.
//! * Errors name the registry URL and what was asked for: 401 and 403 say to check the
//!   credentials, 404 that the id or subject is not registered (the record was written against
//!   another registry?), 5xx and timeouts are retried [`ATTEMPTS`] times in all with a short
//!   backoff, then fail. Credentials never appear in errors or `Debug`.
//!
//! # References
//!
//! - Confluent Schema Registry API reference: `/schemas/ids/{id}`,
//!   `/subjects/{subject}/versions/{version}`, schema references.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use sluice_wire::http::{percent_encode, HttpClient, HttpConfig, HttpError, HttpRequest};

use super::avro::{Schema as AvroSchema, SchemaError, SchemaParser};
use super::framing::SchemaId;
use super::protobuf::{Schema as ProtobufSchema, SchemaError as ProtobufSchemaError};

/// References one schema may pull in (all levels together).
pub const MAX_REFERENCES: usize = 64;
/// How deep references may nest.
pub const MAX_REFERENCE_DEPTH: usize = 8;
/// Tries per request for 5xx answers and transport failures.
pub const ATTEMPTS: u32 = 3;
/// The largest answer accepted (a schema's JSON text, escaped in a JSON string).
pub const MAX_RESPONSE_BYTES: usize = 4 << 20;

/// The kind of schema the registry holds under an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SchemaType {
    Avro,
    Protobuf,
    Json,
}

impl SchemaType {
    pub fn name(self) -> &'static str {
        match self {
            SchemaType::Avro => "AVRO",
            SchemaType::Protobuf => "PROTOBUF",
            SchemaType::Json => "JSON",
        }
    }
}

/// A reference from one schema to another registered one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaReference {
    /// The name the referring schema uses (an Avro full name, a Protobuf import path).
    pub name: String,
    pub subject: String,
    pub version: i64,
}

/// A schema as the registry answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredSchema {
    pub schema_type: SchemaType,
    /// The schema's text (Avro JSON, a `.proto` file, a JSON Schema).
    pub schema: String,
    pub references: Vec<SchemaReference>,
}

/// Why a registry's answer body is not a schema answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseError(pub String);

impl fmt::Display for ResponseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ResponseError {}

/// Decodes the body of `/schemas/ids/{id}` or `/subjects/{s}/versions/{v}`.
pub fn decode_schema_response(body: &[u8]) -> Result<RegisteredSchema, ResponseError> {
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(ResponseError(format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes")));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ResponseError(format!("the answer is not JSON ({e})")))?;
    let Value::Object(object) = value else {
        return Err(ResponseError("the answer is not a JSON object".into()));
    };
    let Some(Value::String(schema)) = object.get("schema") else {
        return Err(ResponseError("the answer has no string `schema`".into()));
    };
    let schema_type = match object.get("schemaType") {
        None | Some(Value::Null) => SchemaType::Avro,
        Some(Value::String(kind)) => match kind.as_str() {
            "AVRO" => SchemaType::Avro,
            "PROTOBUF" => SchemaType::Protobuf,
            "JSON" => SchemaType::Json,
            other => {
                return Err(ResponseError(format!(
                    "unknown schemaType `{}`",
                    other.chars().take(32).collect::<String>()
                )))
            }
        },
        Some(_) => return Err(ResponseError("`schemaType` is not a string".into())),
    };
    let mut references = Vec::new();
    match object.get("references") {
        None | Some(Value::Null) => {}
        Some(Value::Array(items)) => {
            if items.len() > MAX_REFERENCES {
                return Err(ResponseError(format!("more than {MAX_REFERENCES} references")));
            }
            for item in items {
                let name = item.get("name").and_then(Value::as_str);
                let subject = item.get("subject").and_then(Value::as_str);
                let version = item.get("version").and_then(Value::as_i64);
                let (Some(name), Some(subject), Some(version)) = (name, subject, version) else {
                    return Err(ResponseError(
                        "a reference without string `name`, string `subject` and integer `version`".into(),
                    ));
                };
                references.push(SchemaReference { name: name.into(), subject: subject.into(), version });
            }
        }
        Some(_) => return Err(ResponseError("`references` is not an array".into())),
    }
    Ok(RegisteredSchema { schema_type, schema: schema.clone(), references })
}

/// What the references of one schema are fetched as.
struct Lookup<'a> {
    /// Appended to each reference's path (`?format=serialized` for Protobuf).
    query: &'a str,
    expected: SchemaType,
    /// The schema whose references these are, for errors.
    what: &'a str,
}

/// The bytes of a Protobuf schema served as a base64 `FileDescriptorProto`.
fn serialized_descriptor(text: &str) -> Result<Vec<u8>, ProtobufSchemaError> {
    crate::json::base64_decode(text.trim()).ok_or(ProtobufSchemaError::NotSerialized {
        looks_like_text: text.contains("syntax") || text.contains("message "),
    })
}

/// How the client authenticates.
#[derive(Clone, Default)]
pub enum RegistryAuth {
    #[default]
    None,
    Basic {
        username: String,
        password: String,
    },
    Bearer(String),
}

impl fmt::Debug for RegistryAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RegistryAuth::None => "None",
            RegistryAuth::Basic { .. } => "Basic(<redacted>)",
            RegistryAuth::Bearer(_) => "Bearer(<redacted>)",
        })
    }
}

/// Settings of a [`RegistryClient`].
#[derive(Debug, Clone)]
pub struct RegistrySettings {
    /// The registry's base URL, e.g. `https://registry.example.com:8081` (a path prefix is kept).
    pub url: String,
    pub auth: RegistryAuth,
    /// A private CA for `https` URLs.
    pub ca_pem: Option<String>,
    /// A client certificate chain and key (PEM), for mutual TLS.
    pub client_certificate: Option<(String, String)>,
    pub timeout: Duration,
}

impl RegistrySettings {
    pub fn new(url: impl Into<String>) -> RegistrySettings {
        RegistrySettings {
            url: url.into(),
            auth: RegistryAuth::None,
            ca_pem: None,
            client_certificate: None,
            timeout: Duration::from_secs(10),
        }
    }

    /// The settings of the configuration's `schema_registry` object.
    pub fn from_config(config: &crate::config::SchemaRegistryConfig) -> RegistrySettings {
        use crate::config::RegistryCredentials;
        let auth = match &config.auth {
            RegistryCredentials::None => RegistryAuth::None,
            RegistryCredentials::Basic { username, password } => {
                RegistryAuth::Basic { username: username.expose().to_string(), password: password.expose().to_string() }
            }
            RegistryCredentials::Bearer(token) => RegistryAuth::Bearer(token.expose().to_string()),
        };
        RegistrySettings {
            auth,
            ca_pem: config.ca_pem.as_ref().map(|pem| pem.expose().to_string()),
            client_certificate: config
                .client
                .as_ref()
                .map(|client| (client.cert_pem.expose().to_string(), client.key_pem.expose().to_string())),
            ..RegistrySettings::new(config.url.clone())
        }
    }
}

/// What went wrong talking to the registry: `what` is the request (`schema id 7`, `subject
/// orders-value version 2`), `url` the registry's base URL.
#[derive(Debug)]
pub struct RegistryError {
    pub url: String,
    pub what: String,
    pub kind: RegistryErrorKind,
}

#[derive(Debug)]
#[non_exhaustive]
pub enum RegistryErrorKind {
    Unauthorized,
    Forbidden,
    NotFound,
    /// Another status (5xx after the retries, or an unexpected 2xx-4xx).
    Status {
        status: u16,
        attempts: u32,
    },
    /// Transport: connect, TLS, timeout, a broken answer (after the retries when transient).
    Http {
        source: HttpError,
        attempts: u32,
    },
    BadResponse(ResponseError),
    /// The schema (or a reference) is not a valid Avro schema.
    Schema(SchemaError),
    /// The schema (or a reference) is not a usable Protobuf schema.
    ProtobufSchema(Box<ProtobufSchemaError>),
    /// The id holds another kind of schema than the topic's `format` says.
    WrongType {
        expected: SchemaType,
        found: SchemaType,
    },
    /// References nest too deep, are too many, or form a cycle.
    References(String),
    /// Registering a schema was refused (409: incompatible with the subject; 422: invalid).
    Refused {
        status: u16,
        message: String,
    },
}

impl fmt::Display for RegistryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let RegistryError { url, what, kind } = self;
        write!(f, "schema registry {url}, {what}: ")?;
        match kind {
            RegistryErrorKind::Unauthorized => {
                write!(f, "401 Unauthorized: check schema_registry's username/password, api_key/api_secret or bearer_token")
            }
            RegistryErrorKind::Forbidden => write!(f, "403 Forbidden: the credentials are valid but may not read this subject or schema"),
            RegistryErrorKind::NotFound => write!(
                f,
                "404 Not Found: not registered (was the record written against another registry, or the subject deleted?)"
            ),
            RegistryErrorKind::Status { status, attempts } => write!(f, "HTTP status {status} (after {attempts} attempts)"),
            RegistryErrorKind::Http { attempts, .. } => write!(f, "the request failed (after {attempts} attempts)"),
            RegistryErrorKind::BadResponse(reason) => write!(f, "not a schema registry answer: {reason}"),
            RegistryErrorKind::Schema(_) => write!(f, "the registered schema is not a valid Avro schema"),
            RegistryErrorKind::ProtobufSchema(error) => write!(f, "the registered Protobuf schema cannot be read: {error}"),
            RegistryErrorKind::WrongType { expected, found } => write!(
                f,
                "the schema is {} but the topic's format expects {}; set the topic's `format` to match the data",
                found.name(),
                expected.name()
            ),
            RegistryErrorKind::References(reason) => write!(f, "schema references: {reason}"),
            RegistryErrorKind::Refused { status: 409, message } => write!(
                f,
                "409 Conflict: the schema is not compatible with the subject's earlier versions ({message}); change the schema or the subject's compatibility"
            ),
            RegistryErrorKind::Refused { status, message } => {
                write!(f, "HTTP status {status}: the registry refused the schema ({message}); fix the schema file")
            }
        }
    }
}

impl std::error::Error for RegistryError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            RegistryErrorKind::Http { source, .. } => Some(source),
            RegistryErrorKind::Schema(source) => Some(source),
            RegistryErrorKind::ProtobufSchema(source) => Some(source.as_ref()),
            RegistryErrorKind::BadResponse(source) => Some(source),
            _ => None,
        }
    }
}

/// The registry client: fetches by id, caches for the life of the process (an id's schema never
/// changes), safe to share between tasks.
#[derive(Debug, Clone)]
pub struct RegistryClient {
    settings: Arc<RegistrySettings>,
    http: HttpClient,
    avro: Arc<Mutex<HashMap<SchemaId, Arc<AvroSchema>>>>,
    protobuf: Arc<Mutex<HashMap<SchemaId, Arc<ProtobufSchema>>>>,
    /// Ids known to be JSON Schemas.
    json: Arc<Mutex<HashSet<SchemaId>>>,
}

impl RegistryClient {
    pub fn new(settings: RegistrySettings) -> RegistryClient {
        let mut config = HttpConfig::default()
            .with_timeouts(settings.timeout.min(Duration::from_secs(5)), settings.timeout)
            .with_max_body_bytes(MAX_RESPONSE_BYTES);
        if let Some(ca) = &settings.ca_pem {
            config = config.with_ca_pem(ca.clone());
        }
        if let Some((cert, key)) = &settings.client_certificate {
            config = config.with_client_certificate(cert.clone(), key.clone());
        }
        let settings = Arc::new(RegistrySettings { url: settings.url.trim_end_matches('/').to_string(), ..settings });
        RegistryClient {
            settings,
            http: HttpClient::new(config),
            avro: Arc::default(),
            protobuf: Arc::default(),
            json: Arc::default(),
        }
    }

    /// The Avro schema registered under `id`, its references resolved; cached.
    pub async fn avro_schema(&self, id: SchemaId) -> Result<Arc<AvroSchema>, RegistryError> {
        if let Some(schema) = self.avro.lock().ok().and_then(|cache| cache.get(&id).cloned()) {
            return Ok(schema);
        }
        let what = format!("schema id {id}");
        let schema = self.avro_at(&format!("/schemas/ids/{id}"), &what).await?;
        if let Ok(mut cache) = self.avro.lock() {
            cache.insert(id, schema.clone());
        }
        Ok(schema)
    }

    /// Checks that `id` is registered as a JSON Schema; cached. The schema itself is not used:
    /// a `json_schema` record's payload is JSON and becomes columns as JSON does, unvalidated,
    /// as Confluent's deserializer does by default (its references therefore need no fetching).
    pub async fn json_schema(&self, id: SchemaId) -> Result<(), RegistryError> {
        if self.json.lock().is_ok_and(|known| known.contains(&id)) {
            return Ok(());
        }
        let what = format!("schema id {id}");
        let registered = self.fetch(&format!("/schemas/ids/{id}"), &what).await?;
        if registered.schema_type != SchemaType::Json {
            return Err(self.error(
                &what,
                RegistryErrorKind::WrongType { expected: SchemaType::Json, found: registered.schema_type },
            ));
        }
        if let Ok(mut known) = self.json.lock() {
            known.insert(id);
        }
        Ok(())
    }

    /// The latest Avro schema registered under `subject` (not cached: it changes).
    pub async fn latest_avro_schema(&self, subject: &str) -> Result<Arc<AvroSchema>, RegistryError> {
        let what = format!("subject {subject} version latest");
        self.avro_at(&format!("/subjects/{}/versions/latest", percent_encode(subject)), &what).await
    }

    async fn avro_at(&self, path: &str, what: &str) -> Result<Arc<AvroSchema>, RegistryError> {
        let (registered, references) = self.with_references(path, "", SchemaType::Avro, what).await?;
        let mut parser = SchemaParser::new();
        for (inner_what, reference) in references {
            parser
                .add_reference(&reference.schema)
                .map_err(|e| self.error(&inner_what, RegistryErrorKind::Schema(e)))?;
        }
        let schema = parser.parse(&registered.schema).map_err(|e| self.error(what, RegistryErrorKind::Schema(e)))?;
        Ok(Arc::new(schema))
    }

    /// The Protobuf schema registered under `id`, its references resolved; cached.
    pub async fn protobuf_schema(&self, id: SchemaId) -> Result<Arc<ProtobufSchema>, RegistryError> {
        if let Some(schema) = self.protobuf.lock().ok().and_then(|cache| cache.get(&id).cloned()) {
            return Ok(schema);
        }
        let schema = self.protobuf_at(&format!("/schemas/ids/{id}"), &format!("schema id {id}")).await?;
        if let Ok(mut cache) = self.protobuf.lock() {
            cache.insert(id, schema.clone());
        }
        Ok(schema)
    }

    /// The latest Protobuf schema registered under `subject` (not cached: it changes).
    pub async fn latest_protobuf_schema(&self, subject: &str) -> Result<Arc<ProtobufSchema>, RegistryError> {
        let what = format!("subject {subject} version latest");
        self.protobuf_at(&format!("/subjects/{}/versions/latest", percent_encode(subject)), &what).await
    }

    /// Protobuf schemas are asked for as serialized `FileDescriptorProto`s (base64), as
    /// Confluent's own deserializers ask: no `.proto` parser is needed (see DESIGN.md).
    async fn protobuf_at(&self, path: &str, what: &str) -> Result<Arc<ProtobufSchema>, RegistryError> {
        const SERIALIZED: &str = "?format=serialized";
        let (registered, references) = self.with_references(path, SERIALIZED, SchemaType::Protobuf, what).await?;
        let bad = |what: &str, error| self.error(what, RegistryErrorKind::ProtobufSchema(Box::new(error)));
        let main = serialized_descriptor(&registered.schema).map_err(|e| bad(what, e))?;
        let mut files = Vec::with_capacity(references.len());
        for (inner_what, reference) in &references {
            files.push(serialized_descriptor(&reference.schema).map_err(|e| bad(inner_what, e))?);
        }
        let files: Vec<&[u8]> = files.iter().map(Vec::as_slice).collect();
        let schema = ProtobufSchema::from_descriptors(&main, &files).map_err(|e| bad(what, e))?;
        Ok(Arc::new(schema))
    }

    /// The schema at `path` (with `query`), checked to be of `expected` type, and its
    /// references (each with its `what`), dependencies before dependents.
    async fn with_references(
        &self,
        path: &str,
        query: &str,
        expected: SchemaType,
        what: &str,
    ) -> Result<(RegisteredSchema, Vec<(String, RegisteredSchema)>), RegistryError> {
        let registered = self.fetch(&format!("{path}{query}"), what).await?;
        self.check_type(&registered, expected, what)?;
        let mut seen = Vec::new();
        let mut references = Vec::new();
        let lookup = Lookup { query, expected, what };
        self.add_references(&registered.references, &lookup, &mut seen, 0, &mut references).await?;
        Ok((registered, references))
    }

    fn check_type(&self, registered: &RegisteredSchema, expected: SchemaType, what: &str) -> Result<(), RegistryError> {
        if registered.schema_type != expected {
            return Err(self.error(what, RegistryErrorKind::WrongType { expected, found: registered.schema_type }));
        }
        Ok(())
    }

    /// Depth-first, dependencies before dependents; a subject/version already fetched is
    /// skipped, one still being resolved (a cycle) is an error.
    fn add_references<'a>(
        &'a self,
        references: &'a [SchemaReference],
        lookup: &'a Lookup<'a>,
        seen: &'a mut Vec<(String, i64, bool)>,
        depth: usize,
        out: &'a mut Vec<(String, RegisteredSchema)>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), RegistryError>> + Send + 'a>> {
        Box::pin(async move {
            let what = lookup.what;
            if depth >= MAX_REFERENCE_DEPTH && !references.is_empty() {
                return Err(self
                    .error(what, RegistryErrorKind::References(format!("nested deeper than {MAX_REFERENCE_DEPTH}"))));
            }
            for reference in references {
                match seen
                    .iter()
                    .find(|(subject, version, _)| *subject == reference.subject && *version == reference.version)
                {
                    Some((_, _, true)) => continue,
                    Some((_, _, false)) => {
                        return Err(self.error(
                            what,
                            RegistryErrorKind::References(format!(
                                "a cycle through subject {} version {}",
                                reference.subject, reference.version
                            )),
                        ))
                    }
                    None => {}
                }
                if seen.len() >= MAX_REFERENCES {
                    return Err(self.error(what, RegistryErrorKind::References(format!("more than {MAX_REFERENCES}"))));
                }
                seen.push((reference.subject.clone(), reference.version, false));
                let inner_what = format!(
                    "{what}, reference {} (subject {} version {})",
                    reference.name, reference.subject, reference.version
                );
                let path = format!(
                    "/subjects/{}/versions/{}{}",
                    percent_encode(&reference.subject),
                    reference.version,
                    lookup.query
                );
                let registered = self.fetch(&path, &inner_what).await?;
                self.check_type(&registered, lookup.expected, &inner_what)?;
                self.add_references(&registered.references, lookup, seen, depth + 1, out).await?;
                out.push((inner_what, registered));
                if let Some(entry) =
                    seen.iter_mut().find(|(s, v, _)| *s == reference.subject && *v == reference.version)
                {
                    entry.2 = true;
                }
            }
            Ok(())
        })
    }

    fn error(&self, what: &str, kind: RegistryErrorKind) -> RegistryError {
        RegistryError { url: self.settings.url.clone(), what: what.to_string(), kind }
    }

    /// One GET with bounded retries on 5xx and transient transport errors.
    async fn fetch(&self, path: &str, what: &str) -> Result<RegisteredSchema, RegistryError> {
        let body = self.send(path, None, what).await?;
        decode_schema_response(&body).map_err(|e| self.error(what, RegistryErrorKind::BadResponse(e)))
    }

    /// A request to `path` (a GET, or a POST of the JSON `post`) with bounded retries on 5xx
    /// and transient transport errors; the body of its 200 answer.
    async fn send(&self, path: &str, post: Option<&str>, what: &str) -> Result<Vec<u8>, RegistryError> {
        let url = format!("{}{path}", self.settings.url);
        let mut attempt = 0;
        loop {
            attempt += 1;
            let request = match post {
                None => HttpRequest::get(&url),
                Some(body) => HttpRequest::post(&url, "application/vnd.schemaregistry.v1+json", body.as_bytes()),
            };
            let request = request
                .map_err(|source| self.error(what, RegistryErrorKind::Http { source, attempts: attempt }))?
                .header("Accept", "application/vnd.schemaregistry.v1+json, application/json");
            let request = match &self.settings.auth {
                RegistryAuth::None => request,
                RegistryAuth::Basic { username, password } => request.basic_auth(username, password),
                RegistryAuth::Bearer(token) => request.bearer_auth(token),
            };
            let retry = match self.http.send(request).await {
                Ok(response) => match response.status {
                    200 => return Ok(response.body),
                    401 => return Err(self.error(what, RegistryErrorKind::Unauthorized)),
                    403 => return Err(self.error(what, RegistryErrorKind::Forbidden)),
                    404 => return Err(self.error(what, RegistryErrorKind::NotFound)),
                    // Registering: the schema does not parse, or breaks the subject's
                    // compatibility; the registry's message says which.
                    status @ (409 | 422) if post.is_some() => {
                        let message = registry_message(&response.body);
                        return Err(self.error(what, RegistryErrorKind::Refused { status, message }));
                    }
                    status if status >= 500 && attempt < ATTEMPTS => format!("HTTP status {status}"),
                    status => return Err(self.error(what, RegistryErrorKind::Status { status, attempts: attempt })),
                },
                Err(source) if source.is_transient() && attempt < ATTEMPTS => source.to_string(),
                Err(source) => return Err(self.error(what, RegistryErrorKind::Http { source, attempts: attempt })),
            };
            let backoff = Duration::from_millis(200 << (attempt - 1));
            tracing::warn!(registry = %self.settings.url, what, failure = %retry, attempt, retry_in_ms = backoff.as_millis() as u64, "schema registry request failed; retrying");
            tokio::time::sleep(backoff).await;
        }
    }

    /// The id a writer frames its records with under `subject`: `register`'s schema text
    /// registered (the registry answers the existing id when the subject has it already), or
    /// the subject's latest version.
    pub async fn writer_schema_id(
        &self,
        subject: &str,
        schema_type: SchemaType,
        register: Option<&str>,
    ) -> Result<SchemaId, RegistryError> {
        let subject_path = percent_encode(subject);
        let (what, body) = match register {
            Some(text) => {
                let what = format!("registering a schema under subject {subject}");
                let request = serde_json::json!({"schema": text, "schemaType": schema_type.name()}).to_string();
                (what.clone(), self.send(&format!("/subjects/{subject_path}/versions"), Some(&request), &what).await?)
            }
            None => {
                let what = format!("subject {subject} version latest");
                (what.clone(), self.send(&format!("/subjects/{subject_path}/versions/latest"), None, &what).await?)
            }
        };
        decode_id_response(&body).map_err(|e| self.error(&what, RegistryErrorKind::BadResponse(e)))
    }
}

impl RegistryClient {
    /// Registers `text` (of `schema_type`, naming `references`) under `subject`: its id, and its
    /// version in the subject, which a schema referring to it names (the registry answers the
    /// existing id and version for a schema the subject has already).
    pub async fn register(
        &self,
        subject: &str,
        schema_type: SchemaType,
        text: &str,
        references: &[SchemaReference],
    ) -> Result<(SchemaId, i64), RegistryError> {
        let subject_path = percent_encode(subject);
        let references: Vec<Value> = references
            .iter()
            .map(|r| serde_json::json!({"name": r.name, "subject": r.subject, "version": r.version}))
            .collect();
        let request =
            serde_json::json!({"schema": text, "schemaType": schema_type.name(), "references": references}).to_string();
        let what = format!("registering a schema under subject {subject}");
        let body = self.send(&format!("/subjects/{subject_path}/versions"), Some(&request), &what).await?;
        let id = decode_id_response(&body).map_err(|e| self.error(&what, RegistryErrorKind::BadResponse(e)))?;
        let what = format!("looking up the version of schema id {id} in subject {subject}");
        let body = self.send(&format!("/subjects/{subject_path}"), Some(&request), &what).await?;
        let answer = serde_json::from_slice::<Value>(&body).ok();
        let field = |name: &str| answer.as_ref().and_then(|answer| answer.get(name)).and_then(Value::as_i64);
        let (Some(version), Some(found)) = (field("version"), field("id")) else {
            let e = ResponseError("the answer has no integer `version` and `id`".into());
            return Err(self.error(&what, RegistryErrorKind::BadResponse(e)));
        };
        if found != i64::from(id.0) {
            let e = ResponseError(format!("the subject holds the schema as id {found}, not the {id} registering gave"));
            return Err(self.error(&what, RegistryErrorKind::BadResponse(e)));
        }
        Ok((id, version))
    }
}

/// The schema id in a registry's answer (`{"id": 7}` from registering, or a subject version).
pub fn decode_id_response(body: &[u8]) -> Result<SchemaId, ResponseError> {
    if body.len() > MAX_RESPONSE_BYTES {
        return Err(ResponseError(format!("the answer is larger than {MAX_RESPONSE_BYTES} bytes")));
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| ResponseError(format!("the answer is not JSON ({e})")))?;
    let id = value.get("id").and_then(Value::as_u64).and_then(|id| u32::try_from(id).ok());
    id.map(SchemaId).ok_or_else(|| ResponseError("the answer has no schema `id` (an integer of 32 bits)".into()))
}

/// The `message` of a registry's error answer, cut to 300 characters (or the body's start).
fn registry_message(body: &[u8]) -> String {
    let text = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|value| value.get("message").and_then(Value::as_str).map(str::to_string))
        .unwrap_or_else(|| String::from_utf8_lossy(body).into_owned());
    text.chars().take(300).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_answers_of_both_endpoints() {
        let by_id = decode_schema_response(br#"{"schema":"\"string\""}"#).unwrap();
        assert_eq!(
            by_id,
            RegisteredSchema { schema_type: SchemaType::Avro, schema: "\"string\"".into(), references: vec![] }
        );
        let version = decode_schema_response(
            br#"{"subject":"s","version":2,"id":7,"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";","references":[{"name":"a.proto","subject":"a","version":1}]}"#,
        )
        .unwrap();
        assert_eq!(version.schema_type, SchemaType::Protobuf);
        assert_eq!(
            version.references,
            vec![SchemaReference { name: "a.proto".into(), subject: "a".into(), version: 1 }]
        );
    }

    #[test]
    fn refuses_what_is_not_a_schema_answer() {
        for (body, reason) in [
            (&b"<html>"[..], "not JSON"),
            (b"[]", "not a JSON object"),
            (br#"{"error_code":40403,"message":"Schema not found"}"#, "no string `schema`"),
            (br#"{"schema":"x","schemaType":"XML"}"#, "unknown schemaType"),
            (br#"{"schema":"x","references":[{"name":"a"}]}"#, "a reference without"),
        ] {
            let error = decode_schema_response(body).unwrap_err();
            assert!(error.0.contains(reason), "{error}");
        }
    }

    #[test]
    fn errors_name_the_registry_and_the_remedy_without_secrets() {
        let client = RegistryClient::new(RegistrySettings {
            auth: RegistryAuth::Basic { username: "user".into(), password: "hunter2".into() },
            ..RegistrySettings::new("http://registry.test:8081/")
        });
        let text = client.error("schema id 7", RegistryErrorKind::Unauthorized).to_string();
        assert_eq!(text, "schema registry http://registry.test:8081, schema id 7: 401 Unauthorized: check schema_registry's username/password, api_key/api_secret or bearer_token");
        assert!(!format!("{client:?}").contains("hunter2"));
        let text = client
            .error(
                "schema id 7",
                RegistryErrorKind::WrongType { expected: SchemaType::Avro, found: SchemaType::Protobuf },
            )
            .to_string();
        assert!(text.contains("PROTOBUF") && text.contains("`format`"), "{text}");
    }
}
