//! TLS with rustls: certificates and keys arrive as pasted PEM text, never as files.
//!
//! - No CA given: the system trust store (rustls-native-certs). A CA given: that private CA only.
//! - A client certificate chain plus its key (PKCS#8, SEC1 or PKCS#1 RSA) for mutual TLS.
//! - Hostname (or IP SAN) verification is always on; there is no switch to turn it off.
//! - Pastes are forgiving: CRLF line ends, leading and trailing blanks, several certificates in
//!   one field.
//!
//! The crypto provider is `ring` by default; with the `graviola` feature (and without `ring`)
//! it is rustls-graviola, which is Rust and assembly with no C at all.

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{CertificateError, ClientConfig, RootCertStore};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// TLS settings. PEM text as pasted by the user; `Debug` never shows the key.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// Private CA certificate(s). `None`: the system trust store.
    pub ca_pem: Option<String>,
    /// Client certificate chain, for mutual TLS.
    pub cert_pem: Option<String>,
    /// The client certificate's private key.
    pub key_pem: Option<String>,
}

impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("ca_pem", &self.ca_pem.as_ref().map(|_| "<pem>"))
            .field("cert_pem", &self.cert_pem.as_ref().map(|_| "<pem>"))
            .field("key_pem", &self.key_pem.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// A TLS setting that cannot be used. `Display` names the field and what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError {
    pub field: &'static str,
    pub message: String,
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl std::error::Error for TlsError {}

fn error(field: &'static str, message: impl Into<String>) -> TlsError {
    TlsError { field, message: message.into() }
}

/// The crypto provider this build uses.
fn provider() -> Result<Arc<rustls::crypto::CryptoProvider>, TlsError> {
    #[cfg(all(feature = "graviola", not(feature = "ring")))]
    {
        check_graviola_cpu()?;
        Ok(Arc::new(rustls_graviola::default_provider()))
    }
    #[cfg(feature = "ring")]
    {
        Ok(Arc::new(rustls::crypto::ring::default_provider()))
    }
    #[cfg(not(any(feature = "ring", feature = "graviola")))]
    {
        Err(error("tls_enabled", "this build has no TLS crypto provider; build with the `ring` or `graviola` feature"))
    }
}

/// graviola asserts its CPU features on first use; check them first and say so instead of
/// crashing.
#[cfg(all(feature = "graviola", not(feature = "ring")))]
fn check_graviola_cpu() -> Result<(), TlsError> {
    #[cfg(target_arch = "x86_64")]
    {
        let supported = std::arch::is_x86_feature_detected!("aes")
            && std::arch::is_x86_feature_detected!("pclmulqdq")
            && std::arch::is_x86_feature_detected!("bmi1")
            && std::arch::is_x86_feature_detected!("adx")
            && std::arch::is_x86_feature_detected!("avx")
            && std::arch::is_x86_feature_detected!("avx2");
        if !supported {
            return Err(error(
                "tls_enabled",
                "this CPU lacks a feature the C-free TLS build needs (aes, pclmulqdq, bmi1, adx, avx, avx2); use the \
                 default build (ring) on this machine",
            ));
        }
        Ok(())
    }
    #[cfg(target_arch = "aarch64")]
    {
        Ok(())
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        Err(error("tls_enabled", "the C-free TLS build supports only x86_64 and aarch64; use the default build"))
    }
}

/// Trims blanks and turns CRLF into LF, so that pasted PEM text parses.
fn normalize(pem: &str) -> Vec<u8> {
    pem.trim().replace("\r\n", "\n").replace('\r', "\n").into_bytes()
}

fn certificates(field: &'static str, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let text = normalize(pem);
    if text.is_empty() {
        return Err(error(field, "is empty; paste the PEM text, including the -----BEGIN CERTIFICATE----- line"));
    }
    let mut certs = Vec::new();
    for cert in CertificateDer::pem_slice_iter(&text) {
        certs.push(cert.map_err(|e| error(field, format!("is not valid PEM ({e}); paste the whole certificate")))?);
    }
    if certs.is_empty() {
        return Err(error(field, "holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)"));
    }
    Ok(certs)
}

/// Builds the rustls configuration for `settings`.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, TlsError> {
    let provider = provider()?;
    let mut roots = RootCertStore::empty();
    match &settings.ca_pem {
        Some(pem) => {
            for cert in certificates("tls_ca_pem", pem)? {
                roots.add(cert).map_err(|e| error("tls_ca_pem", format!("is not a usable CA certificate: {e}")))?;
            }
        }
        None => {
            let native = rustls_native_certs::load_native_certs();
            for cert in native.certs {
                // Skip unparsable system certificates, as browsers do.
                let _ = roots.add(cert);
            }
            if roots.is_empty() {
                return Err(error(
                    "tls_ca_pem",
                    "no system trust store was found (minimal containers have none); paste the broker's CA \
                     certificate into `tls_ca_pem`",
                ));
            }
        }
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| error("tls_ca_pem", format!("cannot build a certificate verifier: {e}")))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| error("tls_enabled", format!("no usable TLS versions: {e}")))?
        .with_webpki_verifier(verifier);
    let config = match (&settings.cert_pem, &settings.key_pem) {
        (Some(cert), Some(key)) => {
            let chain = certificates("tls_cert_pem", cert)?;
            let key_text = normalize(key.as_str());
            if key_text.is_empty() {
                return Err(error("tls_key_pem", "is empty; paste the private key PEM"));
            }
            let key = PrivateKeyDer::from_pem_slice(&key_text).map_err(|_| {
                error(
                    "tls_key_pem",
                    "holds no PEM private key (expected -----BEGIN PRIVATE KEY-----, -----BEGIN EC PRIVATE KEY----- or \
                     -----BEGIN RSA PRIVATE KEY-----; encrypted keys are not supported)",
                )
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| match e {
                rustls::Error::InconsistentKeys(_) => error(
                    "tls_key_pem",
                    "does not match the certificate in `tls_cert_pem`; paste the key that belongs to it",
                ),
                other => error("tls_key_pem", format!("cannot be used with `tls_cert_pem`: {other}")),
            })?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => return Err(error("tls_key_pem", "is missing; mutual TLS needs the certificate's key")),
        (None, Some(_)) => {
            return Err(error("tls_cert_pem", "is missing; mutual TLS needs the certificate for the key"))
        }
    };
    Ok(Arc::new(config))
}

/// Runs the TLS handshake over `stream` for `host`. Errors explain the usual causes.
pub async fn handshake(
    config: Arc<ClientConfig>,
    host: &str,
    stream: TcpStream,
) -> Result<TlsStream<TcpStream>, String> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| format!("{host:?} is not a valid host name or IP address for TLS"))?;
    TlsConnector::from(config).connect(name, stream).await.map_err(|e| explain(host, &e))
}

