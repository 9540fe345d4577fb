//! AWS Signature Version 4, sans-IO: the presigned URL that is an MSK IAM token, and the
//! `Authorization` header of a signed STS request. Hand-written on `sha2` and `hmac` (already in
//! the tree for SCRAM); the `aws-sigv4` crate needs a newer Rust and brings a second crypto stack.
//!
//! Byte for byte what botocore's `SigV4QueryAuth` / `SigV4Auth` produce, which the differential
//! test (`tests/aws/msk_signer_oracle.py`) checks against AWS's own signer library.
//!
//! # References
//! - AWS "Signature Version 4 signing process" (canonical request, string to sign, signing key).
//! - `aws-msk-iam-sasl-signer-python` (`__construct_auth_token`); botocore `auth.py`.

use std::time::SystemTime;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::time::amz_date;
use super::AwsCredentials;
use crate::http::percent_encode;

/// The token lifetime AWS's signers use (`X-Amz-Expires`).
pub const MSK_TOKEN_EXPIRY_SECS: u64 = 900;
/// The unsigned `User-Agent` query parameter appended to the signed URL.
pub(crate) const USER_AGENT: &str = concat!("sluice/", env!("CARGO_PKG_VERSION"));

const ALGORITHM: &str = "AWS4-HMAC-SHA256";
const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes keys of any length: `new_from_slice` cannot fail for it.
    match Hmac::<Sha256>::new_from_slice(key) {
        Ok(mut mac) => {
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// The signing key: HMAC chain over date, region, service and `aws4_request`.
fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> Vec<u8> {
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    hmac(&k_service, b"aws4_request")
}

fn signature(credentials: &AwsCredentials, amz_date: &str, region: &str, service: &str, canonical: &str) -> String {
    let date = amz_date.get(..8).unwrap_or_default();
    let scope = format!("{date}/{region}/{service}/aws4_request");
    let string_to_sign = format!("{ALGORITHM}\n{amz_date}\n{scope}\n{}", sha256_hex(canonical.as_bytes()));
    let key = signing_key(credentials.secret_access_key.expose_secret(), date, region, service);
    hex(&hmac(&key, string_to_sign.as_bytes()))
}

/// The canonical query string: pairs sorted by encoded key (then value), `k=v` joined by `&`.
fn canonical_query(pairs: &[(String, String)]) -> String {
    let mut encoded: Vec<(String, String)> =
        pairs.iter().map(|(key, value)| (percent_encode(key), percent_encode(value))).collect();
    encoded.sort();
    encoded.into_iter().map(|(key, value)| format!("{key}={value}")).collect::<Vec<_>>().join("&")
}

/// The MSK IAM presigned URL for `region` at `now`, with `user_agent` as the unsigned last
/// parameter. The query is in botocore's order: the operation's parameter, the auth parameters,
/// the signature.
pub fn msk_presigned_url(credentials: &AwsCredentials, region: &str, now: SystemTime, user_agent: &str) -> String {
    let host = format!("kafka.{region}.amazonaws.com");
    let amz_date = amz_date(now);
    let date = amz_date.get(..8).unwrap_or_default();
    let service = "kafka-cluster";
    let mut pairs: Vec<(String, String)> = vec![
        ("Action".into(), "kafka-cluster:Connect".into()),
        ("X-Amz-Algorithm".into(), ALGORITHM.into()),
        ("X-Amz-Credential".into(), format!("{}/{date}/{region}/{service}/aws4_request", credentials.access_key_id)),
        ("X-Amz-Date".into(), amz_date.clone()),
        ("X-Amz-Expires".into(), MSK_TOKEN_EXPIRY_SECS.to_string()),
        ("X-Amz-SignedHeaders".into(), "host".into()),
    ];
    if let Some(token) = &credentials.session_token {
        pairs.push(("X-Amz-Security-Token".into(), token.expose_secret().to_string()));
    }
    let canonical = format!("GET\n/\n{}\nhost:{host}\n\nhost\n{EMPTY_SHA256}", canonical_query(&pairs));
    let signature = signature(credentials, &amz_date, region, service, &canonical);
    let query: Vec<String> =
        pairs.iter().map(|(key, value)| format!("{}={}", percent_encode(key), percent_encode(value))).collect();
    format!("https://{host}/?{}&X-Amz-Signature={signature}&User-Agent={}", query.join("&"), percent_encode(user_agent))
}

/// The MSK IAM OAUTHBEARER token: the presigned URL, base64url without padding.
pub fn msk_token(credentials: &AwsCredentials, region: &str, now: SystemTime) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(msk_presigned_url(credentials, region, now, USER_AGENT))
}

/// The headers that sign a `POST /` of a form `body` to `host` for `service` (STS): `X-Amz-Date`,
/// `X-Amz-Security-Token` when the credentials have one, and `Authorization`. The request must
/// also carry `Content-Type: application/x-www-form-urlencoded; charset=utf-8` (it is signed).
pub fn sign_form_post(
    credentials: &AwsCredentials,
    region: &str,
    service: &str,
    host: &str,
    body: &str,
    now: SystemTime,
) -> Vec<(String, String)> {
    let amz_date = amz_date(now);
    let date = amz_date.get(..8).unwrap_or_default();
    let mut headers = vec![
        ("content-type".to_string(), FORM_CONTENT_TYPE.to_string()),
        ("host".to_string(), host.to_string()),
        ("x-amz-date".to_string(), amz_date.clone()),
    ];
    if let Some(token) = &credentials.session_token {
        headers.push(("x-amz-security-token".to_string(), token.expose_secret().to_string()));
    }
    let canonical_headers: String = headers.iter().map(|(name, value)| format!("{name}:{}\n", value.trim())).collect();
    let signed_headers = headers.iter().map(|(name, _)| name.as_str()).collect::<Vec<_>>().join(";");
    let canonical = format!("POST\n/\n\n{canonical_headers}\n{signed_headers}\n{}", sha256_hex(body.as_bytes()));
    let signature = signature(credentials, &amz_date, region, service, &canonical);
    let authorization = format!(
        "{ALGORITHM} Credential={}/{date}/{region}/{service}/aws4_request, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    );
    let mut out = vec![("X-Amz-Date".to_string(), amz_date)];
    if let Some(token) = &credentials.session_token {
        out.push(("X-Amz-Security-Token".to_string(), token.expose_secret().to_string()));
    }
    out.push(("Authorization".to_string(), authorization));
    out
}

/// The content type a signed STS form POST carries (botocore's).
pub const FORM_CONTENT_TYPE: &str = "application/x-www-form-urlencoded; charset=utf-8";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::sasl::SecretString;
    use std::time::{Duration, UNIX_EPOCH};

    fn credentials(token: Option<&str>) -> AwsCredentials {
        AwsCredentials {
            access_key_id: "AKIDEXAMPLE".to_string(),
            secret_access_key: SecretString::new("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"),
            session_token: token.map(SecretString::new),
            expiration: None,
        }
    }

    /// AWS's documented example signing key (the SigV4 test suite's date and region, service iam).
    #[test]
    fn signing_key_matches_the_aws_example() {
        let key = signing_key("wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "20120215", "us-east-1", "iam");
        assert_eq!(hex(&key), "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d");
    }

    /// AWS's documented GET example (`get-vanilla-query` style, IAM ListUsers), which shares the
    /// whole signing path with the presigned URL.
    #[test]
    fn header_signature_matches_the_aws_list_users_example() {
        let creds = credentials(None);
        let canonical = "GET\n/\nAction=ListUsers&Version=2010-05-08\ncontent-type:application/x-www-form-urlencoded; charset=utf-8\nhost:iam.amazonaws.com\nx-amz-date:20150830T123600Z\n\ncontent-type;host;x-amz-date\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert_eq!(
            signature(&creds, "20150830T123600Z", "us-east-1", "iam", canonical),
            "5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7"
        );
    }

    #[test]
    fn presigned_url_shape() {
        let now = UNIX_EPOCH + Duration::from_secs(1_440_938_160);
        let url = msk_presigned_url(&credentials(Some("tok/en+=")), "eu-west-1", now, "ua/1");
        assert!(url.starts_with("https://kafka.eu-west-1.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIDEXAMPLE%2F20150830%2Feu-west-1%2Fkafka-cluster%2Faws4_request&X-Amz-Date=20150830T123600Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Security-Token=tok%2Fen%2B%3D&X-Amz-Signature="), "{url}");
        assert!(url.ends_with("&User-Agent=ua%2F1"), "{url}");
        let token = msk_token(&credentials(None), "eu-west-1", now);
        assert!(!token.contains('=') && !token.contains('+') && !token.contains('/'));
    }
}
