//! The result record, schema version 1: one benchmark run and its samples, as the browser
//! uploads it and the collector stores it.
//!
//! The same types and the same [`Run::validate`] run in the browser (before an upload is
//! offered) and in the collector (before anything is stored), so the two cannot drift.
//! `schema/run.v1.json` is the published JSON Schema; a test checks that what this module
//! writes matches it. Unknown fields are rejected: a record holds exactly what the privacy
//! rules list (ARCHITECTURE.md, "What may leave the browser"), and nothing can be
//! smuggled in beside it.

use firsttoken_stream::dialect::{Dialect, Timings, Usage};
use serde::{Deserialize, Serialize};

use crate::connections::PortOff;
use crate::plan::{Phase, RecordedPlan};

mod bounds;
mod clean;
mod ids;
mod size;
mod validate;

pub use clean::{MAX_MESSAGE_CHARS, STEPS_PER_MS, stored_time};
pub use ids::{RecordParts, is_uuid, run_id_from_random};
pub use size::{MAX_RECORD_BYTES, MAX_RUN_ITL_GAPS, fair_share, largest_run};

/// The schema version this crate reads and writes.
pub const SCHEMA_VERSION: u32 = 1;
/// No time in a record may reach a day: a longer wait is a broken clock, not a measurement.
pub const MAX_MS: f64 = 86_400_000.0;
/// Token counts above this are nonsense from a broken stream.
pub const MAX_TOKENS: u64 = 10_000_000;
/// The most `Server-Timing` entries, or stream timing entries, one sample may keep.
pub const MAX_TIMING_ENTRIES: usize = 32;
/// Runs started before 2020-01-01 or after 2100-01-01 (Unix ms) have a broken clock.
pub const STARTED_AT_RANGE_MS: (u64, u64) = (1_577_836_800_000, 4_102_444_800_000);

/// One benchmark run: a plan executed once by one browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Run {
    /// Always [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// A random UUID (v4) made by the browser; the idempotency key of an upload.
    pub run_id: String,
    /// When the run started, Unix milliseconds from the browser's clock.
    pub started_at_ms: u64,
    /// The firsttoken version that produced the record.
    pub app_version: String,
    /// The share link the run came from ([`crate::share::Study::study_id`]), so the
    /// operator can read one link's runs alone. `None` for a link without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study_id: Option<String>,
    /// What was measured: the first is the main target, the others were compared with it.
    /// A sample's `target` is an index into this list.
    pub targets: Vec<Target>,
    pub client: Client,
    pub plan: RecordedPlan,
    /// How well the measuring engine kept time during the run.
    pub engine: EngineReport,
    /// Every request the run made, failed ones included, in the order they started.
    pub samples: Vec<Sample>,
}

/// A measured target, as a record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// A name the operator gave the target ("prod chat", "provider direct").
    pub label: String,
    /// The target's origin (`https://chat.example.com`): never its path or query, which
    /// can carry tokens.
    pub origin: String,
    /// The operator's version label for before/after comparisons ("v1.4.2", "fix-db-pool").
    pub version: Option<String>,
    pub dialect: Dialect,
    /// The built-in demo target: simulated numbers, kept out of crowd summaries.
    pub demo: bool,
    /// The names of the request bodies sent to it.
    pub scenarios: Vec<String>,
}

/// How well the engine kept time, so that a run taken on a struggling phone or in a
/// hidden tab can be recognised.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EngineReport {
    /// The engine ran in a dedicated Web Worker (not on the page's main thread).
    pub in_worker: bool,
    /// How late the engine's periodic timer fired: 99th percentile and worst, in ms. A
    /// late timer means every timestamp taken then may be as late.
    pub timer_lateness_p99_ms: f64,
    pub timer_lateness_max_ms: f64,
    /// How many timer ticks that is based on.
    pub timer_ticks: u32,
    /// How long the page was hidden during the run (browsers throttle hidden pages).
    pub hidden_ms: f64,
    /// The smallest step the engine's clock (`performance.now()`) was seen to take, read
    /// at the run's start: 0.1 ms in Chromium, 1 ms in Firefox and WebKit on a page that
    /// is not cross-origin isolated; 5 µs and 20 µs on one that is. No time in the run is
    /// finer than this. `None` when the clock moved fewer than three times in the 50 ms it
    /// was watched, too few to tell its grain from a pause of the thread (or an older page
    /// made the record).
    #[serde(default)]
    pub clock_step_ms: Option<f64>,
    /// The page was cross-origin isolated (`crossOriginIsolated`: served with COOP and
    /// COEP over a secure origin), which is what lets Firefox and WebKit give a clock
    /// finer than 1 ms. `None` when the browser does not say (or an older page made the
    /// record).
    #[serde(default)]
    pub cross_origin_isolated: Option<bool>,
    /// What the page uses that this browser did not offer: each names the fields that are
    /// absent from the record for that reason (never filled with a guess). In the order
    /// of [`Unavailable::ALL`], each at most once.
    #[serde(default)]
    pub unavailable: Vec<Unavailable>,
    /// Why the client port the main target reported was not used to tell new connections
    /// from reused ones (it was not the browser's: see [`crate::connections`]); `None`
    /// when it was used, when it never proved itself, or when none was reported.
    // Left out when unknown, so a record made before this field hashes as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_port_off: Option<PortOff>,
}