/// Explains an I/O error that carries a TLS failure. Under TLS 1.3 the broker checks the client
/// certificate after the client finished its side of the handshake, so a missing or rejected
/// client certificate arrives as an alert on the first read, not during `handshake`.
pub(crate) fn explain_after_handshake(host: &str, error: &std::io::Error) -> Option<String> {
    error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()).map(|_| explain(host, error))
}

/// Turns a handshake failure into what the user should check.
fn explain(host: &str, error: &std::io::Error) -> String {
    let tls = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(cert)) => match cert {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
                "the broker's certificate has expired; renew it on the broker".to_string()
            }
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                "the broker's certificate is not valid yet; check the clocks of the broker and this machine".to_string()
            }
            CertificateError::UnknownIssuer => "the broker's certificate was not signed by a trusted CA; put the CA \
                 that signed it in `tls_ca_pem`"
                .to_string(),
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => format!(
                "the broker's certificate is not valid for {host:?}; connect with a name or IP in its subject \
                 alternative names, or reissue it with {host:?} as a SAN"
            ),
            CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
                "the broker presents a CA certificate as its own (typical of a self-signed `openssl req -x509` \
                 certificate); issue the broker a certificate signed by a CA and put that CA in `tls_ca_pem`"
                    .to_string()
            }
            other => format!("the broker's certificate was rejected: {other:?}"),
        },
        Some(rustls::Error::InvalidMessage(_)) | Some(rustls::Error::InappropriateMessage { .. }) => {
            "the broker did not answer with TLS; is TLS configured on the broker's listener, and is this its TLS port?"
                .to_string()
        }
        Some(rustls::Error::AlertReceived(alert)) => format!(
            "the broker refused the TLS handshake ({alert:?}); if it requires a client certificate, set \
             `tls_cert_pem` and `tls_key_pem`, and check that the broker trusts their CA"
        ),
        Some(other) => format!("TLS handshake failed: {other}"),
        None if error.kind() == std::io::ErrorKind::UnexpectedEof => {
            "the broker closed the connection during the TLS handshake; is TLS configured on the broker's listener, \
             and is this its TLS port?"
                .to_string()
        }
        None => format!("TLS handshake failed: {error}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_non_pem_fields_are_named() {
        let settings = TlsSettings { ca_pem: Some("  \r\n ".to_string()), ..TlsSettings::default() };
        let err = client_config(&settings).unwrap_err();
        assert_eq!(err.field, "tls_ca_pem");
        assert!(err.message.contains("is empty"), "{err}");
        let settings = TlsSettings { ca_pem: Some("hello".to_string()), ..TlsSettings::default() };
        assert!(client_config(&settings).unwrap_err().message.contains("holds no PEM certificate"));
    }

    #[test]
    fn key_without_certificate_is_rejected() {
        let settings = TlsSettings { key_pem: Some("x".to_string()), ..TlsSettings::default() };
        assert_eq!(client_config(&settings).unwrap_err().field, "tls_cert_pem");
    }

    #[test]
    fn debug_hides_the_key() {
        let settings = TlsSettings { key_pem: Some("SECRET-KEY".to_string()), ..TlsSettings::default() };
        assert!(!format!("{settings:?}").contains("SECRET-KEY"));
    }
}
