//! A scripted FAKE HTTP/1.1 server for the tests of the AWS credential steps (STS, the ECS
//! container endpoint, EC2 instance metadata) and of the HTTP client's failure paths: those
//! services cannot run here, so each test answers as the service documents it, including its
//! errors, and can stall or cut a connection. Every request is recorded for the test to check.
//!
//! One thread per connection (std only), one request per connection (the client sends
//! `Connection: close`). The server stops when dropped.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A request as the fake received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    /// The first header named `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(key, _)| key.eq_ignore_ascii_case(name)).map(|(_, value)| value.as_str())
    }

    /// The body as text.
    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// What the fake answers.
pub enum Reply {
    /// A response with a Content-Length body.
    Respond { status: u16, content_type: &'static str, body: String },
    /// These bytes as they are, then close.
    Raw(Vec<u8>),
    /// Read the request, answer nothing, keep the connection open for this long.
    Stall(Duration),
}

impl Reply {
    /// A JSON response.
    pub fn json(status: u16, body: impl Into<String>) -> Reply {
        Reply::Respond { status, content_type: "application/json", body: body.into() }
    }

    /// An XML response (STS).
    pub fn xml(status: u16, body: impl Into<String>) -> Reply {
        Reply::Respond { status, content_type: "text/xml", body: body.into() }
    }

    /// A plain text response (IMDS).
    pub fn text(status: u16, body: impl Into<String>) -> Reply {
        Reply::Respond { status, content_type: "text/plain", body: body.into() }
    }
}

type Handler = dyn Fn(&Recorded) -> Reply + Send + Sync;

/// The running fake.
pub struct FakeHttp {
    address: SocketAddr,
    requests: Arc<Mutex<Vec<Recorded>>>,
    stop: Arc<AtomicBool>,
}

impl FakeHttp {
    /// Listens on a free loopback port and answers each request with `handler`.
    pub fn start(handler: impl Fn(&Recorded) -> Reply + Send + Sync + 'static) -> FakeHttp {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake HTTP server");
        let address = listener.local_addr().expect("local address");
        let requests = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let (recorded, stopping) = (requests.clone(), stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stopping.load(Ordering::Acquire) {
                    return;
                }
                let Ok(stream) = stream else { continue };
                let (handler, recorded) = (handler.clone(), recorded.clone());
                std::thread::spawn(move || serve(stream, &*handler, &recorded));
            }
        });
        FakeHttp { address, requests, stop }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    /// The requests received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("requests lock").clone()
    }
}

impl Drop for FakeHttp {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.address);
    }
}

fn serve(mut stream: TcpStream, handler: &Handler, recorded: &Mutex<Vec<Recorded>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let mut data = Vec::new();
    let mut buffer = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buffer[..n]),
        }
    };
    let head = String::from_utf8_lossy(&data[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_string();
    let target = request_line.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_string(), value.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = data[head_end + 4..].to_vec();
    while body.len() < length {
        match stream.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => body.extend_from_slice(&buffer[..n]),
        }
    }
    let request = Recorded { method, target, headers, body };
    recorded.lock().expect("requests lock").push(request.clone());
    match handler(&request) {
        Reply::Respond { status, content_type, body } => {
            let response = format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                reason(status),
                body.len()
            );
            let _ = stream.write_all(response.as_bytes());
        }
        Reply::Raw(bytes) => {
            let _ = stream.write_all(&bytes);
        }
        Reply::Stall(time) => std::thread::sleep(time),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}