/// A part of the web platform the page uses and a browser may lack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unavailable {
    /// The Network Information API (`navigator.connection`; Chromium has it, Firefox and
    /// Safari do not): `client.effective_type`, `client.rtt_ms` and
    /// `client.downlink_mbps` are null.
    NetworkInformation,
    /// Resource Timing's `nextHopProtocol`: every `conn.protocol` is null.
    NextHopProtocol,
    /// Resource Timing's `serverTiming`: `server_timing` is empty (a stream's own timings
    /// event still fills `timings`).
    ServerTiming,
    /// IndexedDB (some private-browsing modes): the run could not be kept in the browser,
    /// so it was offered for upload once and cannot be sent later.
    IndexedDb,
}

impl Unavailable {
    pub const ALL: [Unavailable; 4] = [
        Unavailable::NetworkInformation,
        Unavailable::NextHopProtocol,
        Unavailable::ServerTiming,
        Unavailable::IndexedDb,
    ];

    /// The name a record uses.
    pub fn name(self) -> &'static str {
        match self {
            Unavailable::NetworkInformation => "network-information",
            Unavailable::NextHopProtocol => "next-hop-protocol",
            Unavailable::ServerTiming => "server-timing",
            Unavailable::IndexedDb => "indexed-db",
        }
    }

    /// What the record lacks for it, as a person reads it.
    pub fn consequence(self) -> &'static str {
        match self {
            Unavailable::NetworkInformation => {
                "this browser does not say what network it is on (the Network Information API), so only the network the user picked is known"
            }
            Unavailable::NextHopProtocol => {
                "this browser does not say which HTTP version a request used (Resource Timing's nextHopProtocol)"
            }
            Unavailable::ServerTiming => {
                "this browser does not pass on the target's Server-Timing header, so the server's own steps are missing"
            }
            Unavailable::IndexedDb => {
                "this browser could not keep the run (IndexedDB is unavailable, as in some private windows), so it could not be sent later"
            }
        }
    }
}

/// The coarsest clock step a record may report (no browser steps more coarsely).
pub const MAX_CLOCK_STEP_MS: f64 = 100.0;

/// A coarse description of the browser and network, never enough to identify anyone.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Client {
    /// Browser family ("Chrome", "Firefox", "Safari", …).
    pub browser: Option<String>,
    pub browser_major: Option<u32>,
    /// OS family ("Android", "iOS", "Windows", "macOS", "Linux", "ChromeOS").
    pub os: Option<String>,
    pub mobile: Option<bool>,
    /// The network the user says they are on.
    pub network: NetworkLabel,
    /// Network Information API, where the browser has it: `slow-2g`, `2g`, `3g`, `4g`.
    pub effective_type: Option<String>,
    pub rtt_ms: Option<f64>,
    pub downlink_mbps: Option<f64>,
    /// The same three read when the run started (the fields above are read when it
    /// ended): a phone that moved from Wi-Fi to cellular during a 20-minute run, or a
    /// browser whose estimate the run's own slow answers dragged down, shows here.
    /// Left out when unknown, so a record made before this field hashes as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_start: Option<NetworkReading>,
}

/// What the Network Information API said at one moment.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkReading {
    pub effective_type: Option<String>,
    pub rtt_ms: Option<f64>,
    pub downlink_mbps: Option<f64>,
}

impl Client {
    /// The reading when the run ended.
    pub fn at_end(&self) -> NetworkReading {
        NetworkReading {
            effective_type: self.effective_type.clone(),
            rtt_ms: self.rtt_ms,
            downlink_mbps: self.downlink_mbps,
        }
    }

