//! AWS MSK IAM: OAUTHBEARER tokens that are SigV4-presigned `kafka-cluster:Connect` URLs, as
//! AWS's signer libraries make them, from AWS credentials found the standard way.
//!
//! Credentials come from the first of these that is configured (the order of AWS's SDKs):
//!
//! 1. `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`);
//! 2. web identity, as on EKS: `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`
//!    (`AWS_ROLE_SESSION_NAME`), exchanged with STS `AssumeRoleWithWebIdentity`;
//! 3. the ECS container endpoint: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI`, or
//!    `AWS_CONTAINER_CREDENTIALS_FULL_URI` with `AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)`;
//! 4. the EC2 instance metadata service, IMDSv2 (a PUT for a session token first), unless
//!    `AWS_EC2_METADATA_DISABLED=true`; `AWS_EC2_METADATA_SERVICE_ENDPOINT` moves it.
//!
//! With [`MskIamConfig::role_arn`] those credentials then assume that role (STS `AssumeRole`,
//! SigV4-signed). STS is `https://sts.<region>.amazonaws.com/` unless `AWS_ENDPOINT_URL_STS` (or
//! `AWS_ENDPOINT_URL`) says otherwise. Temporary credentials are cached and fetched again before
//! they expire (at the latest 5 minutes before); every authentication signs a fresh token (valid
//! 900 s; the broker's session lifetime makes the connection re-authenticate in time).
//!
//! # References
//! - AWS SDKs and Tools reference guide: "Standardized credential providers", "IMDS",
//!   "Container credential provider", "Assume role with web identity".
//! - `aws-msk-iam-sasl-signer-python`; franz-go `pkg/sasl/aws`.

pub mod sigv4;
pub mod sts;
mod time;

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::{excerpt, json, TokenError, TokenFuture, TokenSource};
use crate::http::{HttpClient, HttpConfig, HttpError, HttpRequest, HttpResponse, Url};
use crate::protocol::sasl::SecretString;
pub use sigv4::{msk_presigned_url, msk_token, sign_form_post, MSK_TOKEN_EXPIRY_SECS};
pub use sts::{decode_sts_response, StsAnswer};

/// AWS credentials. `Debug` shows the access key id only.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct AwsCredentials {
    /// The access key id (not secret).
    pub access_key_id: String,
    /// The secret access key.
    pub secret_access_key: SecretString,
    /// The session token of temporary credentials.
    pub session_token: Option<SecretString>,
    /// When temporary credentials expire.
    pub expiration: Option<SystemTime>,
}

impl AwsCredentials {
    /// Long-term (or caller-managed) credentials.
    pub fn new(
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<SecretString>,
        session_token: Option<SecretString>,
    ) -> Self {
        AwsCredentials {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token,
            expiration: None,
        }
    }
}

impl fmt::Debug for AwsCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AwsCredentials")
            .field("access_key_id", &self.access_key_id)
            .field("secret_access_key", &self.secret_access_key)
            .field("session_token", &self.session_token.as_ref().map(|_| "<redacted>"))
            .field("expiration", &self.expiration.map(time::iso8601))
            .finish()
    }
}

/// `secs` since the epoch as ISO 8601 UTC (for messages).
pub(crate) fn iso8601_utc(secs: i64) -> String {
    time::iso8601(UNIX_EPOCH + Duration::from_secs(secs.max(0) as u64))
}

/// Reads an environment variable; tests give their own.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Settings of an [`MskIamTokenSource`].
#[derive(Clone)]
#[non_exhaustive]
pub struct MskIamConfig {
    /// The cluster's region (`us-east-1`).
    pub region: String,
    /// A role to assume with the credentials found.
    pub role_arn: Option<String>,
    /// The session name for [`MskIamConfig::role_arn`] (default `sluice`).
    pub role_session_name: Option<String>,
    /// For STS: a private CA, timeouts.
    pub http: HttpConfig,
    /// Where environment variables are read (the process environment by default).
    pub env: EnvLookup,
}

