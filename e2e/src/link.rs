//! A network link emulator in user space: a TCP proxy on loopback that makes a connection
//! between a client (a headless browser) and a target server on a real port behave as if
//! it crossed a fibre line, a mobile network or a satellite hop. The kernel's `netem`, the
//! usual tool for this, is not available where the tests run.
//!
//! # What it emulates
//!
//! Each accepted connection gets its own clock per direction: "up" is client →
//! target, "down" is target → client. Bytes are read as they come, stamped with their
//! arrival time, and written on at a computed delivery time:
//!
//! - **Latency**: half the round-trip time ([`Profile::rtt_ms`]) one way, in each
//!   direction, so a request and its answer cost one RTT on top of the server's own time.
//! - **Bandwidth**: a chunk of `n` bytes occupies its direction's "wire" for
//!   `n * 8 / (Mbps * 10^6)` seconds, one chunk after another, so a large answer trickles
//!   in at the profile's rate. Reads are cut into chunks of at most [`CHUNK_BYTES`] so the
//!   shaping is smooth.
//! - **Jitter**: a uniform `0..jitter_ms` added to each chunk's one-way delay. Delivery
//!   never reorders: a chunk is never delivered before the previous chunk of its
//!   direction, as TCP itself would hand the bytes over in order.
//! - **The TCP handshake**: the kernel completes the loopback handshake before `accept()`
//!   returns, so the client's `connect()` takes no time at all. The handshake's round trip
//!   is added to the connection's first bytes instead: the client's bytes can start
//!   "leaving" only one RTT after the connection was accepted (when its SYN-ACK would have
//!   come back), so **they reach the target no earlier than accept + RTT + RTT/2**; the
//!   target's bytes can start leaving only when the target would have accepted (accept +
//!   RTT + RTT/2), so they reach the client no earlier than accept + 2 RTT. A request sent
//!   at once on a new connection is thus answered after 2 RTT plus the server's time, as
//!   on a real link. A browser's Resource Timing, though, sees `connectStart ==
//!   connectEnd`: the handshake's round trip shows up in the wait for the response. A
//!   connection opened ahead of time (a browser's preconnect) pays it while idle, as on a
//!   real link, so its first request costs only one RTT.
//!   TLS, and anything else above TCP, crosses the link as ordinary bytes, so its round
//!   trips are emulated as they are.
//!
//! Every connection's figures are kept ([`Link::log`]), so a test can compare what a
//! browser measured with what the link itself did and when.
//!
//! # What it cannot do
//!
//! - No packet loss, and so none of TCP's recovery: no retransmission, no congestion
//!   control or slow start. Bytes flow at the profile's rate from the first one.
//! - Bandwidth is per connection and per direction: two connections through one [`Link`]
//!   each get the whole rate, instead of sharing it as they would on one real line.
//! - The sender does not feel the link: the proxy reads as fast as the sender writes (up
//!   to [`QUEUE_CHUNKS`] chunks of [`CHUNK_BYTES`] queued per direction, 4 MiB, then it
//!   stops reading), so a server's writes finish long before its bytes are delivered.
//! - The target sees the connection at once (the proxy connects to it on accepting), and
//!   a target that refuses makes the client's connection close at once, not after an RTT.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::Context;
use firsttoken_crowd::stats::SplitMix64;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

/// The most bytes read (and so delivered) as one chunk: 16 KiB is 131 ms at 1 Mbps, small
/// enough for the bandwidth shaping to look smooth to a reader.
pub const CHUNK_BYTES: usize = 16 * 1024;

/// How many chunks may wait for delivery in one direction of one connection before the
/// proxy stops reading from the sender (backpressure), which bounds its memory.
pub const QUEUE_CHUNKS: usize = 256;

/// How many down deliveries a [`ConnectionLog`] keeps, from the first; `down_bytes` still
/// counts all of them.
pub const MAX_DELIVERIES_LOGGED: usize = 10_000;

mod profile;

