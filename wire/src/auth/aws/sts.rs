//! STS answers, sans-IO: the credentials of an `AssumeRole` / `AssumeRoleWithWebIdentity`
//! response, or the code and message of an `ErrorResponse`.
//!
//! Not a general XML parser: STS answers a fixed, flat document, so this finds the elements by
//! name (`<Credentials>` and its children, `<Error>`'s `<Code>` and `<Message>`) and decodes the
//! five predefined entities and numeric character references in their text. It reads only the
//! bytes given and builds strings no longer than them.
//!
//! # References
//! - AWS STS API reference: AssumeRole, AssumeRoleWithWebIdentity, "Common Errors".

use std::time::SystemTime;

use super::time::parse_iso8601;
use super::AwsCredentials;
use crate::auth::excerpt;
use crate::protocol::sasl::SecretString;

/// What an STS answer said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StsAnswer {
    /// Temporary credentials.
    Credentials(AwsCredentials),
    /// An error document: its `Code` and `Message`.
    Error {
        /// The error code (`AccessDenied`, `ExpiredToken`, ...).
        code: String,
        /// The message.
        message: String,
    },
}

/// Decodes an STS response body. `Err` says why it is neither credentials nor an error document.
pub fn decode_sts_response(body: &[u8]) -> Result<StsAnswer, &'static str> {
    let text = std::str::from_utf8(body).map_err(|_| "the answer is not UTF-8 text")?;
    if let Some(error) = element(text, "Error") {
        let code = element(error, "Code").map(unescape).transpose()?.unwrap_or_default();
        let message = element(error, "Message").map(unescape).transpose()?.unwrap_or_default();
        return Ok(StsAnswer::Error { code: excerpt(&code), message: excerpt(&message) });
    }
    let credentials = element(text, "Credentials").ok_or("the answer has no <Credentials> element")?;
    let field = |name: &'static str| -> Result<String, &'static str> {
        let value = element(credentials, name).ok_or(match name {
            "AccessKeyId" => "the credentials have no AccessKeyId",
            "SecretAccessKey" => "the credentials have no SecretAccessKey",
            "SessionToken" => "the credentials have no SessionToken",
            _ => "the credentials have no Expiration",
        })?;
        let value = unescape(value)?;
        let value = value.trim();
        if value.is_empty() {
            return Err("a credential field is empty");
        }
        Ok(value.to_string())
    };
    let access_key_id = field("AccessKeyId")?;
    let secret = field("SecretAccessKey")?;
    let token = field("SessionToken")?;
    let expiration = parse_iso8601(&field("Expiration")?).ok_or("the Expiration is not an ISO 8601 time")?;
    if !access_key_id.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return Err("the AccessKeyId has characters an access key id cannot have");
    }
    Ok(StsAnswer::Credentials(AwsCredentials {
        access_key_id,
        secret_access_key: SecretString::new(secret),
        session_token: Some(SecretString::new(token)),
        expiration: Some(expiration),
    }))
}

/// The text between `<name>` (or `<name attr...>`) and the next `</name>`.
fn element<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}");
    let close = format!("</{name}>");
    let mut from = 0;
    loop {
        let start = from + text.get(from..)?.find(&open)?;
        let after = start + open.len();
        match text.as_bytes().get(after) {
            Some(b'>') => {
                let content_start = after + 1;
                let end = content_start + text.get(content_start..)?.find(&close)?;
                return text.get(content_start..end);
            }
            Some(b' ' | b'\t' | b'\r' | b'\n') => {
                let gt = after + text.get(after..)?.find('>')?;
                if text.as_bytes().get(gt.saturating_sub(1)) == Some(&b'/') {
                    return Some("");
                }
                let content_start = gt + 1;
                let end = content_start + text.get(content_start..)?.find(&close)?;
                return text.get(content_start..end);
            }
            // `<Credentials` as the prefix of a longer name: look further.
            _ => from = after,
        }
    }
}

/// XML text with entities decoded; a stray `<` (markup where text belongs) or an unknown
/// entity is an error.
fn unescape(text: &str) -> Result<String, &'static str> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['&', '<']) {
        out.push_str(rest.get(..at).unwrap_or_default());
        let tail = rest.get(at..).unwrap_or_default();
        if tail.starts_with('<') {
            return Err("an element holds markup where text was expected");
        }
        let end = tail.find(';').filter(|end| *end <= 12).ok_or("an XML entity is not terminated")?;
        let entity = tail.get(1..end).unwrap_or_default();
        let decoded = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = if let Some(hex) = entity.strip_prefix("#x").or_else(|| entity.strip_prefix("#X")) {
                    u32::from_str_radix(hex, 16).ok()
                } else if let Some(decimal) = entity.strip_prefix('#') {
                    decimal.parse().ok()
                } else {
                    None
                };
                code.and_then(char::from_u32).ok_or("an unknown XML entity")?
            }
        };
        out.push(decoded);
        rest = tail.get(end + 1..).unwrap_or_default();
    }
    out.push_str(rest);
    Ok(out)
}