impl fmt::Debug for MskIamConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MskIamConfig")
            .field("region", &self.region)
            .field("role_arn", &self.role_arn)
            .field("role_session_name", &self.role_session_name)
            .finish_non_exhaustive()
    }
}

impl MskIamConfig {
    /// Tokens for a cluster in `region`, credentials from the standard chain.
    pub fn new(region: impl Into<String>) -> Self {
        MskIamConfig {
            region: region.into(),
            role_arn: None,
            role_session_name: None,
            http: HttpConfig::default(),
            env: Arc::new(|name: &str| std::env::var(name).ok()),
        }
    }

    /// The same settings assuming `role_arn` (with `session_name`, default `sluice`).
    pub fn with_role(mut self, role_arn: impl Into<String>, session_name: Option<String>) -> Self {
        self.role_arn = Some(role_arn.into());
        self.role_session_name = session_name;
        self
    }

    /// The same settings reading environment variables through `env`.
    pub fn with_env(mut self, env: impl Fn(&str) -> Option<String> + Send + Sync + 'static) -> Self {
        self.env = Arc::new(env);
        self
    }

    /// The same settings with this HTTP configuration for STS.
    pub fn with_http(mut self, http: HttpConfig) -> Self {
        self.http = http;
        self
    }
}

/// Checks an AWS region name: lowercase letters, digits and dashes (it becomes a host name).
fn valid_region(region: &str) -> bool {
    !region.is_empty() && region.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

struct Cached {
    credentials: AwsCredentials,
    refresh_at: Option<SystemTime>,
}

/// Signs MSK IAM tokens with credentials from the standard chain (see the module docs).
pub struct MskIamTokenSource {
    config: MskIamConfig,
    sts: HttpClient,
    /// ECS and IMDS: link-local, answering within a second when they exist at all.
    metadata: HttpClient,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

impl fmt::Debug for MskIamTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MskIamTokenSource").field("config", &self.config).finish_non_exhaustive()
    }
}

const IMDS_DEFAULT: &str = "http://169.254.169.254";
const ECS_HOST: &str = "http://169.254.170.2";
/// The most of a web identity token file read.
const MAX_TOKEN_FILE_BYTES: u64 = 64 * 1024;

impl MskIamTokenSource {
    /// A source for `config`; checks the region and role now.
    pub fn new(config: MskIamConfig) -> Result<Arc<MskIamTokenSource>, TokenError> {
        if !valid_region(&config.region) {
            return Err(TokenError::permanent(format!(
                "the AWS region {:?} is not a region name (like us-east-1)",
                excerpt(&config.region)
            )));
        }
        if let Some(role) = &config.role_arn {
            if !role.starts_with("arn:") {
                return Err(TokenError::permanent(format!(
                    "the role {:?} is not an ARN (arn:aws:iam::<account>:role/<name>)",
                    excerpt(role)
                )));
            }
        }
        let sts = HttpClient::new(config.http.clone());
        let metadata = HttpClient::new(
            HttpConfig::default()
                .with_timeouts(Duration::from_secs(1), Duration::from_secs(5))
                .with_max_body_bytes(64 * 1024),
        );
        Ok(Arc::new(MskIamTokenSource { config, sts, metadata, cache: tokio::sync::Mutex::new(None) }))
    }

    fn env(&self, name: &str) -> Option<String> {
        (self.config.env)(name).filter(|value| !value.trim().is_empty())
    }

    /// The credentials tokens are signed with: cached, or fetched now.
    pub async fn credentials(&self) -> Result<AwsCredentials, TokenError> {
        let mut cache = self.cache.lock().await;
        let now = SystemTime::now();
        if let Some(cached) = cache.as_ref() {
            if cached.refresh_at.is_none_or(|at| now < at) {
                return Ok(cached.credentials.clone());
            }
        }
        let fetched = self.fetch().await;
        match fetched {
            Ok(credentials) => {
                let refresh_at = credentials.expiration.map(|expiration| {
                    let left = expiration.duration_since(now).unwrap_or_default();
                    expiration - (left / 2).min(Duration::from_secs(300))
                });
                *cache = Some(Cached { credentials: credentials.clone(), refresh_at });
                Ok(credentials)
            }
            Err(error) => match cache.as_ref() {
                Some(cached) if cached.credentials.expiration.is_some_and(|e| now + Duration::from_secs(30) < e) => {
                    tracing::warn!("refreshing AWS credentials failed ({error}); the cached ones are still valid");
                    Ok(cached.credentials.clone())
                }
                _ => Err(error),
            },
        }
    }