pub use profile::{PROFILES, Profile};

/// What the link did with one connection, by its own clock.
#[derive(Debug, Clone)]
pub struct ConnectionLog {
    /// The connection's number, from 0 in the order they were accepted.
    pub id: u64,
    /// When the proxy accepted it (the client's `connect()` had just returned).
    pub accepted: Instant,
    /// The client's address.
    pub peer: SocketAddr,
    /// When the client's first bytes were written to the target.
    pub first_up_delivered: Option<Instant>,
    /// When the target's first bytes were written to the client.
    pub first_down_delivered: Option<Instant>,
    /// Bytes written to the target so far.
    pub up_bytes: u64,
    /// Bytes written to the client so far.
    pub down_bytes: u64,
    /// When the proxy was done with both sockets (`None` while the connection lasts, or
    /// if the link was dropped first).
    pub closed: Option<Instant>,
    /// Each write to the client: when it finished, and how many bytes; the first
    /// [`MAX_DELIVERIES_LOGGED`] only.
    pub deliveries_down: Vec<(Instant, usize)>,
    /// Each read from the client: when the client's bytes reached the link (the moment
    /// they left the client, on loopback), and how many; the first
    /// [`MAX_DELIVERIES_LOGGED`] only. Their bursts are the client's flights: a TLS
    /// ClientHello, then its Finished with the first request, then the next request.
    pub arrivals_up: Vec<(Instant, usize)>,
    /// Why the connection ended with an error, if it did (the target refused, a side
    /// reset, ...).
    pub error: Option<String>,
}

/// Every connection's log, shared by the accept task, the connections' tasks and the
/// [`Link`] that reads it. A connection's index in the vector is its id.
type SharedLog = Arc<Mutex<Vec<ConnectionLog>>>;

/// The log's vector, even if a task panicked while holding the lock: the entries are
/// plain figures, still worth reading.
fn lock(log: &SharedLog) -> std::sync::MutexGuard<'_, Vec<ConnectionLog>> {
    log.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The emulated link: a proxy on a loopback port in front of `target`, until dropped.
#[derive(Debug)]
pub struct Link {
    address: SocketAddr,
    target: SocketAddr,
    profile: Profile,
    log: SharedLog,
    /// Accepts connections and owns every connection's task (in a [`JoinSet`]), so
    /// aborting it when the link is dropped ends them all.
    accept_task: JoinHandle<()>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl Link {
    /// A link in front of `target`, on a free port of 127.0.0.1.
    pub async fn start(target: SocketAddr, profile: Profile) -> anyhow::Result<Link> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), target, profile).await
    }

    /// A link in front of `target`, listening on `listen` (port 0: a free one), for a test
    /// that wants several links on different loopback addresses (127.0.0.2, ...).
    pub async fn start_on(
        listen: SocketAddr,
        target: SocketAddr,
        profile: Profile,
    ) -> anyhow::Result<Link> {
        profile.check()?;
        let listener = TcpListener::bind(listen)
            .await
            .with_context(|| format!("binding the link's port on {listen}"))?;
        let address = listener
            .local_addr()
            .context("the link's listening address")?;
        let log = SharedLog::default();
        let accept_task = tokio::spawn(accept_loop(listener, target, profile, log.clone()));
        Ok(Link {
            address,
            target,
            profile,
            log,
            accept_task,
        })
    }

    /// Where clients connect.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// `http://{address}{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.address)
    }

    /// Where the link forwards to.
    pub fn target(&self) -> SocketAddr {
        self.target
    }

    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// How many connections the link has accepted so far.
    pub fn connections(&self) -> usize {
        lock(&self.log).len()
    }

    /// A copy of every connection's log so far, in the order they were accepted. The link
    /// keeps every connection's entry until it is dropped: meant for tests and benchmarks,
    /// not for a proxy that runs for days.
    pub fn log(&self) -> Vec<ConnectionLog> {
        lock(&self.log).clone()
    }
}