    /// Whether the browser's network reading changed between the run's start and its
    /// end; `None` without a reading at the start.
    pub fn network_changed(&self) -> Option<bool> {
        Some(self.at_start.as_ref()? != &self.at_end())
    }
}

/// The network a user says they are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NetworkLabel {
    Cellular,
    Fiber,
    CableDsl,
    Wifi,
    Satellite,
    Other,
    /// The user did not say.
    #[default]
    Unknown,
}

impl NetworkLabel {
    pub const ALL: [NetworkLabel; 7] = [
        NetworkLabel::Cellular,
        NetworkLabel::Fiber,
        NetworkLabel::CableDsl,
        NetworkLabel::Wifi,
        NetworkLabel::Satellite,
        NetworkLabel::Other,
        NetworkLabel::Unknown,
    ];

    /// The name used in records.
    pub fn name(self) -> &'static str {
        match self {
            NetworkLabel::Cellular => "cellular",
            NetworkLabel::Fiber => "fiber",
            NetworkLabel::CableDsl => "cable-dsl",
            NetworkLabel::Wifi => "wifi",
            NetworkLabel::Satellite => "satellite",
            NetworkLabel::Other => "other",
            NetworkLabel::Unknown => "unknown",
        }
    }

    /// What a person reads.
    pub fn title(self) -> &'static str {
        match self {
            NetworkLabel::Cellular => "Cellular",
            NetworkLabel::Fiber => "Fiber",
            NetworkLabel::CableDsl => "Cable / DSL",
            NetworkLabel::Wifi => "Wi-Fi",
            NetworkLabel::Satellite => "Satellite",
            NetworkLabel::Other => "Other",
            NetworkLabel::Unknown => "Not sure",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|n| n.name() == name)
    }

    /// The label the landing ticks before the user picks one, from the type of network
    /// the browser says it is on (`navigator.connection.type`, where there is one:
    /// Chrome on Android): cellular or Wi-Fi when it says so, otherwise "Not sure".
    pub fn guess(connection_type: Option<&str>) -> Self {
        match connection_type {
            Some("cellular") => NetworkLabel::Cellular,
            Some("wifi") => NetworkLabel::Wifi,
            _ => NetworkLabel::Unknown,
        }
    }
}

/// Why a request did not give a complete answer. Failed requests are samples too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorClass {
    /// No response: DNS, connection, TLS or CORS failure (status 0).
    Network,
    /// A response with a status outside 200–299.
    Http,
    /// The request took longer than the plan allows.
    Timeout,
    /// Cancelled by the user.
    Aborted,
    /// A 2xx response that is not an event stream.
    Protocol,
    /// An error event inside a 200 stream.
    Stream,
    /// An event that does not have its dialect's shape.
    Parse,
    /// A 200 event stream that ended cleanly before its end marker (`[DONE]`,
    /// `message_stop`, …) or inside an event: the answer was cut off. A sample that got
    /// answer text first keeps its TTFT.
    Truncated,
    /// No byte arrived for the plan's stall limit (`stall_timeout_ms`): distinct from
    /// the whole request taking longer than `timeout_ms`.
    Stalled,
}

impl ErrorClass {
    pub fn name(self) -> &'static str {
        match self {
            ErrorClass::Network => "network",
            ErrorClass::Http => "http",
            ErrorClass::Timeout => "timeout",
            ErrorClass::Aborted => "aborted",
            ErrorClass::Protocol => "protocol",
            ErrorClass::Stream => "stream",
            ErrorClass::Parse => "parse",
            ErrorClass::Truncated => "truncated",
            ErrorClass::Stalled => "stalled",
        }
    }
}

