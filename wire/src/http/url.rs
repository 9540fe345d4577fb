//! The few URL shapes an HTTP client for token and metadata endpoints needs:
//! `http[s]://host[:port][/path][?query]`, with IPv6 hosts in brackets. No user info, no
//! fragment (both refused: a password in a URL would end up in messages).

use std::fmt;

/// A parsed `http` or `https` URL.
#[derive(Clone, PartialEq, Eq)]
pub struct Url {
    /// `https` rather than `http`.
    pub https: bool,
    /// The host name or IP address (IPv6 without brackets).
    pub host: String,
    /// The port, explicit or the scheme's default.
    pub port: u16,
    /// The path, starting with `/`.
    pub path: String,
    /// The query after `?`, without it (may be empty).
    pub query: String,
}

impl Url {
    /// Parses `text`; the error says what is wrong with it (without repeating a query, which may
    /// hold a secret).
    pub fn parse(text: &str) -> Result<Url, String> {
        let text = text.trim();
        let (https, rest) = if let Some(rest) = strip_prefix_ignore_case(text, "https://") {
            (true, rest)
        } else if let Some(rest) = strip_prefix_ignore_case(text, "http://") {
            (false, rest)
        } else {
            return Err("must start with https:// (or http://)".to_string());
        };
        if rest.contains('#') {
            return Err("must not have a #fragment".to_string());
        }
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err("must not hold a user name or password (user@host); pass credentials separately".to_string());
        }
        let (host, port) = if let Some(after) = authority.strip_prefix('[') {
            let Some((host, after)) = after.split_once(']') else {
                return Err("has an IPv6 address without its closing ]".to_string());
            };
            let port = match after.strip_prefix(':') {
                Some(port) => Some(port),
                None if after.is_empty() => None,
                None => return Err("has text after the IPv6 address".to_string()),
            };
            (host.to_string(), port)
        } else {
            match authority.rsplit_once(':') {
                Some((host, port)) => (host.to_string(), Some(port)),
                None => (authority.to_string(), None),
            }
        };
        if host.is_empty() {
            return Err("has no host".to_string());
        }
        if !host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:".contains(&b)) {
            return Err("has a host with characters a host name cannot have".to_string());
        }
        let port = match port {
            None => {
                if https {
                    443
                } else {
                    80
                }
            }
            Some(port) => port.parse::<u16>().ok().filter(|p| *p != 0).ok_or("has an invalid port")?,
        };
        let (path, query) = match tail.split_once('?') {
            Some((path, query)) => (path, query),
            None => (tail, ""),
        };
        let path = if path.is_empty() { "/".to_string() } else { path.to_string() };
        if !path.bytes().chain(query.bytes()).all(|b| b.is_ascii_graphic()) {
            return Err("has spaces or characters outside ASCII in its path or query; percent-encode them".to_string());
        }
        Ok(Url { https, host, port, path, query: query.to_string() })
    }

    /// `path?query` as the request target.
    pub fn target(&self) -> String {
        if self.query.is_empty() {
            self.path.clone()
        } else {
            format!("{}?{}", self.path, self.query)
        }
    }

    /// The `Host` header value: the host, with the port when it is not the scheme's default.
    pub fn host_header(&self) -> String {
        let host = if self.host.contains(':') { format!("[{}]", self.host) } else { self.host.clone() };
        let default = if self.https { 443 } else { 80 };
        if self.port == default {
            host
        } else {
            format!("{host}:{}", self.port)
        }
    }

    /// Whether the host is a loopback address or `localhost`.
    pub fn is_loopback(&self) -> bool {
        self.host.eq_ignore_ascii_case("localhost")
            || self.host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    }
}

/// Shows scheme, host, port and path; never the query, which may carry a signature or token.
impl fmt::Display for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.host_header(), self.path)
    }
}

impl fmt::Debug for Url {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Url({self})")
    }
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix).then(|| &text[prefix.len()..])
}

/// Percent-encodes `text` as RFC 3986 asks (unreserved characters kept: letters, digits, `-._~`),
/// which is also what `application/x-www-form-urlencoded` bodies and AWS SigV4 accept.
pub fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `key=value&...` with both sides percent-encoded, in the order given.
pub fn form_encode<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    pairs
        .into_iter()
        .map(|(key, value)| format!("{}={}", percent_encode(key), percent_encode(value)))
        .collect::<Vec<_>>()
        .join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_shapes_in_use() {
        let url = Url::parse("https://idp.example.com/oauth2/token?x=1").unwrap();
        assert_eq!((url.https, url.host.as_str(), url.port), (true, "idp.example.com", 443));
        assert_eq!(url.target(), "/oauth2/token?x=1");
        assert_eq!(url.host_header(), "idp.example.com");
        assert_eq!(url.to_string(), "https://idp.example.com/oauth2/token");
        let url = Url::parse("http://169.254.169.254").unwrap();
        assert_eq!((url.port, url.target().as_str()), (80, "/"));
        let url = Url::parse("HTTP://[::1]:8080/x").unwrap();
        assert_eq!((url.host.as_str(), url.port, url.host_header().as_str()), ("::1", 8080, "[::1]:8080"));
        assert!(url.is_loopback());
        assert!(Url::parse("http://127.0.0.1:1/").unwrap().is_loopback());
        assert!(!Url::parse("http://169.254.170.2/").unwrap().is_loopback());
    }

    #[test]
    fn refuses_what_it_cannot_use() {
        for (text, needle) in [
            ("ftp://x/", "https://"),
            ("https://", "no host"),
            ("https://user:pw@host/", "user name or password"),
            ("https://host:0/", "port"),
            ("https://host:99999/", "port"),
            ("https://host/a b", "percent-encode"),
            ("https://host/#frag", "fragment"),
            ("https://[::1/", "closing ]"),
            ("https://ho st/", "characters"),
        ] {
            let error = Url::parse(text).unwrap_err();
            assert!(error.contains(needle), "{text}: {error}");
            assert!(!error.contains("pw"), "{error}");
        }
    }

    #[test]
    fn encodes_as_rfc_3986() {
        assert_eq!(percent_encode("a b/c:d~e_f.g-h"), "a%20b%2Fc%3Ad~e_f.g-h");
        assert_eq!(percent_encode("é"), "%C3%A9");
        assert_eq!(
            form_encode([("grant_type", "client_credentials"), ("scope", "a b")]),
            "grant_type=client_credentials&scope=a%20b"
        );
    }
}
