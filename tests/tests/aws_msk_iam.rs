//! AWS MSK IAM without AWS.
//!
//! - The token: a differential test against AWS's own signer, PyPI
//!   `aws-msk-iam-sasl-signer-python` (`tests/aws/msk_signer_oracle.py`, installed with pip when
//!   absent; with `CI=true` a missing oracle fails the test), on fixed credentials, regions and a
//!   frozen clock: the presigned URLs must be byte-identical (with the signer's User-Agent put in
//!   ours; the User-Agent parameter is not signed), and the SigV4 headers of an STS AssumeRole
//!   POST identical to botocore's.
//! - The credential chain: environment, web identity, ECS container endpoint, EC2 instance
//!   metadata (IMDSv2), then AssumeRole, each against a FAKE of the service on loopback
//!   (`sluice_tests::fake_http`: the services cannot run here), answering as AWS documents,
//!   including its errors (403, expired token, timeouts, expired credentials).

use std::collections::HashMap;
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use sluice_tests::fake_http::{FakeHttp, Reply};
use sluice_wire::auth::aws::{msk_presigned_url, sign_form_post};
use sluice_wire::auth::{AwsCredentials, MskIamConfig, MskIamTokenSource, TokenSource};
use sluice_wire::SecretString;

// ---------------------------------------------------------------------------------------------
// The differential test