/// Accepts connections until the link is dropped, each served by a task of `connections`,
/// which dropping this future (aborting its task) aborts too.
async fn accept_loop(listener: TcpListener, target: SocketAddr, profile: Profile, log: SharedLog) {
    let link_seed = RandomState::new().build_hasher().finish();
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((client, peer)) => {
                    let accepted = Instant::now();
                    let id = {
                        let mut entries = lock(&log);
                        let id = entries.len();
                        entries.push(ConnectionLog {
                            id: id as u64,
                            accepted,
                            peer,
                            first_up_delivered: None,
                            first_down_delivered: None,
                            up_bytes: 0,
                            down_bytes: 0,
                            closed: None,
                            deliveries_down: Vec::new(),
                            arrivals_up: Vec::new(),
                            error: None,
                        });
                        id
                    };
                    let record = Recorder { log: log.clone(), index: id };
                    let seed = link_seed ^ (id as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
                    connections.spawn(serve(client, accepted, target, profile, record, seed));
                }
                // Out of file descriptors, or a connection reset before it was accepted:
                // nothing to do for it, and the next one may well succeed. The pause
                // keeps a lasting error from spinning.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            // Forget finished connections, so the set does not grow with every one.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Writes one connection's figures into the shared log.
#[derive(Debug, Clone)]
struct Recorder {
    log: SharedLog,
    index: usize,
}

impl Recorder {
    fn update(&self, change: impl FnOnce(&mut ConnectionLog)) {
        if let Some(entry) = lock(&self.log).get_mut(self.index) {
            change(entry);
        }
    }

    fn arrived_up(&self, at: Instant, bytes: usize) {
        self.update(|entry| {
            if entry.arrivals_up.len() < MAX_DELIVERIES_LOGGED {
                entry.arrivals_up.push((at, bytes));
            }
        });
    }

    fn delivered(&self, direction: Direction, at: Instant, bytes: usize) {
        self.update(|entry| match direction {
            Direction::Up => {
                entry.first_up_delivered.get_or_insert(at);
                entry.up_bytes += bytes as u64;
            }
            Direction::Down => {
                entry.first_down_delivered.get_or_insert(at);
                entry.down_bytes += bytes as u64;
                if entry.deliveries_down.len() < MAX_DELIVERIES_LOGGED {
                    entry.deliveries_down.push((at, bytes));
                }
            }
        });
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Direction {
    /// Client → target.
    Up,
    /// Target → client.
    Down,
}

impl std::fmt::Display for Direction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Direction::Up => "client → target",
            Direction::Down => "target → client",
        })
    }
}

/// One connection, from accepting it until both directions are done or one side fails;
/// then records when it closed and why.
async fn serve(
    client: TcpStream,
    accepted: Instant,
    target: SocketAddr,
    profile: Profile,
    record: Recorder,
    seed: u64,
) {
    let result = pump(client, accepted, target, profile, &record, seed).await;
    record.update(|entry| {
        entry.closed = Some(Instant::now());
        entry.error = result.err().map(|e| format!("{e:#}"));
    });
}

