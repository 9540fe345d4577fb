//! The test PKI: a private CA, the broker and client certificates it signs, and the broken
//! certificates the error tests need. Fresh keys every run; nothing secret is committed.
//!
//! Keys are P-256 ECDSA (rcgen with ring) except the RSA client key, which the pure-Rust `rsa`
//! crate generates (ring cannot generate RSA keys) and rcgen then signs a certificate for.

use std::path::{Path, PathBuf};

use rcgen::{
    date_time_ymd, BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

/// Every file [`generate`] writes, by name. Keys are PKCS#8 (`-----BEGIN PRIVATE KEY-----`)
/// unless the name says otherwise.
pub const FILES: &[(&str, &str)] = &[
    ("ca.pem", "the test CA (self-signed, CA:true)"),
    ("ca.key", "its key"),
    ("other-ca.pem", "a second, unrelated CA"),
    ("other-ca.key", "its key"),
    ("broker.pem", "broker certificate signed by the CA, SANs IP:127.0.0.1 and DNS:localhost"),
    ("broker.key", "its key"),
    ("client.pem", "client certificate signed by the CA (CN=sluice-client)"),
    ("client.key", "its key, PKCS#8"),
    ("client-ec.key", "the same key as SEC1 (-----BEGIN EC PRIVATE KEY-----)"),
    ("client-rsa.pem", "RSA-2048 client certificate signed by the CA (CN=sluice-client-rsa)"),
    ("client-rsa.key", "its key as PKCS#1 (-----BEGIN RSA PRIVATE KEY-----)"),
    ("broker-expired.pem", "broker certificate signed by the CA, valid 2020-01-01 to 2021-01-01"),
    ("broker-expired.key", "its key"),
    ("broker-wrongname.pem", "broker certificate signed by the CA for DNS:wrong.example only"),
    ("broker-wrongname.key", "its key"),
    ("broker-selfsigned-ca.pem", "self-signed CA:true certificate used as a broker certificate (SAN IP:127.0.0.1)"),
    ("broker-selfsigned-ca.key", "its key"),
];

/// Writes the test PKI into `dir` (created if needed) and returns the paths written.
pub fn generate(dir: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    let mut write = |name: &str, contents: &str| -> Result<(), String> {
        let path = dir.join(name);
        std::fs::write(&path, contents).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        files.push(path);
        Ok(())
    };

    let (ca_params, ca_key, ca_pem) = certificate_authority("Sluice Test CA")?;
    write("ca.pem", &ca_pem)?;
    write("ca.key", &ca_key.serialize_pem())?;
    let ca = Issuer::new(ca_params, ca_key);

    let (_, other_key, other_pem) = certificate_authority("Unrelated Test CA")?;
    write("other-ca.pem", &other_pem)?;
    write("other-ca.key", &other_key.serialize_pem())?;

    let (cert, key) = leaf("sluice-test-broker", &["127.0.0.1", "localhost"], &ca, |_| {})?;
    write("broker.pem", &cert)?;
    write("broker.key", &key.serialize_pem())?;

    let (cert, key) = leaf("sluice-client", &[], &ca, |params| {
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    })?;
    write("client.pem", &cert)?;
    write("client.key", &key.serialize_pem())?;
    write("client-ec.key", &pem("EC PRIVATE KEY", &pkcs8_p256_to_sec1(&key.serialize_der())?))?;

    let (cert, pkcs1) = rsa_client("sluice-client-rsa", &ca)?;
    write("client-rsa.pem", &cert)?;
    write("client-rsa.key", &pkcs1)?;

    let (cert, key) = leaf("sluice-test-broker-expired", &["127.0.0.1", "localhost"], &ca, |params| {
        params.not_before = date_time_ymd(2020, 1, 1);
        params.not_after = date_time_ymd(2021, 1, 1);
    })?;
    write("broker-expired.pem", &cert)?;
    write("broker-expired.key", &key.serialize_pem())?;

    let (cert, key) = leaf("wrong.example", &["wrong.example"], &ca, |_| {})?;
    write("broker-wrongname.pem", &cert)?;
    write("broker-wrongname.key", &key.serialize_pem())?;

    // What `openssl req -x509 -subj /CN=broker -addext subjectAltName=IP:127.0.0.1` gives:
    // a self-signed certificate that is also a CA, served by the broker as its own.
    let key = KeyPair::generate().map_err(rcgen_error)?;
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).map_err(rcgen_error)?;
    params.distinguished_name.push(DnType::CommonName, "sluice-selfsigned-broker");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let cert = params.self_signed(&key).map_err(rcgen_error)?;
    write("broker-selfsigned-ca.pem", &cert.pem())?;
    write("broker-selfsigned-ca.key", &key.serialize_pem())?;

    Ok(files)
}

fn rcgen_error(error: rcgen::Error) -> String {
    format!("rcgen: {error}")
}

fn certificate_authority(name: &str) -> Result<(CertificateParams, KeyPair, String), String> {
    let key = KeyPair::generate().map_err(rcgen_error)?;
    let mut params = CertificateParams::new(Vec::<String>::new()).map_err(rcgen_error)?;
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
    let cert = params.self_signed(&key).map_err(rcgen_error)?;
    Ok((params, key, cert.pem()))
}

/// An end-entity certificate with a fresh P-256 key, signed by `issuer`.
fn leaf(
    common_name: &str,
    names: &[&str],
    issuer: &Issuer<'_, KeyPair>,
    adjust: impl FnOnce(&mut CertificateParams),
) -> Result<(String, KeyPair), String> {
    let key = KeyPair::generate().map_err(rcgen_error)?;
    let params = leaf_params(common_name, names, adjust)?;
    let cert = params.signed_by(&key, issuer).map_err(rcgen_error)?;
    Ok((cert.pem(), key))
}