    async fn fetch(&self) -> Result<AwsCredentials, TokenError> {
        let base = self.base_credentials().await?;
        let Some(role) = &self.config.role_arn else { return Ok(base) };
        let session = self.config.role_session_name.clone().unwrap_or_else(|| "sluice".to_string());
        self.assume_role(&base, role, &session).await
    }

    /// The chain, first configured source wins.
    async fn base_credentials(&self) -> Result<AwsCredentials, TokenError> {
        match (self.env("AWS_ACCESS_KEY_ID"), self.env("AWS_SECRET_ACCESS_KEY")) {
            (Some(id), Some(secret)) => {
                let token = self.env("AWS_SESSION_TOKEN").map(SecretString::new);
                return Ok(AwsCredentials::new(id.trim(), secret.trim(), token));
            }
            (Some(_), None) => {
                return Err(TokenError::permanent(
                    "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both, or neither to use another \
                     credential source",
                ))
            }
            (None, Some(_)) => {
                return Err(TokenError::permanent(
                    "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not: set both, or neither to use another \
                     credential source",
                ))
            }
            (None, None) => {}
        }
        if let Some(file) = self.env("AWS_WEB_IDENTITY_TOKEN_FILE") {
            return self.web_identity(&file).await;
        }
        if let Some(relative) = self.env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") {
            let url = format!("{ECS_HOST}{}", relative.trim());
            return self.container(&url).await;
        }
        if let Some(full) = self.env("AWS_CONTAINER_CREDENTIALS_FULL_URI") {
            return self.container(full.trim()).await;
        }
        if self.env("AWS_EC2_METADATA_DISABLED").is_some_and(|value| value.trim().eq_ignore_ascii_case("true")) {
            return Err(TokenError::permanent(
                "no AWS credentials found: AWS_ACCESS_KEY_ID, AWS_WEB_IDENTITY_TOKEN_FILE and \
                 AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI are not set, and AWS_EC2_METADATA_DISABLED is true",
            ));
        }
        self.instance_metadata().await.map_err(|error| TokenError {
            message: format!(
                "no AWS credentials found: AWS_ACCESS_KEY_ID, AWS_WEB_IDENTITY_TOKEN_FILE and \
                 AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI are not set, and the EC2 instance metadata service \
                 gave none: {}",
                error.message
            ),
            transient: error.transient,
        })
    }

    fn sts_url(&self) -> Result<Url, TokenError> {
        let text = self
            .env("AWS_ENDPOINT_URL_STS")
            .or_else(|| self.env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://sts.{}.amazonaws.com/", self.config.region));
        let url =
            Url::parse(&text).map_err(|problem| TokenError::permanent(format!("the STS endpoint URL {problem}")))?;
        if !url.https && !url.is_loopback() {
            return Err(TokenError::permanent(format!(
                "the STS endpoint {url} is not https: credentials would travel in clear"
            )));
        }
        Ok(url)
    }

    async fn web_identity(&self, file: &str) -> Result<AwsCredentials, TokenError> {
        let role = self.env("AWS_ROLE_ARN").ok_or_else(|| {
            TokenError::permanent("AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN is not: set the role to assume")
        })?;
        let token = read_token_file(file)?;
        let session = self.env("AWS_ROLE_SESSION_NAME").unwrap_or_else(|| {
            format!("sluice-{}", SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_millis())
        });
        let url = self.sts_url()?;
        let body = sts::assume_role_with_web_identity_body(role.trim(), session.trim(), &token);
        let request = HttpRequest::post(&url.to_string(), sigv4::FORM_CONTENT_TYPE, body)
            .map_err(|error| TokenError::permanent(error.to_string()))?;
        let what = format!("STS AssumeRoleWithWebIdentity of {} at {url}", excerpt(role.trim()));
        let response = self.sts.send(request).await.map_err(|error| http_failure(&what, error))?;
        sts_credentials(&what, &response)
    }

    async fn assume_role(
        &self,
        base: &AwsCredentials,
        role: &str,
        session: &str,
    ) -> Result<AwsCredentials, TokenError> {
        let url = self.sts_url()?;
        let body = sts::assume_role_body(role, session, 3600);
        let headers =
            sigv4::sign_form_post(base, &self.config.region, "sts", &url.host_header(), &body, SystemTime::now());
        let mut request = HttpRequest::post(&url.to_string(), sigv4::FORM_CONTENT_TYPE, body)
            .map_err(|error| TokenError::permanent(error.to_string()))?;
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let what = format!("STS AssumeRole of {} at {url}", excerpt(role));
        let response = self.sts.send(request).await.map_err(|error| http_failure(&what, error))?;
        sts_credentials(&what, &response)
    }

    async fn container(&self, url_text: &str) -> Result<AwsCredentials, TokenError> {
        let url = Url::parse(url_text)
            .map_err(|problem| TokenError::permanent(format!("the ECS container credentials URL {problem}")))?;
        // As the SDKs: a full URI must be https, loopback, or the ECS / EKS link-local hosts.
        let allowed = url.https || url.is_loopback() || url.host == "169.254.170.2" || url.host == "169.254.170.23";
        if !allowed {
            return Err(TokenError::permanent(format!(
                "AWS_CONTAINER_CREDENTIALS_FULL_URI {url} is neither https nor a loopback or ECS/EKS address"
            )));
        }
        let mut request = HttpRequest::get(url_text).map_err(|error| TokenError::permanent(error.to_string()))?;
        let authorization = match self.env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE") {
            Some(file) => Some(read_token_file(&file)?),
            None => self.env("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
        };
        if let Some(authorization) = authorization {
            request = request.header("Authorization", authorization.trim());
        }
        let what = format!("the ECS container credentials endpoint {url}");
        let response = self.metadata.send(request).await.map_err(|error| http_failure(&what, error))?;
        if !response.is_success() {
            let hint = match response.status {
                401 | 403 => "; check AWS_CONTAINER_AUTHORIZATION_TOKEN(_FILE)",
                _ => "",
            };
            return Err(status_failure(&what, &response, hint));
        }
        endpoint_credentials(&what, &response.body)
    }

    async fn instance_metadata(&self) -> Result<AwsCredentials, TokenError> {
        let base = self.env("AWS_EC2_METADATA_SERVICE_ENDPOINT").unwrap_or_else(|| IMDS_DEFAULT.to_string());
        let base = base.trim().trim_end_matches('/').to_string();
        let what = format!("the EC2 instance metadata service at {base}");
        let token_url = format!("{base}/latest/api/token");
        let request = HttpRequest::new("PUT", &token_url)
            .map_err(|error| TokenError::permanent(format!("{what}: {error}")))?
            .header("X-aws-ec2-metadata-token-ttl-seconds", "21600");
        let response = self.metadata.send(request).await.map_err(|error| http_failure(&what, error))?;
        if !response.is_success() {
            let hint = match response.status {
                403 => "; IMDS may be disabled for this instance",
                _ => "",
            };
            return Err(status_failure(&format!("{what} (IMDSv2 session token)"), &response, hint));
        }
        let session = String::from_utf8_lossy(&response.body).trim().to_string();
        if session.is_empty() || !session.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::permanent(format!(
                "{what} answered the session token request with no usable token"
            )));
        }
        let roles_url = format!("{base}/latest/meta-data/iam/security-credentials/");
        let request = HttpRequest::get(&roles_url)
            .map_err(|error| TokenError::permanent(error.to_string()))?
            .header("X-aws-ec2-metadata-token", session.as_str());
        let response = self.metadata.send(request).await.map_err(|error| http_failure(&what, error))?;
        if !response.is_success() {
            let hint = match response.status {
                404 => "; no IAM role is attached to this instance (attach an instance profile)",
                401 => "; the IMDSv2 session token was refused",
                _ => "",
            };
            return Err(status_failure(&format!("{what} (role list)"), &response, hint));
        }
        let listing = String::from_utf8_lossy(&response.body);
        let role = listing.lines().map(str::trim).find(|line| !line.is_empty()).unwrap_or_default().to_string();
        if role.is_empty() || !role.bytes().all(|b| b.is_ascii_alphanumeric() || b"+=,.@_-".contains(&b)) {
            return Err(TokenError::permanent(format!("{what} lists no usable IAM role name")));
        }
        let request = HttpRequest::get(&format!("{roles_url}{role}"))
            .map_err(|error| TokenError::permanent(error.to_string()))?
            .header("X-aws-ec2-metadata-token", session.as_str());
        let response = self.metadata.send(request).await.map_err(|error| http_failure(&what, error))?;
        if !response.is_success() {
            return Err(status_failure(&format!("{what} (credentials of role {role})"), &response, ""));
        }
        endpoint_credentials(&format!("{what} (role {role})"), &response.body)
    }
}

