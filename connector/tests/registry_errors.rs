//! The registry client's failure paths and reference resolution against a scripted FAKE HTTP
//! server (`sluice_tests::fake_http`): statuses, stalls and reference chains a real registry
//! will not produce on demand. The happy path against a registry's real REST API (srfake) and
//! Confluent's serializer is `avro_registry.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use sluice::registry::avro::Node;
use sluice::registry::client::{RegistryAuth, RegistryClient, RegistryErrorKind, RegistrySettings, ATTEMPTS};
use sluice::registry::framing::SchemaId;
use sluice_tests::fake_http::{FakeHttp, Reply};

fn client(server: &FakeHttp, auth: RegistryAuth, timeout: Duration) -> RegistryClient {
    RegistryClient::new(RegistrySettings { auth, timeout, ..RegistrySettings::new(server.url()) })
}

const SCHEMA_ANSWER: &str =
    r#"{"schema":"{\"type\":\"record\",\"name\":\"r\",\"fields\":[{\"name\":\"a\",\"type\":\"int\"}]}"}"#;

#[tokio::test]
async fn auth_failures_are_named_and_not_retried() {
    for (status, kind_text) in [(401, "401 Unauthorized: check schema_registry's"), (403, "403 Forbidden")] {
        let server = FakeHttp::start(move |_| Reply::json(status, r#"{"error_code":40101,"message":"no"}"#));
        let registry = client(
            &server,
            RegistryAuth::Basic { username: "u".into(), password: "s3cret-pw".into() },
            Duration::from_secs(5),
        );
        let error = registry.avro_schema(SchemaId(3)).await.unwrap_err();
        let text = error.to_string();
        assert!(text.contains(kind_text) && text.contains("schema id 3") && text.contains(&server.url()), "{text}");
        assert!(!text.contains("s3cret-pw") && !format!("{error:?}").contains("s3cret-pw"));
        let requests = server.requests();
        assert_eq!(requests.len(), 1, "{status} is not retried");
        assert_eq!(requests[0].target, "/schemas/ids/3");
        // Basic u:s3cret-pw
        assert_eq!(requests[0].header("authorization"), Some("Basic dTpzM2NyZXQtcHc="));
    }
}

#[tokio::test]
async fn server_errors_are_retried_a_bounded_number_of_times() {
    // Two 503s, then the schema: the third attempt succeeds.
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let server = FakeHttp::start(move |_| {
        if seen.fetch_add(1, Ordering::SeqCst) < 2 {
            Reply::json(503, r#"{"error_code":50003,"message":"busy"}"#)
        } else {
            Reply::json(200, SCHEMA_ANSWER)
        }
    });
    let registry = client(&server, RegistryAuth::Bearer("tok-123".into()), Duration::from_secs(5));
    let schema = registry.avro_schema(SchemaId(9)).await.expect("third attempt");
    assert!(matches!(schema.node(schema.root()), Node::Record { .. }));
    assert_eq!(server.requests().len(), 3);
    assert_eq!(server.requests()[0].header("authorization"), Some("Bearer tok-123"));
    // Cached for the process: no further request.
    registry.avro_schema(SchemaId(9)).await.expect("cached");
    assert_eq!(server.requests().len(), 3);

    // Always 500: fails after ATTEMPTS requests, naming the status.
    let server = FakeHttp::start(|_| Reply::json(500, "{}"));
    let error = client(&server, RegistryAuth::None, Duration::from_secs(5)).avro_schema(SchemaId(1)).await.unwrap_err();
    assert!(matches!(error.kind, RegistryErrorKind::Status { status: 500, attempts: ATTEMPTS }), "{error}");
    assert_eq!(server.requests().len(), ATTEMPTS as usize);
    assert!(error.to_string().contains("HTTP status 500 (after 3 attempts)"), "{error}");
}

#[tokio::test]
async fn a_stalled_registry_times_out() {
    let server = FakeHttp::start(|_| Reply::Stall(Duration::from_secs(30)));
    let started = std::time::Instant::now();
    let error =
        client(&server, RegistryAuth::None, Duration::from_millis(300)).avro_schema(SchemaId(1)).await.unwrap_err();
    assert!(matches!(error.kind, RegistryErrorKind::Http { attempts: ATTEMPTS, .. }), "{error}");
    let chain = sluice_tests::error_chain(&error);
    assert!(chain.contains("timed out"), "{chain}");
    // Three 300 ms attempts and two short backoffs (200 + 400 ms): bounded.
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

#[tokio::test]
async fn references_resolve_depth_first_and_cycles_fail() {
    let server = FakeHttp::start(|request| match request.target.as_str() {
        "/schemas/ids/5" => Reply::json(
            200,
            r#"{"schema":"{\"type\":\"record\",\"name\":\"shop.Order\",\"fields\":[{\"name\":\"line\",\"type\":\"shop.Line\"}]}","references":[{"name":"shop.Line","subject":"line","version":1}]}"#,
        ),
        "/subjects/line/versions/1" => Reply::json(
            200,
            r#"{"subject":"line","version":1,"id":4,"schema":"{\"type\":\"record\",\"name\":\"shop.Line\",\"fields\":[{\"name\":\"c\",\"type\":\"shop.Color\"}]}","references":[{"name":"shop.Color","subject":"color","version":2}]}"#,
        ),
        "/subjects/color/versions/2" => Reply::json(
            200,
            r#"{"subject":"color","version":2,"id":3,"schema":"{\"type\":\"enum\",\"name\":\"shop.Color\",\"symbols\":[\"RED\"]}"}"#,
        ),
        // A cycle: 6 -> a/1 -> b/1 -> a/1.
        "/schemas/ids/6" => {
            Reply::json(200, r#"{"schema":"\"int\"","references":[{"name":"A","subject":"a","version":1}]}"#)
        }
        "/subjects/a/versions/1" => {
            Reply::json(200, r#"{"schema":"\"int\"","references":[{"name":"B","subject":"b","version":1}]}"#)
        }
        "/subjects/b/versions/1" => {
            Reply::json(200, r#"{"schema":"\"int\"","references":[{"name":"A","subject":"a","version":1}]}"#)
        }
        "/schemas/ids/7" => Reply::json(200, r#"{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\";"}"#),
        _ => Reply::json(404, r#"{"error_code":40403,"message":"Schema not found"}"#),
    });
    let registry = client(&server, RegistryAuth::None, Duration::from_secs(5));
    let schema = registry.avro_schema(SchemaId(5)).await.expect("references resolved");
    let Node::Record { fields, .. } = schema.node(schema.root()) else { panic!() };
    let Node::Record { name, fields: line_fields } = schema.node(fields[0].node) else { panic!() };
    assert_eq!(name, "shop.Line");
    assert!(matches!(schema.node(line_fields[0].node), Node::Enum { name, .. } if name == "shop.Color"));

    let error = registry.avro_schema(SchemaId(6)).await.unwrap_err();
    assert!(error.to_string().contains("a cycle through subject a version 1"), "{error}");

    let error = registry.avro_schema(SchemaId(7)).await.unwrap_err();
    assert!(error.to_string().contains("the schema is PROTOBUF but the topic's format expects AVRO"), "{error}");

    let error = registry.avro_schema(SchemaId(8)).await.unwrap_err();
    assert!(matches!(error.kind, RegistryErrorKind::NotFound), "{error}");
}

/// Protobuf schemas are asked for as serialized descriptors (`?format=serialized`), references
/// too; a registry that answers with `.proto` text anyway is refused with that reason, and a
/// reference naming a type the schema uses resolves it.
#[tokio::test]
async fn protobuf_schemas_are_asked_for_serialized_and_text_is_refused() {
    use sluice::registry::protobuf::schema::encode::{enumeration, field, file, message};
    let color = file("color.proto", "shop", "proto3", &[], &[enumeration("Color", &[("RED", 0)])]);
    let paint = message("Paint", &[field("color", 1, 1, 14, ".shop.Color", None, false)], &[], &[], false);
    let main = file("paint.proto", "shop", "proto3", &[paint], &[]);
    let (color, main) = (sluice::json::base64(&color), sluice::json::base64(&main));
    let server = FakeHttp::start(move |request| match request.target.as_str() {
        "/schemas/ids/1?format=serialized" => Reply::json(
            200,
            format!(
                r#"{{"schemaType":"PROTOBUF","schema":"{main}","references":[{{"name":"color.proto","subject":"color","version":1}}]}}"#
            ),
        ),
        "/subjects/color/versions/1?format=serialized" => {
            Reply::json(200, format!(r#"{{"schemaType":"PROTOBUF","schema":"{color}"}}"#))
        }
        // A registry that ignores `format`.
        "/schemas/ids/2?format=serialized" => {
            Reply::json(200, r#"{"schemaType":"PROTOBUF","schema":"syntax = \"proto3\"; message M {}"}"#)
        }
        _ => Reply::json(404, r#"{"error_code":40403,"message":"Schema not found"}"#),
    });
    let registry = client(&server, RegistryAuth::None, Duration::from_secs(5));
    let schema = registry.protobuf_schema(SchemaId(1)).await.expect("references resolved");
    assert_eq!(schema.message(schema.message_at(&[0]).unwrap()).full_name, "shop.Paint");
    let error = registry.protobuf_schema(SchemaId(2)).await.unwrap_err();
    assert!(error.to_string().contains("answered with `.proto` text"), "{error}");
    let error = registry.protobuf_schema(SchemaId(3)).await.unwrap_err();
    assert!(matches!(error.kind, RegistryErrorKind::NotFound), "{error}");
}
