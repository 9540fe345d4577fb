//! OAuth 2 client credentials (RFC 6749 section 4.4) against an OpenID Connect provider's token
//! endpoint, as Kafka's `OAuthBearerLoginCallbackHandler` does (KIP-768): a form POST of
//! `grant_type=client_credentials` (and `scope`), the client id and secret in HTTP Basic
//! authentication, and the `access_token` of the JSON answer as the OAUTHBEARER token.
//!
//! The token is cached and fetched again once 80% of its lifetime has passed (Kafka's
//! `sasl.login.refresh.window.factor`), or earlier than a minute before it expires. A failed
//! refresh keeps handing out the cached token while it is still valid.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;

use super::{excerpt, json, TokenError, TokenFuture, TokenSource};
use crate::http::{HttpClient, HttpConfig, HttpRequest, HttpResponse};
use crate::protocol::sasl::SecretString;

/// Settings of an [`OidcTokenSource`]. `Debug` hides the client secret.
#[derive(Clone)]
#[non_exhaustive]
pub struct OidcConfig {
    /// The token endpoint, `https://...` (plain `http://` only to a loopback address).
    pub token_endpoint_url: String,
    /// The OAuth client id.
    pub client_id: String,
    /// The OAuth client secret.
    pub client_secret: SecretString,
    /// The `scope` parameter, if the provider needs one.
    pub scope: Option<String>,
    /// The HTTP client's settings: the CA of the endpoint (`None`: the system trust store),
    /// timeouts.
    pub http: HttpConfig,
}

impl OidcConfig {
    /// Client credentials for `token_endpoint_url`.
    pub fn new(
        token_endpoint_url: impl Into<String>,
        client_id: impl Into<String>,
        client_secret: impl Into<SecretString>,
    ) -> Self {
        OidcConfig {
            token_endpoint_url: token_endpoint_url.into(),
            client_id: client_id.into(),
            client_secret: client_secret.into(),
            scope: None,
            http: HttpConfig::default(),
        }
    }

    /// The same settings asking for `scope`.
    pub fn with_scope(mut self, scope: impl Into<String>) -> Self {
        self.scope = Some(scope.into());
        self
    }

    /// The same settings with this HTTP configuration (a private CA, timeouts).
    pub fn with_http(mut self, http: HttpConfig) -> Self {
        self.http = http;
        self
    }
}

impl fmt::Debug for OidcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcConfig")
            .field("token_endpoint_url", &self.token_endpoint_url)
            .field("client_id", &self.client_id)
            .field("client_secret", &self.client_secret)
            .field("scope", &self.scope)
            .field("http", &self.http)
            .finish()
    }
}

/// A token endpoint's successful answer.
#[derive(Clone)]
pub struct TokenResponse {
    /// The access token.
    pub access_token: SecretString,
    /// How long it is valid, from `expires_in` or the JWT's `exp` claim.
    pub lifetime: Duration,
}

impl fmt::Debug for TokenResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenResponse").field("lifetime", &self.lifetime).finish_non_exhaustive()
    }
}

