//! A fault-injecting TCP proxy for network-fault tests: it sits between a client and a broker
//! and, on command, delays, throttles, cuts or swallows the bytes in flight.
//!
//! The single test broker has a listener that advertises the proxy's address (see
//! `tests/kafka/broker.sh`, listener PROXIED), so a client bootstrapped at the proxy is sent back
//! to the proxy by every metadata response and never escapes the fault.
//!
//! The proxy runs on its own thread and runtime, so sync and async tests use it alike and a
//! test's own runtime being busy (or blocked) never stalls the network under it. The fault is
//! one shared value ([`FaultProxy::set`]); every connection, old and new, looks at it before
//! forwarding each chunk, and a connection waiting on a fault (a delay, a black hole, the next
//! trickle slice) re-reads it as soon as it changes, so switching back to [`Fault::Pass`] takes
//! effect at once.
//!
//! A chunk is what one read returned (at most 16 KiB); faults apply per chunk and per direction.
//! When either side closes, the proxy closes both (Kafka connections never half-close).

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};

/// What the proxy does to the bytes it forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything at once.
    Pass,
    /// Hold each chunk this long before forwarding it, in both directions. Chunks of one
    /// direction queue behind each other, so a response of many chunks is delayed many times:
    /// a long, slow path rather than a single added round trip.
    Latency(Duration),
    /// Forward only the first half of each broker-to-client chunk, then reset both sides
    /// (RST, not FIN). Requests still reach the broker; every response is cut in the middle.
    /// Held, this cuts every connection at its next response, new ones included.
    CutMidResponse,
    /// Accept connections and keep existing ones open, but forward nothing in either direction
    /// and never reset: a peer that vanished without a trace. Held chunks are forwarded once the
    /// fault ends (as TCP would retransmit them), if the connection is still there.
    BlackHole,
    /// Forward at most this many bytes per second per connection and direction, in slices ten
    /// times a second.
    Trickle { bytes_per_second: u64 },
}

/// What the proxy has done since it started. Tests diff two snapshots to show a fault really
/// touched the traffic (a cut cut a response, a black hole held a request).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counters {
    /// Client connections accepted.
    pub connections: u64,
    /// Bytes handed on client -> broker.
    pub bytes_to_broker: u64,
    /// Bytes handed on broker -> client.
    pub bytes_to_client: u64,
    /// Responses cut by [`Fault::CutMidResponse`] (each one reset a connection).
    pub cuts: u64,
    /// Chunks that a delay, a trickle or a black hole held back.
    pub faulted_chunks: u64,
}

impl std::ops::Add for Counters {
    type Output = Counters;

    fn add(self, other: Counters) -> Counters {
        Counters {
            connections: self.connections + other.connections,
            bytes_to_broker: self.bytes_to_broker + other.bytes_to_broker,
            bytes_to_client: self.bytes_to_client + other.bytes_to_client,
            cuts: self.cuts + other.cuts,
            faulted_chunks: self.faulted_chunks + other.faulted_chunks,
        }
    }
}

impl std::ops::Sub for Counters {
    type Output = Counters;

    fn sub(self, earlier: Counters) -> Counters {
        Counters {
            connections: self.connections - earlier.connections,
            bytes_to_broker: self.bytes_to_broker - earlier.bytes_to_broker,
            bytes_to_client: self.bytes_to_client - earlier.bytes_to_client,
            cuts: self.cuts - earlier.cuts,
            faulted_chunks: self.faulted_chunks - earlier.faulted_chunks,
        }
    }
}

/// A running proxy. Dropping it stops the proxy and closes every connection through it.
pub struct FaultProxy {
    listen: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    upstream: String,
    fault: watch::Sender<Fault>,
    connections: AtomicU64,
    bytes_to_broker: AtomicU64,
    bytes_to_client: AtomicU64,
    cuts: AtomicU64,
    faulted_chunks: AtomicU64,
}