impl TokenSource for MskIamTokenSource {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(async move {
            let credentials = self.credentials().await?;
            Ok(SecretString::new(msk_token(&credentials, &self.config.region, SystemTime::now())))
        })
    }
}

fn read_token_file(path: &str) -> Result<String, TokenError> {
    use std::io::Read as _;
    let path = path.trim();
    let file = std::fs::File::open(path)
        .map_err(|error| TokenError::permanent(format!("cannot read the token file {path}: {error}")))?;
    let mut text = String::new();
    file.take(MAX_TOKEN_FILE_BYTES)
        .read_to_string(&mut text)
        .map_err(|error| TokenError::permanent(format!("cannot read the token file {path}: {error}")))?;
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(TokenError::permanent(format!("the token file {path} is empty")));
    }
    Ok(text)
}

fn http_failure(what: &str, error: HttpError) -> TokenError {
    let message = format!("{what}: {error}");
    if error.is_transient() {
        TokenError::transient(message)
    } else {
        TokenError::permanent(message)
    }
}

fn status_failure(what: &str, response: &HttpResponse, hint: &str) -> TokenError {
    let message = format!("{what} answered HTTP {} ({}){hint}", response.status, response.body_excerpt(200));
    if response.status >= 500 || response.status == 429 {
        TokenError::transient(message)
    } else {
        TokenError::permanent(message)
    }
}