/// Decodes a token endpoint's answer (RFC 6749 5.1 and 5.2), sans-IO. `now` is the wall clock,
/// for a JWT `exp` claim when there is no `expires_in`. Errors name `endpoint` and never quote
/// a successful answer's body (it holds the token).
pub fn decode_token_response(
    endpoint: &str,
    status: u16,
    body: &[u8],
    now: SystemTime,
) -> Result<TokenResponse, TokenError> {
    let text = String::from_utf8_lossy(body);
    let members = json::parse_object(&text);
    if !(200..300).contains(&status) {
        let detail = match &members {
            Some(members) => {
                let error = json::string(members, "error").unwrap_or("no error code");
                match json::string(members, "error_description") {
                    Some(description) => format!("{}: {}", excerpt(error), excerpt(description)),
                    None => excerpt(error),
                }
            }
            None => excerpt(&text),
        };
        let hint = match (status, members.as_deref().and_then(|m| json::string(m, "error"))) {
            (_, Some("invalid_client")) | (401, _) => "; check the client id and secret",
            (_, Some("invalid_scope")) => "; check the scope",
            (_, Some("unauthorized_client")) => "; the client may not use the client_credentials grant",
            _ => "",
        };
        let message = format!("the token endpoint {endpoint} answered HTTP {status} ({detail}){hint}");
        return Err(if status >= 500 || status == 429 {
            TokenError::transient(message)
        } else {
            TokenError::permanent(message)
        });
    }
    let Some(members) = members else {
        return Err(TokenError::permanent(format!(
            "the token endpoint {endpoint} answered HTTP {status} with a body that is not a JSON object"
        )));
    };
    let token = json::string(&members, "access_token").filter(|token| !token.is_empty()).ok_or_else(|| {
        TokenError::permanent(format!("the token endpoint {endpoint} answered without an access_token"))
    })?;
    if let Some(kind) = json::string(&members, "token_type") {
        if !kind.eq_ignore_ascii_case("bearer") {
            return Err(TokenError::permanent(format!(
                "the token endpoint {endpoint} issued a {} token, not a bearer token",
                excerpt(kind)
            )));
        }
    }
    let lifetime = match json::integer(&members, "expires_in") {
        Some(seconds) => Duration::from_secs(seconds.max(0) as u64),
        None => match jwt_expiry(token) {
            Some(exp) => {
                let now = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
                Duration::from_secs(exp.saturating_sub(now))
            }
            None => {
                return Err(TokenError::permanent(format!(
                    "the token endpoint {endpoint} gave neither expires_in nor a JWT with an exp claim: the token's \
                     lifetime is unknown"
                )))
            }
        },
    };
    if lifetime.is_zero() {
        return Err(TokenError::permanent(format!(
            "the token endpoint {endpoint} issued a token that has already expired; check this machine's clock"
        )));
    }
    Ok(TokenResponse { access_token: SecretString::new(token), lifetime })
}

/// The `exp` claim of a JWT (`header.payload.signature`, base64url), if it is one.
fn jwt_expiry(token: &str) -> Option<u64> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    let members = json::parse_object(std::str::from_utf8(&bytes).ok()?)?;
    json::integer(&members, "exp").map(|exp| exp.max(0) as u64)
}

struct Cached {
    token: SecretString,
    refresh_at: Instant,
    expires_at: Instant,
}

/// Fetches and caches OAUTHBEARER tokens with the client-credentials grant. Cheap to share
/// (`Arc`); concurrent connections wait for one fetch.
pub struct OidcTokenSource {
    config: OidcConfig,
    endpoint: String,
    client: HttpClient,
    cache: tokio::sync::Mutex<Option<Cached>>,
}

impl fmt::Debug for OidcTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OidcTokenSource").field("config", &self.config).finish_non_exhaustive()
    }
}

impl OidcTokenSource {
    /// A source for `config`; checks the URL now (a plain `http://` URL only to a loopback
    /// address: the client secret must not cross a network in clear).
    pub fn new(config: OidcConfig) -> Result<Arc<OidcTokenSource>, TokenError> {
        let url = crate::http::Url::parse(&config.token_endpoint_url)
            .map_err(|problem| TokenError::permanent(format!("the token endpoint URL {problem}")))?;
        if !url.https && !url.is_loopback() {
            return Err(TokenError::permanent(format!(
                "the token endpoint URL {url} is not https: the client secret would travel in clear; use https"
            )));
        }
        if config.client_id.is_empty() {
            return Err(TokenError::permanent("the OAuth client id is empty"));
        }
        let client = HttpClient::new(config.http.clone());
        Ok(Arc::new(OidcTokenSource {
            endpoint: url.to_string(),
            config,
            client,
            cache: tokio::sync::Mutex::new(None),
        }))
    }

    async fn fetch(&self) -> Result<TokenResponse, TokenError> {
        let mut form = vec![("grant_type", "client_credentials")];
        if let Some(scope) = &self.config.scope {
            form.push(("scope", scope.as_str()));
        }
        let request = HttpRequest::post_form(&self.config.token_endpoint_url, &form)
            .map_err(|error| TokenError::permanent(error.to_string()))?
            .header("Accept", "application/json")
            .basic_auth(&self.config.client_id, self.config.client_secret.expose_secret());
        let response: HttpResponse = self.client.send(request).await.map_err(|error| {
            let message = format!("cannot get a token from {}: {error}", self.endpoint);
            if error.is_transient() {
                TokenError::transient(message)
            } else {
                TokenError::permanent(message)
            }
        })?;
        decode_token_response(&self.endpoint, response.status, &response.body, SystemTime::now())
    }