impl FaultProxy {
    /// Listens on `listen` and forwards each connection to `upstream`, starting in
    /// [`Fault::Pass`]. Fails at once (naming the address) when `listen` is taken.
    pub fn start(listen: &str, upstream: &str) -> io::Result<FaultProxy> {
        // Bound here, synchronously, so that a taken port is the caller's error and not a panic
        // on the proxy's thread.
        let listener = std::net::TcpListener::bind(listen).map_err(|error| {
            io::Error::new(
                error.kind(),
                format!(
                    "the fault proxy cannot listen on {listen}: {error}; another test or process holds it \
                     (fault tests must run one at a time)"
                ),
            )
        })?;
        listener.set_nonblocking(true)?;
        let address = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let shared = Arc::new(Shared {
            upstream: upstream.to_string(),
            fault: watch::Sender::new(Fault::Pass),
            connections: AtomicU64::new(0),
            bytes_to_broker: AtomicU64::new(0),
            bytes_to_client: AtomicU64::new(0),
            cuts: AtomicU64::new(0),
            faulted_chunks: AtomicU64::new(0),
        });
        let (stop, mut stopped) = oneshot::channel::<()>();
        let accepting = shared.clone();
        let thread = std::thread::Builder::new().name("fault-proxy".to_string()).spawn(move || {
            runtime.block_on(async move {
                let listener = match TcpListener::from_std(listener) {
                    Ok(listener) => listener,
                    Err(error) => return eprintln!("fault proxy: cannot use the listener: {error}"),
                };
                loop {
                    tokio::select! {
                        accepted = listener.accept() => {
                            let Ok((client, _)) = accepted else { continue };
                            accepting.connections.fetch_add(1, Ordering::Relaxed);
                            tokio::spawn(serve(client, accepting.clone()));
                        }
                        _ = &mut stopped => break,
                    }
                }
            });
            // Dropping the runtime here drops every connection task, closing their sockets.
        })?;
        Ok(FaultProxy { listen: address, shared, stop: Some(stop), thread: Some(thread) })
    }

    /// The address clients connect to.
    pub fn address(&self) -> SocketAddr {
        self.listen
    }

    /// Switches the fault, for existing and new connections alike.
    pub fn set(&self, fault: Fault) {
        self.shared.fault.send_replace(fault);
    }

    pub fn fault(&self) -> Fault {
        *self.shared.fault.borrow()
    }

    pub fn counters(&self) -> Counters {
        let shared = &self.shared;
        Counters {
            connections: shared.connections.load(Ordering::Relaxed),
            bytes_to_broker: shared.bytes_to_broker.load(Ordering::Relaxed),
            bytes_to_client: shared.bytes_to_client.load(Ordering::Relaxed),
            cuts: shared.cuts.load(Ordering::Relaxed),
            faulted_chunks: shared.faulted_chunks.load(Ordering::Relaxed),
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    ToBroker,
    ToClient,
}

/// How one direction of a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// A side closed or failed: close the other one normally.
    Closed,
    /// The fault cut the connection: reset both sides.
    Cut,
}

/// One client connection: a connection to the upstream broker and a pump each way, until either
/// pump ends.
async fn serve(mut client: TcpStream, shared: Arc<Shared>) {
    // Even in a black hole the upstream connection is opened: the fault is between the client
    // and the proxy, and the broker side must be ready the moment it ends.
    let Ok(mut broker) = TcpStream::connect(&shared.upstream).await else { return };
    // Chunks are forwarded as they come; Nagle would add delays the test did not ask for.
    let _ = client.set_nodelay(true);
    let _ = broker.set_nodelay(true);
    let end = {
        let (client_read, client_write) = client.split();
        let (broker_read, broker_write) = broker.split();
        tokio::select! {
            end = pump(client_read, broker_write, Direction::ToBroker, &shared) => end,
            end = pump(broker_read, client_write, Direction::ToClient, &shared) => end,
        }
    };
    if end == End::Cut {
        // SO_LINGER 0 makes the close below send RST: the client sees the connection fail, as it
        // would when a middlebox drops it, not an orderly end of stream.
        let _ = client.set_zero_linger();
        let _ = broker.set_zero_linger();
    }
}

/// Copies chunks from `from` to `to` under the current fault until a side closes or the fault
/// cuts the connection.
async fn pump<R, W>(mut from: R, mut to: W, direction: Direction, shared: &Shared) -> End
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut fault = shared.fault.subscribe();
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return End::Closed,
            Ok(n) => n,
        };
        if let Err(end) = forward(&buffer[..n], &mut to, direction, &mut fault, shared).await {
            return end;
        }
    }
}