/// Credentials out of an STS answer of any status.
fn sts_credentials(what: &str, response: &HttpResponse) -> Result<AwsCredentials, TokenError> {
    match decode_sts_response(&response.body) {
        Ok(StsAnswer::Credentials(credentials)) if response.is_success() => fresh(what, credentials),
        Ok(StsAnswer::Credentials(_)) => {
            Err(TokenError::permanent(format!("{what} answered HTTP {}", response.status)))
        }
        Ok(StsAnswer::Error { code, message }) => {
            let text = format!("{what} answered HTTP {}: {code}: {message}{}", response.status, sts::remedy(&code));
            let transient = response.status >= 500 || code.contains("Throttl") || code == "IDPCommunicationError";
            Err(if transient { TokenError::transient(text) } else { TokenError::permanent(text) })
        }
        Err(why) if response.is_success() => {
            Err(TokenError::permanent(format!("{what} gave an unusable answer: {why}")))
        }
        Err(_) => Err(status_failure(what, response, "")),
    }
}

/// Credentials out of an ECS or IMDS JSON answer.
fn endpoint_credentials(what: &str, body: &[u8]) -> Result<AwsCredentials, TokenError> {
    let credentials = decode_endpoint_credentials(body)
        .map_err(|why| TokenError::permanent(format!("{what} gave an unusable answer: {why}")))?;
    fresh(what, credentials)
}