/// One request. All `*_ms` times are milliseconds from the request's `t0`, the
/// `performance.now()` reading taken immediately before `fetch()` was called.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Sample {
    /// Position in the run, from 0.
    pub index: u32,
    pub phase: Phase,
    /// Which of the run's targets it went to (0: the main one).
    pub target: u32,
    /// The request body's scenario name.
    pub scenario: Option<String>,
    /// How many requests were in flight together (1 when sequential).
    pub concurrency: u32,
    /// The batch of simultaneous requests it belonged to, counted from 0 within the phase.
    pub batch: Option<u32>,
    /// For a cold request: how long the plan asked to stay idle before it.
    pub idle_ms: Option<u32>,
    /// For a cold request: the idle time actually spent, from the end of the request
    /// before it to its `t0`.
    #[serde(default)]
    pub idle_spent_ms: Option<f64>,
    /// For a cold request: how late the wait's own timer came back, at worst. Seconds
    /// here mean the browser paused the page during the wait (a frozen background tab).
    #[serde(default)]
    pub idle_timer_late_ms: Option<f64>,
    /// `t0` as an offset from the run's start.
    pub start_ms: f64,
    /// HTTP status; 0 when the request never got a response.
    pub status: u16,
    pub error: Option<ErrorClass>,
    /// What went wrong, in words (bounded; never the response body).
    pub error_message: Option<String>,
    /// The `fetch()` promise resolved: status and headers known.
    pub headers_ms: Option<f64>,
    /// The first body chunk was read.
    pub ttfb_ms: Option<f64>,
    /// The first event with answer text was read: **the** TTFT.
    pub ttft_ms: Option<f64>,
    /// The first event with any output (reasoning, tool call or answer text).
    pub ttft_any_ms: Option<f64>,
    /// The last event with output.
    pub last_token_ms: Option<f64>,
    /// The stream ended (reader done).
    pub e2e_ms: Option<f64>,
    /// Gaps between successive output events (at most [`firsttoken_stream::recorder::MAX_ITL_GAPS`]).
    pub itl_ms: Vec<f64>,
    /// Events with output: chunk counts are not token counts.
    pub output_chunks: u32,
    /// Of those, events with reasoning (a reasoning model's thinking, redacted or not).
    #[serde(default)]
    pub reasoning_chunks: u32,
    /// Token counts, when the stream reported them.
    pub usage: Option<Usage>,
    /// The stream's own end marker arrived (`[DONE]`).
    pub done: bool,
    /// The connection, from Resource Timing, where the browser exposed it.
    pub conn: Option<Connection>,
    /// The response's `Server-Timing` entries.
    pub server_timing: Vec<ServerTimingEntry>,
    /// The timing breakdown the stream itself carried (`auth_ms`, `retrieval_ms`, …).
    pub stream_timings: Option<Timings>,
    /// The page was hidden at some point during the request, or for a cold request
    /// during its idle wait (browsers throttle hidden pages).
    pub hidden: bool,
    /// For a `429` answer: how long the engine then waited, as its `Retry-After` asked
    /// (at most [`MAX_RETRY_WAIT_MS`]), before the next request. Never part of any
    /// latency: the next request's `t0` comes after it.
    #[serde(default)]
    pub retry_wait_ms: Option<f64>,
    /// The response came after one or more redirects (`Response.redirected`): each cost a
    /// round trip, and a cross-origin one a preflight too, so the request's times are not
    /// those of the URL asked for.
    // Left out when false, so a record made before this field hashes as it did.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub redirected: bool,
    /// Values the browser saw that could not be kept and were dropped or clipped (see
    /// [`Sample::clean`]): a timing entry with a negative or day-long duration, entries
    /// past the 32 allowed, a token count past [`MAX_TOKENS`].
    #[serde(default)]
    pub dropped: u32,
}

/// The longest `Retry-After` wait the engine honours: a longer one is recorded and cut
/// to this.
pub const MAX_RETRY_WAIT_MS: f64 = 60_000.0;

impl Sample {
    /// Whether the sample counts in the main target's latency statistics: warm-up
    /// requests, probes (plain GETs) and other targets' requests do not.
    pub fn counts_for_latency(&self) -> bool {
        self.target == 0 && self.phase.streams() && self.phase != Phase::Warmup
    }

    /// Tokens of the answer itself: the reported output tokens less any reasoning tokens.
    /// `None` when the stream reported no count, or carried reasoning without saying how
    /// many tokens of it (Anthropic counts thinking in its output tokens).
    pub fn answer_tokens(&self) -> Option<u64> {
        let usage = self.usage?;
        let output = usage.output_tokens?;
        match usage.reasoning_tokens {
            Some(reasoning) => output.checked_sub(reasoning),
            None if self.reasoning_chunks > 0 => None,
            None => Some(output),
        }
    }
}

