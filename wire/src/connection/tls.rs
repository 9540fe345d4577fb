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
#[non_exhaustive]
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

impl TlsSettings {
    /// Server authentication only, against `ca_pem` (`None`: the system trust store).
    pub fn new(ca_pem: Option<String>) -> Self {
        TlsSettings { ca_pem, cert_pem: None, key_pem: None }
    }

    /// The same settings with a client certificate chain and its key, for mutual TLS.
    pub fn with_client_certificate(mut self, cert_pem: impl Into<String>, key_pem: impl Into<String>) -> Self {
        self.cert_pem = Some(cert_pem.into());
        self.key_pem = Some(key_pem.into());
        self
    }
}

/// Which TLS setting a [`TlsError`] or a [`TlsProblem`] is about, so that a caller can name it in
/// its own configuration's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TlsField {
    /// [`TlsSettings::ca_pem`].
    CaPem,
    /// [`TlsSettings::cert_pem`].
    CertPem,
    /// [`TlsSettings::key_pem`].
    KeyPem,
    /// The build's crypto provider (a feature or CPU matter, not a setting).
    Provider,
}

impl TlsField {
    /// The field's name in [`TlsSettings`] (`ca_pem`, `cert_pem`, `key_pem`), or `provider`.
    pub fn name(self) -> &'static str {
        match self {
            TlsField::CaPem => "ca_pem",
            TlsField::CertPem => "cert_pem",
            TlsField::KeyPem => "key_pem",
            TlsField::Provider => "provider",
        }
    }
}

/// A TLS setting that cannot be used: which one, and what to fix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TlsError {
    /// The setting.
    pub field: TlsField,
    /// What is wrong with it and what to do, as a predicate ("is empty; paste ...").
    pub message: String,
}

impl std::fmt::Display for TlsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "TLS setting `{}` {}", self.field.name(), self.message)
    }
}

impl std::error::Error for TlsError {}

fn error(field: TlsField, message: impl Into<String>) -> TlsError {
    TlsError { field, message: message.into() }
}

/// Why a TLS handshake with a broker failed, for [`crate::ConnectionError::Tls`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TlsProblem {
    /// The broker's certificate has expired.
    CertificateExpired,
    /// The broker's certificate is not valid yet (clocks?).
    CertificateNotValidYet,
    /// The broker's certificate was not signed by a trusted CA.
    UnknownIssuer,
    /// The broker's certificate does not name the host this client connected to.
    NameMismatch {
        /// The host connected to.
        host: String,
    },
    /// The broker presents a CA certificate as its own (a self-signed certificate).
    CaUsedAsEndEntity,
    /// Another certificate problem.
    CertificateRejected {
        /// rustls's description.
        detail: String,
    },
    /// The broker did not answer with TLS (a plaintext listener, or the wrong port).
    NotTls,
    /// The broker refused the handshake with an alert (often: it requires or rejects the client
    /// certificate).
    Refused {
        /// The alert.
        alert: String,
    },
    /// The host is not a valid TLS server name.
    InvalidHostName {
        /// The host.
        host: String,
    },
    /// Anything else; the cause is the error's `source()`.
    Other,
}

impl TlsProblem {
    /// The setting most likely to fix it, if a setting can.
    pub fn setting(&self) -> Option<TlsField> {
        match self {
            TlsProblem::UnknownIssuer | TlsProblem::CaUsedAsEndEntity => Some(TlsField::CaPem),
            TlsProblem::Refused { .. } => Some(TlsField::CertPem),
            _ => None,
        }
    }
}

impl std::fmt::Display for TlsProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TlsProblem::CertificateExpired => {
                f.write_str("the broker's certificate has expired; renew it on the broker")
            }
            TlsProblem::CertificateNotValidYet => f.write_str(
                "the broker's certificate is not valid yet; check the clocks of the broker and this machine",
            ),
            TlsProblem::UnknownIssuer => f.write_str(
                "the broker's certificate was not signed by a trusted CA; give the CA that signed it as the CA \
                 certificate",
            ),
            TlsProblem::NameMismatch { host } => write!(
                f,
                "the broker's certificate is not valid for {host:?}; connect with a name or IP in its subject \
                 alternative names, or reissue it with {host:?} as a SAN"
            ),
            TlsProblem::CaUsedAsEndEntity => f.write_str(
                "the broker presents a CA certificate as its own (typical of a self-signed `openssl req -x509` \
                 certificate); issue the broker a certificate signed by a CA and give that CA as the CA certificate",
            ),
            TlsProblem::CertificateRejected { detail } => write!(f, "the broker's certificate was rejected: {detail}"),
            TlsProblem::NotTls => f.write_str(
                "the broker did not answer with TLS; is TLS configured on the broker's listener, and is this its TLS \
                 port?",
            ),
            TlsProblem::Refused { alert } => write!(
                f,
                "the broker refused the TLS handshake ({alert}); if it requires a client certificate, give one \
                 with its key, and check that the broker trusts their CA"
            ),
            TlsProblem::InvalidHostName { host } => {
                write!(f, "{host:?} is not a valid host name or IP address for TLS")
            }
            TlsProblem::Other => f.write_str("the TLS handshake failed"),
        }
    }
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
        Err(error(
            TlsField::Provider,
            "this build has no TLS crypto provider; build with the `ring` or `graviola` feature",
        ))
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
                TlsField::Provider,
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
        Err(error(TlsField::Provider, "the C-free TLS build supports only x86_64 and aarch64; use the default build"))
    }
}

