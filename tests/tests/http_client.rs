//! `sluice_wire::http::HttpClient` against the scripted FAKE HTTP server
//! (`sluice_tests::fake_http`): what a real server seldom does on demand (a chunked body, a
//! malformed head, a body over the limit, a cut, a stall) and the request the client sends
//! (method, target, Host, Content-Length, Basic and Bearer auth). TLS is exercised against the
//! fake identity provider's HTTPS endpoint in `auth_errors.rs`.

use std::time::{Duration, Instant};

use base64::Engine as _;
use sluice_tests::fake_http::{FakeHttp, Reply};
use sluice_wire::http::{HttpClient, HttpConfig, HttpError, HttpRequest};

fn client(max_body: usize) -> HttpClient {
    HttpClient::new(
        HttpConfig::default()
            .with_timeouts(Duration::from_secs(1), Duration::from_secs(2))
            .with_max_body_bytes(max_body),
    )
}

#[tokio::test]
async fn requests_carry_what_was_asked_and_chunked_bodies_decode() {
    let fake = FakeHttp::start(|request| match request.target.as_str() {
        "/chunked" => Reply::Raw(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nWiki\r\n5;ext\r\npedia\r\n0\r\n\r\n".to_vec(),
        ),
        _ => Reply::json(201, r#"{"ok":true}"#),
    });
    let response = client(1024).send(HttpRequest::get(&format!("{}/chunked", fake.url())).unwrap()).await.unwrap();
    assert_eq!((response.status, response.body.as_slice()), (200, &b"Wikipedia"[..]));
    let request = HttpRequest::post_form(
        &format!("{}/form?x=1", fake.url()),
        &[("grant_type", "client_credentials"), ("scope", "a b")],
    )
    .unwrap()
    .basic_auth("client", "p@ss:word");
    let response = client(1024).send(request).await.unwrap();
    assert_eq!(response.status, 201);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let bearer = HttpRequest::get(&format!("{}/b", fake.url())).unwrap().bearer_auth("tok.en");
    client(1024).send(bearer).await.unwrap();
    let requests = fake.requests();
    let form = &requests[1];
    assert_eq!((form.method.as_str(), form.target.as_str()), ("POST", "/form?x=1"));
    assert_eq!(form.body_text(), "grant_type=client_credentials&scope=a%20b");
    assert_eq!(form.header("Content-Type"), Some("application/x-www-form-urlencoded"));
    assert_eq!(form.header("Content-Length"), Some("41"));
    assert_eq!(form.header("Host"), fake.url().strip_prefix("http://"));
    let basic = base64::engine::general_purpose::STANDARD.encode("client:p@ss:word");
    assert_eq!(form.header("Authorization"), Some(format!("Basic {basic}").as_str()));
    assert_eq!(requests[2].header("Authorization"), Some("Bearer tok.en"));
    let debug = format!("{:?}", HttpRequest::get("https://h/p?secret=1").unwrap().bearer_auth("tok.en"));
    assert!(!debug.contains("tok.en") && !debug.contains("secret=1"), "{debug}");
}

#[tokio::test]
async fn bad_answers_are_errors_that_say_what_was_wrong() {
    let fake = FakeHttp::start(|request| match request.target.split('?').next().unwrap_or_default() {
        "/garbage" => Reply::Raw(b"SSH-2.0-OpenSSH_9.2\r\n\r\n".to_vec()),
        "/big" => Reply::json(200, "x".repeat(5000)),
        "/cut" => Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part".to_vec()),
        "/stall" => Reply::Stall(Duration::from_secs(5)),
        _ => Reply::text(404, "no"),
    });
    let get = |path: &str| HttpRequest::get(&format!("{}{path}?token=hidden", fake.url())).unwrap();
    let cases: [(&str, &str); 3] = [
        ("/garbage", "unusable response: malformed HTTP response head"),
        ("/big", "unusable response: response body larger than the 1024-byte limit"),
        ("/cut", "the connection closed before the response was complete"),
    ];
    for (path, needle) in cases {
        let error = client(1024).send(get(path)).await.unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with(&format!("GET {}{path}:", fake.url())) && text.contains(needle), "{text}");
        assert!(!text.contains("hidden"), "the query in the message: {text}");
        assert!(matches!(error, HttpError::Decode { .. }), "{error:?}");
    }
    let started = Instant::now();
    let error = client(1024).send(get("/stall")).await.unwrap_err();
    assert!(error.to_string().contains("timed out: no complete response within 2000 ms"), "{error}");
    assert!(error.is_transient() && started.elapsed() < Duration::from_secs(4));
    let error = client(1024).send(HttpRequest::get("http://127.0.0.1:1/x").unwrap()).await.unwrap_err();
    assert!(error.to_string().contains("cannot connect") && error.is_transient(), "{error}");
    let injected = HttpRequest::get(&fake.url()).unwrap().header("X-Evil", "a\r\nHost: elsewhere");
    let error = client(1024).send(injected).await.unwrap_err();
    assert!(matches!(error, HttpError::InvalidHeader { .. }), "{error:?}");
    assert!(HttpRequest::get("ftp://x/").unwrap_err().to_string().contains("https://"));
}