/// What Resource Timing says about a request's connection.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Connection {
    /// Resource Timing saw the request set up no connection of its own (`null`: it gave
    /// no detail, and what is known comes from the port the target reported). A
    /// cross-origin request that needs a CORS preflight shows this even on a brand-new
    /// connection: the preflight opened it.
    pub reused: Option<bool>,
    /// Whether the request ran on a connection no earlier request of the run had used, as
    /// far as it can be verified: from the client port the target reports
    /// (`X-Firsttoken-Client-Port`, as the demo does; a port seen before under any host
    /// name is a reused, or coalesced, connection), and from a connect interval Resource
    /// Timing shows. `None` when it cannot be told (a preflighted request to a target
    /// that does not report the port). See [`crate::connections`].
    pub new_connection: Option<bool>,
    /// `h2`, `http/1.1`, `h3`.
    pub protocol: Option<String>,
    pub dns_ms: Option<f64>,
    /// TCP (and TLS) connection setup.
    pub connect_ms: Option<f64>,
    /// The TLS part of the connection setup.
    pub tls_ms: Option<f64>,
    /// From `fetch()` to the moment the browser sent the request (Resource Timing's
    /// `requestStart − startTime`): a DNS lookup, a connection and its TLS handshake, and
    /// a CORS preflight, whichever went before it. Near zero on a warm connection with the
    /// preflight cached. `None` without detail.
    // Left out when unknown, so a record made before this field hashes as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_ms: Option<f64>,
    /// From the request sent to the first byte of the answer (Resource Timing's
    /// `responseStart − requestStart`): one round trip and the server's time to its
    /// response head, as the browser's network stack timed it, without the page's own
    /// hops to and from it. `None` without detail.
    // Left out when unknown, so a record made before this field hashes as it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<f64>,
}