/// Trims blanks and turns CRLF into LF, so that pasted PEM text parses.
fn normalize(pem: &str) -> Vec<u8> {
    pem.trim().replace("\r\n", "\n").replace('\r', "\n").into_bytes()
}

fn certificates(field: TlsField, pem: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
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
            for cert in certificates(TlsField::CaPem, pem)? {
                roots.add(cert).map_err(|e| error(TlsField::CaPem, format!("is not a usable CA certificate: {e}")))?;
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
                    TlsField::CaPem,
                    "is not set and no system trust store was found (minimal containers have none); paste the \
                     broker's CA certificate",
                ));
            }
        }
    }
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .build()
        .map_err(|e| error(TlsField::CaPem, format!("cannot build a certificate verifier: {e}")))?;
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| error(TlsField::Provider, format!("no usable TLS versions: {e}")))?
        .with_webpki_verifier(verifier);
    let config = match (&settings.cert_pem, &settings.key_pem) {
        (Some(cert), Some(key)) => {
            let chain = certificates(TlsField::CertPem, cert)?;
            let key_text = normalize(key.as_str());
            if key_text.is_empty() {
                return Err(error(TlsField::KeyPem, "is empty; paste the private key PEM"));
            }
            let key = PrivateKeyDer::from_pem_slice(&key_text).map_err(|_| {
                error(
                    TlsField::KeyPem,
                    "holds no PEM private key (expected -----BEGIN PRIVATE KEY-----, -----BEGIN EC PRIVATE KEY----- or \
                     -----BEGIN RSA PRIVATE KEY-----; encrypted keys are not supported)",
                )
            })?;
            builder.with_client_auth_cert(chain, key).map_err(|e| match e {
                rustls::Error::InconsistentKeys(_) => {
                    error(TlsField::KeyPem, "does not match the client certificate; paste the key that belongs to it")
                }
                other => error(TlsField::KeyPem, format!("cannot be used with the client certificate: {other}")),
            })?
        }
        (None, None) => builder.with_no_client_auth(),
        (Some(_), None) => return Err(error(TlsField::KeyPem, "is missing; mutual TLS needs the certificate's key")),
        (None, Some(_)) => {
            return Err(error(TlsField::CertPem, "is missing; mutual TLS needs the certificate for the key"))
        }
    };
    Ok(Arc::new(config))
}

/// Runs the TLS handshake over `stream` for `host`. Errors say what the usual cause is.
pub async fn handshake(
    config: Arc<ClientConfig>,
    host: &str,
    stream: TcpStream,
) -> Result<TlsStream<TcpStream>, (TlsProblem, Option<std::io::Error>)> {
    let name = ServerName::try_from(host.to_string())
        .map_err(|_| (TlsProblem::InvalidHostName { host: host.to_string() }, None))?;
    TlsConnector::from(config).connect(name, stream).await.map_err(|e| (explain(host, &e), Some(e)))
}

/// Explains an I/O error that carries a TLS failure. Under TLS 1.3 the broker checks the client
/// certificate after the client finished its side of the handshake, so a missing or rejected
/// client certificate arrives as an alert on the first read, not during `handshake`.
pub(crate) fn explain_after_handshake(host: &str, error: &std::io::Error) -> Option<TlsProblem> {
    error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()).map(|_| explain(host, error))
}

/// What a handshake failure most likely means.
fn explain(host: &str, error: &std::io::Error) -> TlsProblem {
    let tls = error.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match tls {
        Some(rustls::Error::InvalidCertificate(cert)) => match cert {
            CertificateError::Expired | CertificateError::ExpiredContext { .. } => TlsProblem::CertificateExpired,
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
                TlsProblem::CertificateNotValidYet
            }
            CertificateError::UnknownIssuer => TlsProblem::UnknownIssuer,
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                TlsProblem::NameMismatch { host: host.to_string() }
            }
            CertificateError::Other(other) if other.to_string().contains("CaUsedAsEndEntity") => {
                TlsProblem::CaUsedAsEndEntity
            }
            other => TlsProblem::CertificateRejected { detail: format!("{other:?}") },
        },
        Some(rustls::Error::InvalidMessage(_)) | Some(rustls::Error::InappropriateMessage { .. }) => TlsProblem::NotTls,
        Some(rustls::Error::AlertReceived(alert)) => TlsProblem::Refused { alert: format!("{alert:?}") },
        Some(_) => TlsProblem::Other,
        None if error.kind() == std::io::ErrorKind::UnexpectedEof => TlsProblem::NotTls,
        None => TlsProblem::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_and_non_pem_fields_are_named() {
        let settings = TlsSettings { ca_pem: Some("  \r\n ".to_string()), ..TlsSettings::default() };
        let err = client_config(&settings).unwrap_err();
        assert_eq!(err.field, TlsField::CaPem);
        assert!(err.message.contains("is empty"), "{err}");
        let settings = TlsSettings { ca_pem: Some("hello".to_string()), ..TlsSettings::default() };
        assert!(client_config(&settings).unwrap_err().message.contains("holds no PEM certificate"));
    }

    #[test]
    fn key_without_certificate_is_rejected() {
        let settings = TlsSettings { key_pem: Some("x".to_string()), ..TlsSettings::default() };
        assert_eq!(client_config(&settings).unwrap_err().field, TlsField::CertPem);
    }

    #[test]
    fn debug_hides_the_key() {
        let settings = TlsSettings { key_pem: Some("SECRET-KEY".to_string()), ..TlsSettings::default() };
        assert!(!format!("{settings:?}").contains("SECRET-KEY"));
    }
}