/// The form body of `AssumeRole`.
pub(crate) fn assume_role_body(role_arn: &str, session_name: &str, duration_secs: u64) -> String {
    crate::http::form_encode([
        ("Action", "AssumeRole"),
        ("RoleArn", role_arn),
        ("RoleSessionName", session_name),
        ("DurationSeconds", &duration_secs.to_string()),
        ("Version", "2011-06-15"),
    ])
}

/// The form body of `AssumeRoleWithWebIdentity` (unsigned: the web identity token is the proof).
pub(crate) fn assume_role_with_web_identity_body(role_arn: &str, session_name: &str, token: &str) -> String {
    crate::http::form_encode([
        ("Action", "AssumeRoleWithWebIdentity"),
        ("RoleArn", role_arn),
        ("RoleSessionName", session_name),
        ("WebIdentityToken", token),
        ("Version", "2011-06-15"),
    ])
}

/// The remedy for an STS error code, appended to its message.
pub(crate) fn remedy(code: &str) -> &'static str {
    match code {
        "ExpiredToken" | "ExpiredTokenException" => {
            "; the credentials used to call STS have expired: refresh them (or the web identity token file)"
        }
        "AccessDenied" => "; check the role's trust policy and that the caller may call sts:AssumeRole on it",
        "InvalidClientTokenId" | "SignatureDoesNotMatch" => "; the access key or secret key is wrong",
        "InvalidIdentityToken" => "; the web identity token is not accepted: check the OIDC provider of the role",
        "RegionDisabledException" => "; STS is not activated in this region",
        _ => "",
    }
}

/// When temporary credentials are past due at `now`.
pub(crate) fn is_expired(credentials: &AwsCredentials, now: SystemTime) -> bool {
    credentials.expiration.is_some_and(|expiration| expiration <= now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    const ASSUME_ROLE: &str = r#"<AssumeRoleResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleResult>
    <SourceIdentity>Alice</SourceIdentity>
    <AssumedRoleUser>
      <Arn>arn:aws:sts::123456789012:assumed-role/demo/TestAR</Arn>
      <AssumedRoleId>ARO123EXAMPLE123:TestAR</AssumedRoleId>
    </AssumedRoleUser>
    <Credentials>
      <AccessKeyId>ASIAIOSFODNN7EXAMPLE</AccessKeyId>
      <SecretAccessKey>wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY</SecretAccessKey>
      <SessionToken>AQoDYXdzEPT//////////wEXAMPLEtc764&amp;x</SessionToken>
      <Expiration>2019-11-09T13:34:41Z</Expiration>
    </Credentials>
    <PackedPolicySize>6</PackedPolicySize>
  </AssumeRoleResult>
  <ResponseMetadata><RequestId>c6104cbe-af31-11e0-8154-cbc7ccf896c7</RequestId></ResponseMetadata>
</AssumeRoleResponse>"#;

    #[test]
    fn credentials_from_the_documented_answer() {
        let StsAnswer::Credentials(credentials) = decode_sts_response(ASSUME_ROLE.as_bytes()).unwrap() else {
            panic!("no credentials")
        };
        assert_eq!(credentials.access_key_id, "ASIAIOSFODNN7EXAMPLE");
        assert_eq!(credentials.secret_access_key.expose_secret(), "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLEKEY");
        assert_eq!(credentials.session_token.as_ref().unwrap().expose_secret(), "AQoDYXdzEPT//////////wEXAMPLEtc764&x");
        assert_eq!(credentials.expiration, Some(UNIX_EPOCH + Duration::from_secs(1_573_306_481)));
        assert!(is_expired(&credentials, UNIX_EPOCH + Duration::from_secs(1_573_306_481)));
    }

    #[test]
    fn error_documents() {
        let body = br#"<ErrorResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/"><Error><Type>Sender</Type><Code>ExpiredToken</Code><Message>The security token included in the request is expired</Message></Error><RequestId>x</RequestId></ErrorResponse>"#;
        assert_eq!(
            decode_sts_response(body).unwrap(),
            StsAnswer::Error {
                code: "ExpiredToken".into(),
                message: "The security token included in the request is expired".into()
            }
        );
    }

    #[test]
    fn malformed_answers() {
        for (body, needle) in [
            ("", "no <Credentials>"),
            ("<Credentials><AccessKeyId>A</AccessKeyId></Credentials>", "no SecretAccessKey"),
            ("<Credentials><AccessKeyId>A</AccessKeyId><SecretAccessKey>s</SecretAccessKey><SessionToken>t</SessionToken><Expiration>soon</Expiration></Credentials>", "ISO 8601"),
            ("<Credentials><AccessKeyId>A&bogus;</AccessKeyId></Credentials>", "entity"),
            ("<Credentials><AccessKeyId><x/></AccessKeyId></Credentials>", "markup"),
            ("<Credentials><AccessKeyId>", "no <Credentials>"),
        ] {
            let error = decode_sts_response(body.as_bytes()).unwrap_err();
            assert!(error.contains(needle), "{body}: {error}");
        }
        assert!(decode_sts_response(&[0xff, 0xfe]).is_err());
        assert_eq!(
            element("<CredentialsX>a</CredentialsX><Credentials a=\"1\">b</Credentials>", "Credentials"),
            Some("b")
        );
        assert_eq!(unescape("&#65;&#x42;&lt;").unwrap(), "AB<");
    }
}