    async fn current(&self) -> Result<SecretString, TokenError> {
        let mut cache = self.cache.lock().await;
        let now = Instant::now();
        if let Some(cached) = cache.as_ref() {
            if now < cached.refresh_at {
                return Ok(cached.token.clone());
            }
        }
        match self.fetch().await {
            Ok(response) => {
                let fetched_at = Instant::now();
                // Kafka's refresh window (80%), but at least a minute before expiry for long tokens and
                // at half the lifetime for short ones.
                let lifetime = response.lifetime;
                let refresh_in =
                    lifetime.mul_f64(0.8).min(lifetime.saturating_sub(Duration::from_secs(60)).max(lifetime / 2));
                let token = response.access_token.clone();
                tracing::debug!(endpoint = %self.endpoint, "fetched an OAuth token from {} valid for {} s", self.endpoint, response.lifetime.as_secs());
                *cache = Some(Cached {
                    token: response.access_token,
                    refresh_at: fetched_at + refresh_in,
                    expires_at: fetched_at + response.lifetime,
                });
                Ok(token)
            }
            Err(error) => match cache.as_ref() {
                Some(cached) if now + Duration::from_secs(5) < cached.expires_at => {
                    tracing::warn!(endpoint = %self.endpoint, "refreshing the OAuth token failed ({error}); the cached token is still valid");
                    Ok(cached.token.clone())
                }
                _ => Err(error),
            },
        }
    }
}

impl TokenSource for OidcTokenSource {
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ENDPOINT: &str = "https://idp.example/token";

    fn jwt(payload: &str) -> String {
        let encode = |text: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(text);
        format!("{}.{}.sig", encode(r#"{"alg":"RS256"}"#), encode(payload))
    }

    #[test]
    fn success_with_expires_in_or_exp() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let body = br#"{"access_token":"abc.def.ghi","token_type":"Bearer","expires_in":3600}"#;
        let response = decode_token_response(ENDPOINT, 200, body, now).unwrap();
        assert_eq!(response.access_token.expose_secret(), "abc.def.ghi");
        assert_eq!(response.lifetime, Duration::from_secs(3600));
        assert!(!format!("{response:?}").contains("abc"));
        let token = jwt(r#"{"sub":"x","exp":1000600}"#);
        let body = format!(r#"{{"access_token":"{token}","token_type":"bearer"}}"#);
        let response = decode_token_response(ENDPOINT, 200, body.as_bytes(), now).unwrap();
        assert_eq!(response.lifetime, Duration::from_secs(600));
    }

    #[test]
    fn errors_say_what_and_never_quote_the_token() {
        let now = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let cases: [(u16, &[u8], &str, bool); 8] = [
            (
                401,
                br#"{"error":"invalid_client","error_description":"bad secret"}"#,
                "invalid_client: bad secret",
                false,
            ),
            (400, br#"{"error":"invalid_scope"}"#, "check the scope", false),
            (503, b"<html>down</html>", "HTTP 503 (<html>down</html>)", true),
            (200, b"not json", "not a JSON object", false),
            (200, br#"{"token_type":"Bearer"}"#, "without an access_token", false),
            (200, br#"{"access_token":"secret-token","token_type":"mac","expires_in":1}"#, "not a bearer", false),
            (200, br#"{"access_token":"secret-token"}"#, "lifetime is unknown", false),
            (200, br#"{"access_token":"secret-token","expires_in":0}"#, "already expired", false),
        ];
        for (status, body, needle, transient) in cases {
            let error = decode_token_response(ENDPOINT, status, body, now).unwrap_err();
            assert!(error.message.contains(needle), "{status}: {error}");
            assert!(error.message.contains(ENDPOINT), "{error}");
            assert!(!error.message.contains("secret-token"), "{error}");
            assert_eq!(error.transient, transient, "{error}");
        }
        let expired = jwt(r#"{"exp":999000}"#);
        let body = format!(r#"{{"access_token":"{expired}"}}"#);
        assert!(decode_token_response(ENDPOINT, 200, body.as_bytes(), now).unwrap_err().message.contains("clock"));
    }

    #[test]
    fn refuses_plain_http_to_a_remote_endpoint() {
        let error = OidcTokenSource::new(OidcConfig::new("http://idp.example/token", "id", "s")).unwrap_err();
        assert!(error.message.contains("not https"), "{error}");
        assert!(OidcTokenSource::new(OidcConfig::new("http://127.0.0.1:9/token", "id", "s")).is_ok());
        let debug = format!("{:?}", OidcConfig::new("https://x/", "id", "the-secret"));
        assert!(!debug.contains("the-secret"), "{debug}");
    }
}