/// Connects to the target and moves bytes both ways through each direction's clock.
///
/// Each direction is a reader (reads and stamps chunks, queues them) and a writer (sleeps
/// until each chunk's delivery time and writes it). When a reader meets the end of its
/// stream, its writer delivers what is queued and then shuts down the other socket's
/// write half, so a half-close crosses the link, late like the bytes before it. When any
/// of the four fails, the others are dropped and both sockets with them.
async fn pump(
    client: TcpStream,
    accepted: Instant,
    target: SocketAddr,
    profile: Profile,
    record: &Recorder,
    seed: u64,
) -> anyhow::Result<()> {
    let server = TcpStream::connect(target)
        .await
        .with_context(|| format!("connecting to the target {target}"))?;
    // Without this, Nagle's algorithm would hold small writes back for an ACK: a delay of
    // the host's, not of the emulated link.
    client
        .set_nodelay(true)
        .context("TCP_NODELAY on the client's socket")?;
    server
        .set_nodelay(true)
        .context("TCP_NODELAY on the target's socket")?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();

    let rtt = millis(profile.rtt_ms);
    let one_way = millis(profile.one_way_ms());
    // The client can send once the SYN-ACK is back (accept + RTT); the target once the
    // client's ACK has reached it (accept + RTT + RTT/2). See the module's documentation.
    let up_clock = Clock::new(profile.up_mbps, &profile, accepted, accepted + rtt, seed);
    let down_clock = Clock::new(
        profile.down_mbps,
        &profile,
        accepted,
        accepted + rtt + one_way,
        seed ^ 0xD1B5_4A32_D192_ED03,
    );
    let (up_tx, up_rx) = mpsc::channel(QUEUE_CHUNKS);
    let (down_tx, down_rx) = mpsc::channel(QUEUE_CHUNKS);
    tokio::try_join!(
        read_side(client_read, up_tx, up_clock, Direction::Up, record),
        write_side(server_write, up_rx, Direction::Up, record),
        read_side(server_read, down_tx, down_clock, Direction::Down, record),
        write_side(client_write, down_rx, Direction::Down, record),
    )?;
    Ok(())
}

/// Bytes read from one side, and when to write them to the other.
#[derive(Debug)]
struct Chunk {
    deliver_at: Instant,
    bytes: Vec<u8>,
}

/// Reads one direction's bytes, chunk by chunk, and queues each with its delivery time;
/// returns at the end of the stream (dropping `queue` tells the writer).
async fn read_side(
    mut from: OwnedReadHalf,
    queue: mpsc::Sender<Chunk>,
    mut clock: Clock,
    direction: Direction,
    record: &Recorder,
) -> anyhow::Result<()> {
    let mut buffer = vec![0u8; CHUNK_BYTES];
    loop {
        let n = from
            .read(&mut buffer)
            .await
            .with_context(|| format!("reading {direction}"))?;
        if n == 0 {
            return Ok(());
        }
        let arrived = Instant::now();
        if direction == Direction::Up {
            record.arrived_up(arrived, n);
        }
        let deliver_at = clock.schedule(arrived, n);
        let chunk = Chunk {
            deliver_at,
            bytes: buffer[..n].to_vec(),
        };
        // A full queue waits here: the sender's bytes stay in the kernel's buffers.
        if queue.send(chunk).await.is_err() {
            // The writer is gone, which it is only after failing, and then the whole
            // connection is being dropped anyway.
            return Ok(());
        }
    }
}

/// Writes one direction's chunks, each at its delivery time; when the queue ends, shuts
/// the other side's write half (its reader sees the end of the stream).
async fn write_side(
    mut to: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Chunk>,
    direction: Direction,
    record: &Recorder,
) -> anyhow::Result<()> {
    while let Some(chunk) = queue.recv().await {
        tokio::time::sleep_until(chunk.deliver_at.into()).await;
        to.write_all(&chunk.bytes)
            .await
            .with_context(|| format!("writing {direction}"))?;
        record.delivered(direction, Instant::now(), chunk.bytes.len());
    }
    to.shutdown()
        .await
        .with_context(|| format!("shutting down {direction} after the end of the stream"))
}

/// One direction's timing: when the wire is next free, when the last chunk was delivered.
#[derive(Debug)]
struct Clock {
    one_way: Duration,
    jitter_ms: f64,
    /// Seconds one byte occupies the wire (0 without a rate limit).
    secs_per_byte: f64,
    /// When the previous chunk has been fully put on the wire; at first, when the
    /// handshake lets this direction send.
    wire_free: Instant,
    /// When the previous chunk was (to be) delivered; no chunk goes before it.
    last_delivery: Instant,
    random: SplitMix64,
}