/// Forwards one chunk under the fault in force, re-reading the fault whenever it changes while
/// the chunk waits.
async fn forward<W>(
    chunk: &[u8],
    to: &mut W,
    direction: Direction,
    fault: &mut watch::Receiver<Fault>,
    shared: &Shared,
) -> Result<(), End>
where
    W: AsyncWrite + Unpin,
{
    let mut rest = chunk;
    let mut held = false;
    while !rest.is_empty() {
        let current = *fault.borrow_and_update();
        if !held && matches!(current, Fault::Latency(_) | Fault::BlackHole | Fault::Trickle { .. }) {
            held = true;
            shared.faulted_chunks.fetch_add(1, Ordering::Relaxed);
        }
        match current {
            Fault::Pass => return write(to, rest, direction, shared).await,
            // Requests pass: the broker must be answering for a response to be cut.
            Fault::CutMidResponse if direction == Direction::ToBroker => {
                return write(to, rest, direction, shared).await
            }
            Fault::CutMidResponse => {
                // Counted first, so that a test which saw the reset also sees the count.
                shared.cuts.fetch_add(1, Ordering::Relaxed);
                write(to, &rest[..rest.len() / 2], direction, shared).await?;
                return Err(End::Cut);
            }
            Fault::Latency(delay) => {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => return write(to, rest, direction, shared).await,
                    changed = fault.changed() => changed.map_err(|_| End::Closed)?,
                }
            }
            Fault::BlackHole => fault.changed().await.map_err(|_| End::Closed)?,
            Fault::Trickle { bytes_per_second } => {
                let slice = usize::try_from(bytes_per_second / 10).unwrap_or(usize::MAX).clamp(1, rest.len());
                write(to, &rest[..slice], direction, shared).await?;
                rest = &rest[slice..];
                // The next slice, of this chunk or the next one, waits its turn: the budget is per
                // 100 ms, not per chunk. A change of fault ends the wait.
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(100)) => {}
                    changed = fault.changed() => changed.map_err(|_| End::Closed)?,
                }
            }
        }
    }
    Ok(())
}