fn oracle_available() -> bool {
    let import = || {
        Command::new("python3")
            .args(["-c", "import aws_msk_iam_sasl_signer, botocore"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    };
    if import() {
        return true;
    }
    eprintln!("installing aws-msk-iam-sasl-signer-python (the oracle) with pip");
    let _ = Command::new("python3").args(["-m", "pip", "install", "-q", "aws-msk-iam-sasl-signer-python"]).status();
    if import() {
        return true;
    }
    if std::env::var("CI").is_ok_and(|value| value == "true") {
        panic!("CI=true and the oracle aws-msk-iam-sasl-signer-python cannot be imported or installed");
    }
    eprintln!("SKIPPED: aws-msk-iam-sasl-signer-python is not installed and pip could not install it");
    false
}

struct Case {
    region: &'static str,
    access_key: &'static str,
    secret_key: &'static str,
    token: Option<&'static str>,
    time: u64,
}

const CASES: [Case; 5] = [
    Case {
        region: "us-east-1",
        access_key: "AKIDEXAMPLE",
        secret_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
        token: None,
        time: 1_440_938_160,
    },
    Case {
        region: "eu-west-1",
        access_key: "ASIAXAMPLE2",
        secret_key: "s3cr3t/with+signs=",
        token: Some("IQoJb3JpZ2luX2VjEPT//////////wEaCXVzLWVhc3QtMSJHMEUCIQ+/=="),
        time: 1_709_164_800,
    },
    Case {
        region: "ap-southeast-2",
        access_key: "AKIA0000000000000000",
        secret_key: "x",
        token: Some("a b&c=d?e%f"),
        time: 1_796_151_000,
    },
    Case {
        region: "us-gov-west-1",
        access_key: "AKIAZZZ",
        secret_key: "0123456789012345678901234567890123456789",
        token: None,
        time: 4_102_444_799,
    },
    Case {
        region: "cn-north-1",
        access_key: "ASIA1",
        secret_key: "é-unicode-secret",
        token: Some("tok"),
        time: 946_684_800,
    },
];

#[test]
fn tokens_are_byte_identical_to_aws_msk_iam_sasl_signer_python() {
    if !oracle_available() {
        return;
    }
    let script = sluice_tests::repo_root().join("tests/aws/msk_signer_oracle.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("run the oracle");
    let body = "Action=AssumeRole&RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Fdemo&RoleSessionName=sluice&DurationSeconds=3600&Version=2011-06-15";
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for case in &CASES {
            let line = serde_json::json!({
                "region": case.region, "access_key": case.access_key, "secret_key": case.secret_key,
                "token": case.token, "time": case.time, "sts_body": body,
                "sts_host": format!("sts.{}.amazonaws.com", case.region),
            });
            writeln!(stdin, "{line}").expect("write a case");
        }
    }
    let output = child.wait_with_output().expect("oracle output");
    assert!(output.status.success(), "the oracle failed");
    let answers: Vec<serde_json::Value> = String::from_utf8(output.stdout)
        .expect("utf8")
        .lines()
        .map(|line| serde_json::from_str(line).expect("oracle JSON"))
        .collect();
    assert_eq!(answers.len(), CASES.len());
    for (case, answer) in CASES.iter().zip(&answers) {
        let theirs_token = answer["msk_token"].as_str().expect("token");
        let theirs = String::from_utf8(
            base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(theirs_token).expect("their token is base64url"),
        )
        .expect("utf8 URL");
        let (signed, user_agent) = theirs.rsplit_once("&User-Agent=").expect("their User-Agent parameter");
        let credentials = AwsCredentials::new(case.access_key, case.secret_key, case.token.map(SecretString::new));
        let time = UNIX_EPOCH + Duration::from_secs(case.time);
        // Our URL with their (percent-encoded) User-Agent value: byte for byte theirs.
        let user_agent = user_agent.replace("%2F", "/");
        let ours = msk_presigned_url(&credentials, case.region, time, &user_agent);
        assert_eq!(ours, theirs, "{} at {}", case.region, case.time);
        // And ignoring the unsigned User-Agent, our own token's URL.
        let ours_token = sluice_wire::auth::aws::msk_token(&credentials, case.region, time);
        let ours_url =
            String::from_utf8(base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(&ours_token).expect("b64"))
                .expect("utf8");
        assert_eq!(ours_url.rsplit_once("&User-Agent=").expect("our User-Agent").0, signed);
        // The STS request's SigV4 headers.
        let host = format!("sts.{}.amazonaws.com", case.region);
        let headers: HashMap<String, String> =
            sign_form_post(&credentials, case.region, "sts", &host, body, time).into_iter().collect();
        for name in ["Authorization", "X-Amz-Date", "X-Amz-Security-Token"] {
            assert_eq!(
                headers.get(name).map(String::as_str),
                answer["sts_headers"][name].as_str(),
                "{name} for {}",
                case.region
            );
        }
    }
    eprintln!("{} MSK tokens and STS signatures identical to AWS's signer", CASES.len());
}

// ---------------------------------------------------------------------------------------------
// The credential chain against fakes

fn iso8601(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).expect("after 1970").as_secs() as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

fn in_secs(secs: i64) -> String {
    let now = SystemTime::now();
    iso8601(if secs >= 0 { now + Duration::from_secs(secs as u64) } else { now - Duration::from_secs((-secs) as u64) })
}

fn env(pairs: &[(&str, String)]) -> impl Fn(&str) -> Option<String> + Send + Sync + 'static {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect();
    move |name: &str| map.get(name).cloned()
}

fn source(config: MskIamConfig) -> Arc<MskIamTokenSource> {
    MskIamTokenSource::new(config).expect("valid MSK IAM config")
}

/// The presigned URL inside a token.
async fn token_url(source: &MskIamTokenSource) -> Result<String, String> {
    let token = source.token().await.map_err(|error| error.message)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(token.expose_secret()).expect("base64url");
    Ok(String::from_utf8(bytes).expect("utf8"))
}

fn sts_credentials_xml(action: &str, key: &str, expiration: &str) -> String {
    format!(
        "<{action}Response xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><{action}Result><Credentials>\
         <AccessKeyId>{key}</AccessKeyId><SecretAccessKey>assumed/secret</SecretAccessKey>\
         <SessionToken>assumed-session-token</SessionToken><Expiration>{expiration}</Expiration></Credentials>\
         </{action}Result><ResponseMetadata><RequestId>1</RequestId></ResponseMetadata></{action}Response>"
    )
}

fn sts_error_xml(code: &str, message: &str) -> String {
    format!(
        "<ErrorResponse xmlns=\"https://sts.amazonaws.com/doc/2011-06-15/\"><Error><Type>Sender</Type><Code>{code}</Code>\
         <Message>{message}</Message></Error><RequestId>2</RequestId></ErrorResponse>"
    )
}

#[tokio::test]
async fn environment_credentials_sign_the_token() {
    let config = MskIamConfig::new("us-west-2").with_env(env(&[
        ("AWS_ACCESS_KEY_ID", "AKIDENV".into()),
        ("AWS_SECRET_ACCESS_KEY", "env-secret".into()),
        ("AWS_SESSION_TOKEN", "env-token".into()),
    ]));
    let url = token_url(&source(config)).await.expect("token");
    assert!(url.starts_with("https://kafka.us-west-2.amazonaws.com/?Action=kafka-cluster%3AConnect&"), "{url}");
    assert!(url.contains("X-Amz-Credential=AKIDENV%2F") && url.contains("X-Amz-Security-Token=env-token"), "{url}");
    assert!(!url.contains("env-secret"));
}

#[tokio::test]
async fn web_identity_is_exchanged_with_sts() {
    let sts = FakeHttp::start(|request| {
        let body = request.body_text();
        if body.contains("Action=AssumeRoleWithWebIdentity") && body.contains("WebIdentityToken=eks.jwt.token") {
            Reply::xml(200, sts_credentials_xml("AssumeRoleWithWebIdentity", "ASIAWEBIDENTITY", &in_secs(3600)))
        } else {
            Reply::xml(400, sts_error_xml("InvalidParameterValue", "unexpected request"))
        }
    });
    let dir = std::env::temp_dir().join(format!("sluice-web-identity-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("token");
    std::fs::write(&file, "eks.jwt.token\n").expect("token file");
    let config = MskIamConfig::new("us-east-1").with_env(env(&[
        ("AWS_WEB_IDENTITY_TOKEN_FILE", file.display().to_string()),
        ("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/eks-pod".into()),
        ("AWS_ROLE_SESSION_NAME", "pod-session".into()),
        ("AWS_ENDPOINT_URL_STS", sts.url()),
    ]));
    let url = token_url(&source(config)).await.expect("token");
    assert!(
        url.contains("X-Amz-Credential=ASIAWEBIDENTITY%2F")
            && url.contains("X-Amz-Security-Token=assumed-session-token"),
        "{url}"
    );
    let requests = sts.requests();
    assert_eq!(requests.len(), 1);
    let body = requests[0].body_text();
    assert!(
        body.contains("RoleArn=arn%3Aaws%3Aiam%3A%3A123456789012%3Arole%2Feks-pod")
            && body.contains("RoleSessionName=pod-session"),
        "{body}"
    );
    assert_eq!(requests[0].method, "POST");
    assert!(requests[0].header("Authorization").is_none(), "AssumeRoleWithWebIdentity is not signed");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn assume_role_is_signed_with_the_base_credentials() {
    let sts = FakeHttp::start(|request| {
        let authorization = request.header("Authorization").unwrap_or_default();
        let signed = authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDBASE/")
            && authorization.contains("/us-east-1/sts/aws4_request, SignedHeaders=content-type;host;x-amz-date;x-amz-security-token, Signature=")
            && request.header("X-Amz-Security-Token") == Some("base-token");
        if signed && request.body_text().contains("Action=AssumeRole&") {
            Reply::xml(200, sts_credentials_xml("AssumeRole", "ASIAASSUMED", &in_secs(3600)))
        } else {
            Reply::xml(403, sts_error_xml("SignatureDoesNotMatch", "bad signature"))
        }
    });
    let config = MskIamConfig::new("us-east-1")
        .with_role("arn:aws:iam::123456789012:role/msk-reader", Some("reader-1".into()))
        .with_env(env(&[
            ("AWS_ACCESS_KEY_ID", "AKIDBASE".into()),
            ("AWS_SECRET_ACCESS_KEY", "base-secret".into()),
            ("AWS_SESSION_TOKEN", "base-token".into()),
            ("AWS_ENDPOINT_URL_STS", sts.url()),
        ]));
    let url = token_url(&source(config)).await.expect("token");
    assert!(url.contains("X-Amz-Credential=ASIAASSUMED%2F"), "{url}");
    let body = sts.requests()[0].body_text();
    assert!(body.contains("RoleSessionName=reader-1") && body.contains("DurationSeconds=3600"), "{body}");
}

#[tokio::test]
async fn the_ecs_container_endpoint_with_its_authorization_token() {
    let ecs = FakeHttp::start(|request| match request.header("Authorization") {
        Some("container-auth-token") => Reply::json(
            200,
            format!(
                r#"{{"AccessKeyId":"ASIAECS","SecretAccessKey":"ecs-secret","Token":"ecs-token","Expiration":"{}","RoleArn":"arn:aws:iam::1:role/task"}}"#,
                in_secs(3600)
            ),
        ),
        _ => Reply::json(403, r#"{"code":"AccessDenied","message":"bad authorization token"}"#),
    });
    let dir = std::env::temp_dir().join(format!("sluice-ecs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("auth");
    std::fs::write(&file, "container-auth-token").expect("auth file");
    let config = MskIamConfig::new("us-east-1").with_env(env(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", format!("{}/v2/credentials/abc", ecs.url())),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file.display().to_string()),
    ]));
    let url = token_url(&source(config)).await.expect("token");
    assert!(url.contains("X-Amz-Credential=ASIAECS%2F") && url.contains("X-Amz-Security-Token=ecs-token"), "{url}");
    assert_eq!(ecs.requests()[0].target, "/v2/credentials/abc");
    // A wrong authorization token: 403, named with the setting to check.
    let config = MskIamConfig::new("us-east-1").with_env(env(&[
        ("AWS_CONTAINER_CREDENTIALS_FULL_URI", format!("{}/v2/credentials/abc", ecs.url())),
        ("AWS_CONTAINER_AUTHORIZATION_TOKEN", "wrong".into()),
    ]));
    let error = token_url(&source(config)).await.unwrap_err();
    assert!(
        error.contains("ECS container credentials endpoint")
            && error.contains("HTTP 403")
            && error.contains("AWS_CONTAINER_AUTHORIZATION_TOKEN"),
        "{error}"
    );
    // A remote plain-http full URI is refused before any request.
    let config = MskIamConfig::new("us-east-1")
        .with_env(env(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.0.0.1/creds".into())]));
    let error = token_url(&source(config)).await.unwrap_err();
    assert!(error.contains("neither https nor a loopback"), "{error}");
    let _ = std::fs::remove_dir_all(dir);
}

/// An IMDSv2-only instance: GETs without the session token get 401.
fn imds(expiration: String) -> FakeHttp {
    FakeHttp::start(move |request| {
        let token = request.header("X-aws-ec2-metadata-token");
        match (request.method.as_str(), request.target.as_str()) {
            ("PUT", "/latest/api/token") if request.header("X-aws-ec2-metadata-token-ttl-seconds").is_some() => {
                Reply::text(200, "imds-session-token")
            }
            ("GET", _) if token != Some("imds-session-token") => Reply::text(401, ""),
            ("GET", "/latest/meta-data/iam/security-credentials/") => Reply::text(200, "instance-role\n"),
            ("GET", "/latest/meta-data/iam/security-credentials/instance-role") => Reply::json(
                200,
                format!(
                    r#"{{"Code":"Success","LastUpdated":"{}","Type":"AWS-HMAC","AccessKeyId":"ASIAIMDS","SecretAccessKey":"imds-secret","Token":"imds-token","Expiration":"{expiration}"}}"#,
                    in_secs(0)
                ),
            ),
            _ => Reply::text(404, "Not Found"),
        }
    })
}

#[tokio::test]
async fn ec2_instance_metadata_v2() {
    let fake = imds(in_secs(3600));
    let config = MskIamConfig::new("us-east-1").with_env(env(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", fake.url())]));
    let url = token_url(&source(config)).await.expect("token");
    assert!(url.contains("X-Amz-Credential=ASIAIMDS%2F") && url.contains("X-Amz-Security-Token=imds-token"), "{url}");
    let methods: Vec<String> = fake.requests().iter().map(|r| format!("{} {}", r.method, r.target)).collect();
    assert_eq!(
        methods,
        [
            "PUT /latest/api/token",
            "GET /latest/meta-data/iam/security-credentials/",
            "GET /latest/meta-data/iam/security-credentials/instance-role"
        ]
    );
}

#[tokio::test]
async fn errors_say_which_source_failed_and_why() {
    // STS refuses the role.
    let denied = FakeHttp::start(|_| {
        Reply::xml(
            403,
            sts_error_xml("AccessDenied", "User: arn:aws:iam::1:user/u is not authorized to perform: sts:AssumeRole"),
        )
    });
    let base = |sts: &FakeHttp| {
        env(&[
            ("AWS_ACCESS_KEY_ID", "AKIDBASE".into()),
            ("AWS_SECRET_ACCESS_KEY", "base-secret".into()),
            ("AWS_ENDPOINT_URL_STS", sts.url()),
        ])
    };
    let role = "arn:aws:iam::123456789012:role/msk";
    let error = token_url(&source(MskIamConfig::new("us-east-1").with_role(role, None).with_env(base(&denied))))
        .await
        .unwrap_err();
    assert!(
        error.contains("STS AssumeRole of arn:aws:iam::123456789012:role/msk")
            && error.contains("HTTP 403: AccessDenied: User"),
        "{error}"
    );
    assert!(error.contains("check the role's trust policy"), "{error}");
    assert!(!error.contains("base-secret"), "{error}");
    // The base credentials have expired.
    let expired = FakeHttp::start(|_| {
        Reply::xml(400, sts_error_xml("ExpiredToken", "The security token included in the request is expired"))
    });
    let error = token_url(&source(MskIamConfig::new("us-east-1").with_role(role, None).with_env(base(&expired))))
        .await
        .unwrap_err();
    assert!(
        error.contains("ExpiredToken: The security token included in the request is expired")
            && error.contains("have expired: refresh them"),
        "{error}"
    );
    // STS does not answer: timed out, within the configured time.
    let stalled = FakeHttp::start(|_| Reply::Stall(Duration::from_secs(10)));
    let http = sluice_wire::http::HttpConfig::default().with_timeouts(Duration::from_secs(1), Duration::from_secs(2));
    let started = Instant::now();
    let error = token_url(&source(
        MskIamConfig::new("us-east-1").with_role(role, None).with_env(base(&stalled)).with_http(http),
    ))
    .await
    .unwrap_err();
    assert!(error.contains("timed out") && error.contains("within 2000 ms"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    // IMDS hands out credentials that have already expired.
    let stale = imds(in_secs(-60));
    let error = token_url(&source(
        MskIamConfig::new("us-east-1").with_env(env(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", stale.url())])),
    ))
    .await
    .unwrap_err();
    assert!(
        error.contains("EC2 instance metadata service") && error.contains("credentials that expired at"),
        "{error}"
    );
    // IMDS does not answer (not on EC2).
    let silent = FakeHttp::start(|_| Reply::Stall(Duration::from_secs(10)));
    let started = Instant::now();
    let error = token_url(&source(
        MskIamConfig::new("us-east-1").with_env(env(&[("AWS_EC2_METADATA_SERVICE_ENDPOINT", silent.url())])),
    ))
    .await
    .unwrap_err();
    assert!(error.starts_with("no AWS credentials found: AWS_ACCESS_KEY_ID, AWS_WEB_IDENTITY_TOKEN_FILE and AWS_CONTAINER_CREDENTIALS_RELATIVE_URI/FULL_URI are not set"), "{error}");
    assert!(error.contains("timed out"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(8), "took {:?}", started.elapsed());
    // Half-configured environment.
    let error =
        token_url(&source(MskIamConfig::new("us-east-1").with_env(env(&[("AWS_ACCESS_KEY_ID", "AKID".into())]))))
            .await
            .unwrap_err();
    assert!(error.contains("AWS_SECRET_ACCESS_KEY is not"), "{error}");
    let error = token_url(&source(
        MskIamConfig::new("us-east-1").with_env(env(&[("AWS_EC2_METADATA_DISABLED", "true".into())])),
    ))
    .await
    .unwrap_err();
    assert!(error.contains("AWS_EC2_METADATA_DISABLED is true"), "{error}");
}

#[tokio::test]
async fn temporary_credentials_are_cached_and_refreshed_before_they_expire() {
    let fetches = Arc::new(AtomicUsize::new(0));
    let counter = fetches.clone();
    // Credentials valid for 4 s: fetched again once half of that is left (at most 5 minutes).
    let ecs = FakeHttp::start(move |_| {
        let n = counter.fetch_add(1, Ordering::SeqCst);
        Reply::json(
            200,
            format!(
                r#"{{"AccessKeyId":"ASIAROTATE{n}","SecretAccessKey":"s{n}","Token":"t{n}","Expiration":"{}"}}"#,
                in_secs(4)
            ),
        )
    });
    let config = MskIamConfig::new("us-east-1")
        .with_env(env(&[("AWS_CONTAINER_CREDENTIALS_FULL_URI", format!("{}/creds", ecs.url()))]));
    let source = source(config);
    let first = token_url(&source).await.expect("first token");
    let second = token_url(&source).await.expect("second token");
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the second token reuses the cached credentials");
    assert!(first.contains("ASIAROTATE0") && second.contains("ASIAROTATE0"));
    tokio::time::sleep(Duration::from_millis(2600)).await;
    let third = token_url(&source).await.expect("third token");
    assert_eq!(fetches.load(Ordering::SeqCst), 2, "fetched again before expiry");
    assert!(third.contains("ASIAROTATE1"), "{third}");
}