impl Clock {
    fn new(mbps: f64, profile: &Profile, accepted: Instant, can_send: Instant, seed: u64) -> Clock {
        Clock {
            one_way: millis(profile.one_way_ms()),
            jitter_ms: profile.jitter_ms,
            secs_per_byte: 8.0 / (mbps * 1e6),
            wire_free: can_send,
            last_delivery: accepted,
            random: SplitMix64::new(seed),
        }
    }

    /// When a chunk of `bytes` bytes that arrived at `arrival` is to be delivered: it
    /// waits for the wire, occupies it for its serialization time, travels one way with
    /// some jitter, and never overtakes the chunk before it.
    fn schedule(&mut self, arrival: Instant, bytes: usize) -> Instant {
        let start = arrival.max(self.wire_free);
        self.wire_free = start + secs(bytes as f64 * self.secs_per_byte);
        let jitter = millis(self.jitter_ms * self.random.unit());
        let delivery = (self.wire_free + self.one_way + jitter).max(self.last_delivery);
        self.last_delivery = delivery;
        delivery
    }
}

/// `ms` milliseconds as a duration.
fn millis(ms: f64) -> Duration {
    secs(ms / 1000.0)
}

/// `s` seconds as a duration. [`Profile::check`] keeps every value finite, non-negative
/// and below hours, so the fallback is never taken; it only keeps a mistake from
/// panicking.
fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(Duration::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::oneshot;

    /// A profile for tests: `rtt_ms`, `jitter_ms`, `mbps` each way.
    fn profile(rtt_ms: f64, jitter_ms: f64, mbps: f64) -> Profile {
        Profile {
            name: "test",
            rtt_ms,
            down_mbps: mbps,
            up_mbps: mbps,
            jitter_ms,
        }
    }

    fn ms(d: Duration) -> f64 {
        d.as_secs_f64() * 1000.0
    }

    /// An echo server on a free port: writes back whatever it reads and, at the end of
    /// the client's stream, writes `<eof>` and closes.
    async fn echo_server() -> anyhow::Result<SocketAddr> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let _ = socket.set_nodelay(true);
                    let mut buffer = [0u8; 4096];
                    loop {
                        match socket.read(&mut buffer).await {
                            Ok(0) => {
                                let _ = socket.write_all(b"<eof>").await;
                                let _ = socket.shutdown().await;
                                return;
                            }
                            Ok(n) => {
                                if socket.write_all(&buffer[..n]).await.is_err() {
                                    return;
                                }
                            }
                            Err(_) => return,
                        }
                    }
                });
            }
        });
        Ok(address)
    }

    /// A server for one connection: after reading one byte, runs `send` on the socket
    /// and closes it; `send` answers through the returned channel.
    async fn one_shot_server<T, F, Fut>(
        send: F,
    ) -> anyhow::Result<(SocketAddr, oneshot::Receiver<T>)>
    where
        T: Send + 'static,
        F: FnOnce(TcpStream) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T> + Send,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let (tx, rx) = oneshot::channel();
        tokio::spawn(async move {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let _ = socket.set_nodelay(true);
            let mut go = [0u8; 1];
            if socket.read_exact(&mut go).await.is_err() {
                return;
            }
            let _ = tx.send(send(socket).await);
        });
        Ok((address, rx))
    }

    /// `test`, failing after `seconds` instead of hanging (a link that loses a
    /// half-close would leave a reader waiting for ever).
    async fn within_seconds(
        seconds: u64,
        test: impl Future<Output = anyhow::Result<()>>,
    ) -> anyhow::Result<()> {
        tokio::time::timeout(Duration::from_secs(seconds), test)
            .await
            .context("the test took too long")?
    }

    async fn connect(link: &Link) -> anyhow::Result<TcpStream> {
        let socket = TcpStream::connect(link.address()).await?;
        socket.set_nodelay(true)?;
        Ok(socket)
    }

    #[test]
    fn profiles_by_name_and_label() {
        assert_eq!(Profile::by_name("fiber"), Some(Profile::FIBER));
        assert_eq!(Profile::by_name("Cable"), Some(Profile::CABLE));
        assert_eq!(Profile::by_name("cable/Wi-Fi"), Some(Profile::CABLE));
        assert_eq!(Profile::by_name("4g"), Some(Profile::FOURG));
        assert_eq!(
            Profile::by_name("poor-cellular"),
            Some(Profile::POOR_CELLULAR)
        );
        assert_eq!(
            Profile::by_name("Poor cellular"),
            Some(Profile::POOR_CELLULAR)
        );
        assert_eq!(Profile::by_name("SATELLITE"), Some(Profile::SATELLITE));
        assert_eq!(Profile::by_name("5g"), None);
        assert_eq!(Profile::FOURG.label(), "4G (80 ms, 12/3 Mbps)");
        assert_eq!(
            Profile::POOR_CELLULAR.label(),
            "poor cellular (300 ms, 1.6/0.75 Mbps)"
        );
        assert_eq!(Profile::SATELLITE.one_way_ms(), 300.0);
        for p in PROFILES {
            p.check().expect("the built-in profiles make sense");
        }
        assert!(profile(-1.0, 0.0, 1.0).check().is_err());
        assert!(profile(10.0, f64::NAN, 1.0).check().is_err());
        assert!(profile(10.0, 0.0, 0.0).check().is_err());
        assert!(profile(10.0, 0.0, f64::INFINITY).check().is_ok());
    }

    /// The clock alone, without sockets: the handshake gate, serialization, and jitter
    /// that never reorders.
    #[test]
    fn clock_arithmetic() {
        let t0 = Instant::now();
        let p = profile(20.0, 0.0, 1.0);
        let mut clock = Clock::new(1.0, &p, t0, t0 + millis(20.0), 1);
        // 125,000 bytes arriving at once, in 16 KiB chunks: one second of wire.
        let mut last = t0;
        let mut left = 125_000;
        while left > 0 {
            let n = left.min(CHUNK_BYTES);
            last = clock.schedule(t0, n);
            left -= n;
        }
        // Free at 20 ms (handshake), 1000 ms of wire, 10 ms one way.
        assert!((ms(last - t0) - 1030.0).abs() < 0.01, "{:?}", last - t0);

        let p = profile(20.0, 30.0, f64::INFINITY);
        let mut clock = Clock::new(p.up_mbps, &p, t0, t0, 7);
        let mut previous = t0;
        let mut lags = Vec::new();
        for i in 0..1000 {
            let arrival = t0 + millis(i as f64 * 5.0);
            let at = clock.schedule(arrival, 10);
            assert!(at >= previous, "chunk {i} overtook the one before");
            let lag = ms(at - arrival);
            assert!((10.0..40.0 + 1e-9).contains(&lag), "chunk {i}: {lag} ms");
            lags.push(lag);
            previous = at;
        }
        let spread = lags.iter().cloned().fold(f64::MIN, f64::max)
            - lags.iter().cloned().fold(f64::MAX, f64::min);
        assert!(spread > 20.0, "jitter spread only {spread} ms");
    }

    /// 1. A round trip costs one RTT; the first one on a new connection also pays the
    ///    handshake's RTT: up at accept + RTT + RTT/2, back at accept + 2 RTT.
    #[tokio::test]
    async fn round_trip_and_handshake() -> anyhow::Result<()> {
        within_seconds(5, async {
            let target = echo_server().await?;
            let link = Link::start(target, profile(100.0, 0.0, 10_000.0)).await?;
            let mut client = connect(&link).await?;
            let mut byte = [0u8; 1];

            let started = Instant::now();
            client.write_all(b"a").await?;
            client.read_exact(&mut byte).await?;
            let first = ms(started.elapsed());
            assert_eq!(&byte, b"a");
            assert!(
                (195.0..=240.0).contains(&first),
                "first exchange took {first} ms, not 2 RTT (200 ms)"
            );

            for letter in [b"b", b"c"] {
                let started = Instant::now();
                client.write_all(letter).await?;
                client.read_exact(&mut byte).await?;
                let took = ms(started.elapsed());
                assert_eq!(&byte, letter);
                assert!(
                    (100.0..=115.0).contains(&took),
                    "a round trip took {took} ms, not 1 RTT (100 ms)"
                );
            }
            Ok(())
        })
        .await
    }

    /// 2. 125,000 bytes down a 1 Mbps link take a second, arriving bit by bit.
    #[tokio::test]
    async fn bandwidth() -> anyhow::Result<()> {
        within_seconds(5, async {
            let (target, sent) = one_shot_server(|mut socket| async move {
                let started = Instant::now();
                let _ = socket.write_all(&vec![7u8; 125_000]).await;
                let _ = socket.shutdown().await;
                started
            })
            .await?;
            let mut link_profile = profile(20.0, 0.0, 1.0);
            link_profile.up_mbps = 10.0;
            let link = Link::start(target, link_profile).await?;
            let mut client = connect(&link).await?;
            client.write_all(b"g").await?;

            let mut first_byte = None;
            let mut received = 0;
            let mut buffer = vec![0u8; 65_536];
            loop {
                let n = client.read(&mut buffer).await?;
                if n == 0 {
                    break;
                }
                first_byte.get_or_insert_with(Instant::now);
                received += n;
            }
            let last_byte = Instant::now();
            let started = sent.await?;
            assert_eq!(received, 125_000);
            let whole = ms(last_byte - started);
            assert!(
                (1000.0..1300.0).contains(&whole),
                "125,000 bytes at 1 Mbps took {whole} ms"
            );
            let first = ms(first_byte.context("some bytes")? - started);
            assert!(first < 250.0, "the first bytes came only after {first} ms");
            let log = link.log();
            assert!(
                log[0].deliveries_down.len() >= 8,
                "{} deliveries: not shaped chunk by chunk",
                log[0].deliveries_down.len()
            );
            Ok(())
        })
        .await
    }

    /// 3. With jitter, 200 numbers written one by one arrive all, in order, each at least
    ///    one way late and at most one way plus the jitter (and some slack) late, with the
    ///    delays varying.
    #[tokio::test]
    async fn jitter_keeps_order() -> anyhow::Result<()> {
        within_seconds(5, async {
            let (target, sent) = one_shot_server(|mut socket| async move {
                let mut times = Vec::new();
                for i in 0u32..200 {
                    times.push(Instant::now());
                    if socket.write_all(&i.to_be_bytes()).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                let _ = socket.shutdown().await;
                times
            })
            .await?;
            let link = Link::start(target, profile(20.0, 30.0, 10_000.0)).await?;
            let mut client = connect(&link).await?;
            client.write_all(b"g").await?;

            let mut arrivals = Vec::new();
            let mut number = [0u8; 4];
            for expected in 0u32..200 {
                client.read_exact(&mut number).await?;
                arrivals.push(Instant::now());
                assert_eq!(u32::from_be_bytes(number), expected, "out of order");
            }
            assert_eq!(client.read(&mut number).await?, 0, "more than 200 numbers");
            let sent = sent.await?;
            let lags: Vec<f64> = sent
                .iter()
                .zip(&arrivals)
                .map(|(s, a)| ms(*a - *s))
                .collect();
            let (least, most) = lags.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &lag| {
                (lo.min(lag), hi.max(lag))
            });
            assert!(least >= 10.0, "a number came {least} ms after it was sent");
            assert!(most <= 10.0 + 30.0 + 30.0, "a number came {most} ms after");
            assert!(most - least >= 10.0, "delays {least}..{most} ms: no jitter");
            Ok(())
        })
        .await
    }

    /// 4. The log counts the connections and says when each one's bytes went through,
    ///    also for a link on another loopback address.
    #[tokio::test]
    async fn truth_log() -> anyhow::Result<()> {
        within_seconds(5, async {
            let target = echo_server().await?;
            let elsewhere: SocketAddr = "127.0.0.3:0".parse()?;
            let link = Link::start_on(elsewhere, target, profile(20.0, 0.0, 10_000.0)).await?;
            assert_eq!(link.address().ip(), elsewhere.ip());
            assert_eq!(link.connections(), 0);

            let mut peers = Vec::new();
            for _ in 0..2 {
                let mut client = connect(&link).await?;
                peers.push(client.local_addr()?);
                client.write_all(b"hi").await?;
                client.shutdown().await?;
                let mut answer = Vec::new();
                client.read_to_end(&mut answer).await?;
                assert_eq!(answer, b"hi<eof>");
            }
            assert_eq!(link.connections(), 2);

            // The proxy closes its sockets just after the client's last read.
            let deadline = Instant::now() + Duration::from_secs(2);
            while link.log().iter().any(|c| c.closed.is_none()) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let log = link.log();
            assert_eq!(log.len(), 2);
            for (i, connection) in log.iter().enumerate() {
                assert_eq!(connection.id, i as u64);
                assert_eq!(connection.peer, peers[i]);
                assert_eq!((connection.up_bytes, connection.down_bytes), (2, 7));
                assert_eq!(connection.error, None);
                let up = connection.first_up_delivered.context("bytes went up")?;
                let down = connection.first_down_delivered.context("bytes came down")?;
                // The handshake's RTT, then half an RTT up; another half back.
                assert!(ms(up - connection.accepted) >= 30.0);
                assert!(ms(down - connection.accepted) >= 40.0);
                assert!(down > up);
                // "hi" and "<eof>", in one write or two.
                let logged: usize = connection.deliveries_down.iter().map(|(_, n)| n).sum();
                assert_eq!(logged, 7);
                assert!(connection.deliveries_down.iter().all(|(at, _)| *at >= down));
                assert!(connection.closed.context("closed")? >= down);
            }
            Ok(())
        })
        .await
    }

    /// 5. A half-close crosses the link: the server sees the end of the stream and the
    ///    client still reads what the server writes after it.
    #[tokio::test]
    async fn half_close() -> anyhow::Result<()> {
        within_seconds(5, async {
            let target = echo_server().await?;
            let link = Link::start(target, profile(20.0, 5.0, 10_000.0)).await?;
            let mut client = connect(&link).await?;
            client.write_all(b"hello").await?;
            client.shutdown().await?;
            let mut answer = Vec::new();
            client.read_to_end(&mut answer).await?;
            assert_eq!(answer, b"hello<eof>");
            Ok(())
        })
        .await
    }

    /// Dropping the link closes its connections, and a target that refuses closes the
    /// client's connection, with the reason in the log.
    #[tokio::test]
    async fn drop_and_refusal() -> anyhow::Result<()> {
        within_seconds(5, async {
            let target = echo_server().await?;
            let link = Link::start(target, profile(10.0, 0.0, 10_000.0)).await?;
            let mut client = connect(&link).await?;
            client.write_all(b"x").await?;
            let mut byte = [0u8; 1];
            client.read_exact(&mut byte).await?;
            drop(link);
            let read = tokio::time::timeout(Duration::from_secs(1), client.read(&mut byte)).await?;
            assert!(matches!(read, Ok(0) | Err(_)), "still open: {read:?}");

            // A port nobody listens on: bind one and let it go.
            let closed = TcpListener::bind("127.0.0.1:0").await?.local_addr()?;
            let link = Link::start(closed, profile(10.0, 0.0, 10_000.0)).await?;
            let mut client = connect(&link).await?;
            let read = tokio::time::timeout(Duration::from_secs(1), client.read(&mut byte)).await?;
            assert!(matches!(read, Ok(0) | Err(_)), "still open: {read:?}");
            let deadline = Instant::now() + Duration::from_secs(1);
            while link.log()[0].closed.is_none() && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let error = link.log()[0].error.clone().unwrap_or_default();
            assert!(error.contains("connecting to the target"), "{error:?}");
            Ok(())
        })
        .await
    }
}