async fn write<W>(to: &mut W, bytes: &[u8], direction: Direction, shared: &Shared) -> Result<(), End>
where
    W: AsyncWrite + Unpin,
{
    // Counted before the write, so that a test which received the bytes also sees them counted.
    let counter = match direction {
        Direction::ToBroker => &shared.bytes_to_broker,
        Direction::ToClient => &shared.bytes_to_client,
    };
    counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    to.write_all(bytes).await.map_err(|_| End::Closed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::time::Instant;

    /// An upstream that echoes everything back, on an ephemeral port.
    fn echo_server() -> SocketAddr {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind echo server");
        let address = listener.local_addr().expect("echo address");
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                std::thread::spawn(move || {
                    let mut buffer = [0u8; 4096];
                    while let Ok(n) = stream.read(&mut buffer) {
                        if n == 0 || stream.write_all(&buffer[..n]).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        address
    }

    fn connect(proxy: &FaultProxy) -> std::net::TcpStream {
        let stream = std::net::TcpStream::connect(proxy.address()).expect("connect to the proxy");
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("read timeout");
        stream
    }

    fn echo(stream: &mut std::net::TcpStream, bytes: &[u8]) -> Vec<u8> {
        stream.write_all(bytes).expect("write");
        let mut back = vec![0u8; bytes.len()];
        stream.read_exact(&mut back).expect("read the echo");
        back
    }

    #[test]
    fn passes_then_delays_then_passes_again() {
        let proxy = FaultProxy::start("127.0.0.1:0", &echo_server().to_string()).expect("start proxy");
        let mut stream = connect(&proxy);
        assert_eq!(echo(&mut stream, b"hello"), b"hello");
        proxy.set(Fault::Latency(Duration::from_millis(150)));
        let started = Instant::now();
        assert_eq!(echo(&mut stream, b"slow"), b"slow");
        assert!(started.elapsed() >= Duration::from_millis(300), "delayed each way: {:?}", started.elapsed());
        proxy.set(Fault::Pass);
        assert_eq!(echo(&mut stream, b"fast"), b"fast");
        let counters = proxy.counters();
        assert_eq!((counters.connections, counters.bytes_to_broker, counters.bytes_to_client), (1, 13, 13));
        assert_eq!(counters.faulted_chunks, 2);
    }

    #[test]
    fn a_cut_forwards_half_a_response_then_resets() {
        let proxy = FaultProxy::start("127.0.0.1:0", &echo_server().to_string()).expect("start proxy");
        let mut stream = connect(&proxy);
        proxy.set(Fault::CutMidResponse);
        stream.write_all(b"0123456789").expect("write");
        let mut received = Vec::new();
        let end = stream.read_to_end(&mut received);
        assert_eq!(received, b"01234", "half of the response, then the end");
        assert_eq!(end.map_err(|e| e.kind()), Err(io::ErrorKind::ConnectionReset), "a reset, not a clean close");
        assert_eq!(proxy.counters().cuts, 1);
    }

    #[test]
    fn a_black_hole_holds_bytes_without_closing_and_releases_them_after() {
        let proxy = FaultProxy::start("127.0.0.1:0", &echo_server().to_string()).expect("start proxy");
        proxy.set(Fault::BlackHole);
        let mut stream = connect(&proxy);
        stream.set_read_timeout(Some(Duration::from_millis(300))).expect("read timeout");
        stream.write_all(b"anyone?").expect("write");
        let mut buffer = [0u8; 16];
        let silent = stream.read(&mut buffer).map_err(|e| e.kind());
        assert!(
            matches!(silent, Err(io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut)),
            "no answer and no close: {silent:?}"
        );
        assert_eq!(proxy.counters().bytes_to_broker, 0);
        proxy.set(Fault::Pass);
        stream.set_read_timeout(Some(Duration::from_secs(5))).expect("read timeout");
        let mut back = [0u8; 7];
        stream.read_exact(&mut back).expect("the held bytes arrive");
        assert_eq!(&back, b"anyone?");
    }

    #[test]
    fn a_trickle_paces_bytes_and_a_switch_to_pass_ends_it_at_once() {
        let proxy = FaultProxy::start("127.0.0.1:0", &echo_server().to_string()).expect("start proxy");
        let mut stream = connect(&proxy);
        proxy.set(Fault::Trickle { bytes_per_second: 100 });
        let started = Instant::now();
        // 30 bytes at 10 bytes a slice: three slices to the echo server, at least 200 ms.
        assert_eq!(echo(&mut stream, &[7u8; 30]), [7u8; 30]);
        assert!(started.elapsed() >= Duration::from_millis(200), "paced: {:?}", started.elapsed());
        stream.write_all(&[1u8; 1000]).expect("write");
        std::thread::sleep(Duration::from_millis(150));
        proxy.set(Fault::Pass);
        let started = Instant::now();
        let mut back = vec![0u8; 1000];
        stream.read_exact(&mut back).expect("the rest arrives");
        assert!(started.elapsed() < Duration::from_secs(2), "not paced after Pass: {:?}", started.elapsed());
    }

    #[test]
    fn a_taken_port_is_an_error_naming_it() {
        let first = FaultProxy::start("127.0.0.1:0", "127.0.0.1:1").expect("start proxy");
        let taken = first.address().to_string();
        let error = FaultProxy::start(&taken, "127.0.0.1:1").err().expect("the port is taken");
        assert!(error.to_string().contains(&taken), "{error}");
    }
}