fn leaf_params(
    common_name: &str,
    names: &[&str],
    adjust: impl FnOnce(&mut CertificateParams),
) -> Result<CertificateParams, String> {
    let mut params =
        CertificateParams::new(names.iter().map(|name| name.to_string()).collect::<Vec<_>>()).map_err(rcgen_error)?;
    params.distinguished_name.push(DnType::CommonName, common_name);
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    adjust(&mut params);
    Ok(params)
}

/// An RSA-2048 client certificate; returns it and its key as PKCS#1 PEM.
fn rsa_client(common_name: &str, issuer: &Issuer<'_, KeyPair>) -> Result<(String, String), String> {
    use rsa::pkcs1::EncodeRsaPrivateKey;
    use rsa::pkcs8::EncodePrivateKey;
    let private = rsa::RsaPrivateKey::new(&mut rand::thread_rng(), 2048).map_err(|e| format!("rsa: {e}"))?;
    let pkcs8 = private.to_pkcs8_der().map_err(|e| format!("rsa: {e}"))?;
    let key = KeyPair::try_from(pkcs8.as_bytes()).map_err(rcgen_error)?;
    let params = leaf_params(common_name, &[], |params| {
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    })?;
    let cert = params.signed_by(&key, issuer).map_err(rcgen_error)?;
    let pkcs1 = private.to_pkcs1_pem(rsa::pkcs1::LineEnding::LF).map_err(|e| format!("rsa: {e}"))?;
    Ok((cert.pem(), pkcs1.to_string()))
}

/// PEM with 64-column base64 lines.
fn pem(label: &str, der: &[u8]) -> String {
    let encoded = base64_standard(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in encoded.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

fn base64_standard(bytes: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The OID of the P-256 curve (prime256v1), DER-encoded with its tag.
const P256_OID: &[u8] = &[0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// Unwraps a P-256 PKCS#8 key into the SEC1 `ECPrivateKey` it carries (RFC 5915), adding the
/// curve parameters `[0]` that PKCS#8 keeps outside (OpenSSL's `EC PRIVATE KEY` files have them).
fn pkcs8_p256_to_sec1(pkcs8: &[u8]) -> Result<Vec<u8>, String> {
    // PrivateKeyInfo ::= SEQUENCE { version INTEGER, algorithm AlgorithmIdentifier, privateKey OCTET STRING, .. }
    let (tag, info, _) = der_element(pkcs8)?;
    expect(tag, 0x30, "PrivateKeyInfo")?;
    let (_, _, rest) = der_element(info)?; // version
    let (_, algorithm, rest) = der_element(rest)?;
    if !algorithm.windows(P256_OID.len()).any(|window| window == P256_OID) {
        return Err("the PKCS#8 key is not a P-256 key".to_string());
    }
    let (tag, private_key, _) = der_element(rest)?;
    expect(tag, 0x04, "privateKey")?;
    // ECPrivateKey ::= SEQUENCE { version INTEGER (1), privateKey OCTET STRING,
    //                             parameters [0] OPTIONAL, publicKey [1] OPTIONAL }
    let (tag, ec, _) = der_element(private_key)?;
    expect(tag, 0x30, "ECPrivateKey")?;
    let (_, _, after_version) = der_element(ec)?;
    let (_, _, after_key) = der_element(after_version)?;
    let mut body = ec[..ec.len() - after_key.len()].to_vec();
    if after_key.first() != Some(&0xa0) {
        body.extend(der_encode(0xa0, P256_OID));
    }
    body.extend_from_slice(after_key);
    Ok(der_encode(0x30, &body))
}

fn expect(tag: u8, wanted: u8, what: &str) -> Result<(), String> {
    if tag == wanted {
        Ok(())
    } else {
        Err(format!("unexpected DER tag {tag:#04x} for {what}"))
    }
}

/// One DER element: its tag, its contents, and the bytes after it.
fn der_element(input: &[u8]) -> Result<(u8, &[u8], &[u8]), String> {
    let truncated = || "truncated DER".to_string();
    let (&tag, rest) = input.split_first().ok_or_else(truncated)?;
    let (&first, mut rest) = rest.split_first().ok_or_else(truncated)?;
    let length = if first < 0x80 {
        first as usize
    } else {
        let count = (first & 0x7f) as usize;
        if count == 0 || count > 4 || rest.len() < count {
            return Err(truncated());
        }
        let (bytes, after) = rest.split_at(count);
        rest = after;
        bytes.iter().fold(0usize, |length, byte| (length << 8) | *byte as usize)
    };
    if rest.len() < length {
        return Err(truncated());
    }
    let (contents, after) = rest.split_at(length);
    Ok((tag, contents, after))
}

fn der_encode(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let length = contents.len();
    if length < 0x80 {
        out.push(length as u8);
    } else {
        let bytes: Vec<u8> = length.to_be_bytes().into_iter().skip_while(|byte| *byte == 0).collect();
        out.push(0x80 | bytes.len() as u8);
        out.extend(bytes);
    }
    out.extend_from_slice(contents);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sec1_conversion_round_trips_through_rustls_pem_parsing() {
        let key = KeyPair::generate().expect("key");
        let sec1 = pkcs8_p256_to_sec1(&key.serialize_der()).expect("sec1");
        // SEQUENCE { INTEGER 1, OCTET STRING(32), [0] prime256v1, [1] public key }
        let (tag, body, rest) = der_element(&sec1).expect("der");
        assert_eq!((tag, rest.len()), (0x30, 0));
        assert!(body.windows(P256_OID.len()).any(|window| window == P256_OID));
        assert!(pem("EC PRIVATE KEY", &sec1).starts_with("-----BEGIN EC PRIVATE KEY-----\n"));
    }
}