/// Refuses credentials that are already expired.
fn fresh(what: &str, credentials: AwsCredentials) -> Result<AwsCredentials, TokenError> {
    if sts::is_expired(&credentials, SystemTime::now()) {
        let at = credentials.expiration.map(time::iso8601).unwrap_or_default();
        return Err(TokenError::permanent(format!(
            "{what} gave credentials that expired at {at}; check this machine's clock"
        )));
    }
    Ok(credentials)
}

/// Decodes the JSON credentials of the ECS container endpoint and of IMDS
/// (`AccessKeyId`, `SecretAccessKey`, `Token`, `Expiration`; IMDS adds `"Code": "Success"`).
pub fn decode_endpoint_credentials(body: &[u8]) -> Result<AwsCredentials, String> {
    let text = std::str::from_utf8(body).map_err(|_| "the answer is not UTF-8 text".to_string())?;
    let members = json::parse_object(text).ok_or("the answer is not a JSON object")?;
    if let Some(code) = json::string(&members, "Code") {
        if code != "Success" {
            let message = json::string(&members, "Message").unwrap_or("");
            return Err(format!("Code {}: {}", excerpt(code), excerpt(message)));
        }
    }
    let field = |name: &str| json::string(&members, name).map(str::trim).filter(|value| !value.is_empty());
    let id = field("AccessKeyId").ok_or("no AccessKeyId")?;
    if !id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("the AccessKeyId has characters an access key id cannot have".to_string());
    }
    let secret = field("SecretAccessKey").ok_or("no SecretAccessKey")?;
    let token = field("Token").or_else(|| field("SessionToken")).map(SecretString::new);
    let expiration = match field("Expiration") {
        Some(text) => Some(time::parse_iso8601(text).ok_or("the Expiration is not an ISO 8601 time")?),
        None => None,
    };
    Ok(AwsCredentials {
        access_key_id: id.to_string(),
        secret_access_key: SecretString::new(secret),
        session_token: token,
        expiration,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_json() {
        let body = br#"{"Code":"Success","LastUpdated":"2026-12-01T00:00:00Z","Type":"AWS-HMAC","AccessKeyId":"ASIAEXAMPLE","SecretAccessKey":"s3cr3t","Token":"tok","Expiration":"2026-12-01T06:00:00Z"}"#;
        let credentials = decode_endpoint_credentials(body).unwrap();
        assert_eq!(credentials.access_key_id, "ASIAEXAMPLE");
        assert_eq!(credentials.session_token.as_ref().unwrap().expose_secret(), "tok");
        assert!(credentials.expiration.is_some());
        assert!(!format!("{credentials:?}").contains("s3cr3t"));
        for (body, needle) in [
            (r#"{"Code":"AssumeRoleUnauthorizedAccess","Message":"nope"}"#, "AssumeRoleUnauthorizedAccess: nope"),
            (r#"{"SecretAccessKey":"x"}"#, "no AccessKeyId"),
            (r#"{"AccessKeyId":"A"}"#, "no SecretAccessKey"),
            (r#"{"AccessKeyId":"A","SecretAccessKey":"s","Expiration":"never"}"#, "ISO 8601"),
            ("[1]", "not a JSON object"),
        ] {
            let error = decode_endpoint_credentials(body.as_bytes()).unwrap_err();
            assert!(error.contains(needle), "{body}: {error}");
        }
    }

    #[test]
    fn config_is_checked() {
        assert!(MskIamTokenSource::new(MskIamConfig::new("us-east-1")).is_ok());
        let error = MskIamTokenSource::new(MskIamConfig::new("US East")).unwrap_err();
        assert!(error.message.contains("region"), "{error}");
        let error = MskIamTokenSource::new(MskIamConfig::new("us-east-1").with_role("my-role", None)).unwrap_err();
        assert!(error.message.contains("ARN"), "{error}");
    }
}