/// One `Server-Timing` entry: `db;dur=53;desc="query"`.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerTimingEntry {
    pub name: String,
    pub duration_ms: f64,
    pub description: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::url::{check_origin, origin_of};
    use firsttoken_stream::dialect::{Timings, Usage};

    /// The Network Information API's types (`bluetooth`, `cellular`, `ethernet`, `none`,
    /// `mixed`, `other`, `unknown`, `wifi`, `wimax`): only cellular and Wi-Fi name a
    /// label; an Ethernet link could be fiber or cable, so it is left to the user.
    /// The Network Information reading at the start and at the end of a run: a change
    /// between them is recorded and said; a record without a start reading says nothing.
    #[test]
    fn a_network_reading_that_changed_during_the_run_is_told() {
        let start = NetworkReading {
            effective_type: Some("4g".into()),
            rtt_ms: Some(50.0),
            downlink_mbps: Some(10.0),
        };
        let mut client = Client {
            effective_type: Some("4g".into()),
            rtt_ms: Some(50.0),
            downlink_mbps: Some(10.0),
            at_start: Some(start.clone()),
            ..Client::default()
        };
        assert_eq!(client.network_changed(), Some(false));
        client.effective_type = Some("3g".into());
        client.rtt_ms = Some(300.0);
        assert_eq!(client.network_changed(), Some(true));
        client.at_start = None;
        assert_eq!(client.network_changed(), None);
        // Left out of the JSON when unknown, so older records hash as they did.
        assert!(
            !serde_json::to_string(&client)
                .expect("json")
                .contains("at_start")
        );
    }

    #[test]
    fn the_network_guess_names_only_what_the_browser_says() {
        assert_eq!(
            NetworkLabel::guess(Some("cellular")),
            NetworkLabel::Cellular
        );
        assert_eq!(NetworkLabel::guess(Some("wifi")), NetworkLabel::Wifi);
        for other in [
            "ethernet",
            "bluetooth",
            "wimax",
            "mixed",
            "other",
            "unknown",
            "none",
        ] {
            assert_eq!(
                NetworkLabel::guess(Some(other)),
                NetworkLabel::Unknown,
                "{other}"
            );
        }
        assert_eq!(NetworkLabel::guess(None), NetworkLabel::Unknown);
    }

    #[test]
    fn origins() {
        for ok in [
            "https://chat.example.com",
            "http://127.0.0.1:8080",
            "http://[::1]:3000",
            "https://xn--bcher-kva.example",
        ] {
            assert_eq!(check_origin(ok), Ok(()), "{ok}");
        }
        for bad in [
            "chat.example.com",
            "https://",
            "https://example.com/v1/chat",
            "https://user:pw@example.com",
            "https://example.com?key=1",
            "https://example.com:0",
            "https://example.com:99999",
            "ftp://example.com",
            "https://<script>",
        ] {
            assert!(check_origin(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn origins_of_urls() {
        assert_eq!(
            origin_of("https://Chat.Example.com/v1/chat?key=x").as_deref(),
            Some("https://chat.example.com")
        );
        assert_eq!(
            origin_of("http://127.0.0.1:8080/v1").as_deref(),
            Some("http://127.0.0.1:8080")
        );
        assert_eq!(
            origin_of("https://example.com:443/").as_deref(),
            Some("https://example.com")
        );
        assert_eq!(
            origin_of("http://[::1]:3000/x").as_deref(),
            Some("http://[::1]:3000")
        );
        assert_eq!(origin_of("ftp://example.com/"), None);
        assert_eq!(origin_of("https://user@example.com/"), None);
    }

    #[test]
    fn odd_values_from_a_target_are_dropped_and_counted_not_fatal() {
        let mut s = Sample {
            status: 200,
            concurrency: 1,
            ttft_ms: Some(300.0),
            e2e_ms: Some(400.0),
            error_message: Some("line one\nline two".into()),
            stream_timings: Some(Timings::from_iter(
                [
                    ("auth_ms".to_owned(), 12.5),
                    // A Unix timestamp in ms, and one in seconds.
                    ("created_at".to_owned(), 1_764_576_000_000.0),
                    ("created".to_owned(), 1_764_576_000.0),
                    ("clock_skew_ms".to_owned(), -3.0),
                ]
                .into_iter()
                .chain((0..40).map(|i| (format!("step_{i:02}_ms"), 1.0))),
            )),
            server_timing: (0..40)
                .map(|i| ServerTimingEntry {
                    name: format!("step{i}"),
                    duration_ms: if i == 0 { 2.0 * MAX_MS } else { 1.0 },
                    description: Some("a\tb".into()),
                })
                .collect(),
            usage: Some(Usage {
                input_tokens: Some(5),
                output_tokens: Some(u64::MAX),
                reasoning_tokens: None,
            }),
            ..Sample::default()
        };
        assert!(s.validate(0).is_err());
        s.clean();
        s.validate(0).expect("clean values are storable");
        let timings = s.stream_timings.as_ref().expect("kept");
        assert_eq!(timings.len(), MAX_TIMING_ENTRIES);
        assert_eq!(timings["auth_ms"], 12.5);
        assert!(!timings.contains_key("created_at") && !timings.contains_key("clock_skew_ms"));
        assert_eq!(s.server_timing.len(), MAX_TIMING_ENTRIES);
        assert_eq!(
            s.server_timing[0].name, "step1",
            "the day-long entry is gone"
        );
        assert_eq!(s.error_message.as_deref(), Some("line one line two"));
        assert_eq!(s.usage.and_then(|u| u.output_tokens), None);
        // 3 odd timings and 9 past the 32 kept of the other 41; 1 day-long Server-Timing
        // entry and 7 past the 32 kept of the other 39; 1 impossible token count.
        assert_eq!(s.dropped, 3 + 9 + 1 + 7 + 1);
        let before = s.clone();
        s.clean();
        assert_eq!(s, before, "cleaning twice changes nothing");
    }

    #[test]
    fn stored_times_are_rounded_to_a_hundredth_of_a_millisecond() {
        let mut s = Sample {
            status: 200,
            concurrency: 1,
            start_ms: 1_234.500_000_000_000_2,
            ttft_ms: Some(301.123_456),
            e2e_ms: Some(401.999_9),
            itl_ms: vec![0.1 + 0.2, 5.004_999],
            ..Sample::default()
        };
        s.clean();
        assert_eq!(s.start_ms, 1234.5);
        assert_eq!((s.ttft_ms, s.e2e_ms), (Some(301.12), Some(402.0)));
        assert_eq!(s.itl_ms, [0.3, 5.0]);
        let json = serde_json::to_string(&s).expect("json");
        assert!(json.contains("\"ttft_ms\":301.12,"), "{json}");
        assert_eq!(s.dropped, 0, "rounding drops nothing");
    }

    #[test]
    fn uuids() {
        assert!(is_uuid("0f8fad5b-d9cb-469f-a165-70867728950e"));
        assert!(!is_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
        assert!(!is_uuid("0f8fad5bd9cb469fa16570867728950e"));
        assert!(!is_uuid("0f8fad5b-d9cb-469f-a165-70867728950"));
        let id = run_id_from_random([0xff; 16]);
        assert_eq!(id, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert!(is_uuid(&run_id_from_random([0; 16])));
    }
}
