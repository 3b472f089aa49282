//! Where one request's wait for its first token went, in layers that add up to its TTFT:
//! what the browser spent before the request left, what the target says it spent, and
//! the rest. Each layer is a measurement or absent with the reason; none is estimated
//! from a model, and a figure the others contradict is dropped rather than shown.
//!
//! - **Before sending** ([`Layers::before_send_ms`]): Resource Timing's `requestStart −
//!   startTime` ([`Connection::sent_ms`]): a DNS lookup, a connection and its TLS
//!   handshake, a CORS preflight, whichever the request waited for. Absent when the
//!   browser gave no detail (a cross-origin target that sends no `Timing-Allow-Origin`).
//! - **The server** ([`Layers::server`]): the target's own clock, as it reports it. Its
//!   steps before the response head come from `Server-Timing` (`auth;dur=12,
//!   ratelimit;dur=3`), taken as one after another, each under the target's name. Its
//!   whole time from the request's arrival to its first token written comes from a timing
//!   named [`FIRST_TOKEN_WRITTEN`], in the stream's timings (the object at the plan's
//!   `timings_pointer`) or in `Server-Timing` when the target holds its head back until
//!   then. With it, the time after the head (usually the model's) is that whole minus the
//!   steps; without it, only the steps are known.
//! - **The rest** ([`Layers::rest_ms`]): the TTFT minus the layers that are known: the
//!   network both ways and the stream's delivery, and whatever else is not known (the
//!   connection without Resource Timing detail, the model without the whole).
//!
//! A reported figure must fit what the browser saw: the steps before the head within the
//! browser's wait for that head, the whole within the wait for the first token, both after
//! the request left. One that does not is not a time before this request's first token
//! (the steps overlap or nest, or the entry measures something else) and is dropped with
//! the reason.

use crate::schema::{Connection, Sample, ServerTimingEntry};

/// The timing a target names its own time from a request's arrival to its first token
/// written with: a stream timing `first_token_written_ms`, or a `Server-Timing` entry
/// `first-token-written;dur=…` (names are read without case, `-` as `_`, and without a
/// `_ms` ending).
pub const FIRST_TOKEN_WRITTEN: &str = "first_token_written";

/// A layer that is not known, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Absent(pub String);

/// One request's TTFT in layers (see the module's documentation).
#[derive(Debug, Clone, PartialEq)]
pub struct Layers {
    /// The request's TTFT, which the layers add up to.
    pub ttft_ms: f64,
    pub before_send_ms: Result<f64, Absent>,
    pub server: Result<Server, Absent>,
    /// The TTFT minus the known layers ([`Layers::rest_holds`] says what that is).
    pub rest_ms: f64,
}

/// The target's own time before this request's first token, as it reported it.
#[derive(Debug, Clone, PartialEq)]
pub struct Server {
    /// Its steps before the response head, in the order it named them.
    pub steps: Vec<(String, f64)>,
    /// From its head to its first token written (usually the model's time to its first
    /// token): its whole time minus the steps, when it reported the whole.
    pub after_head_ms: Option<f64>,
}

impl Server {
    /// The server's time this layer counts: the whole, or the steps alone.
    pub fn total_ms(&self) -> f64 {
        self.steps.iter().map(|(_, ms)| ms).sum::<f64>() + self.after_head_ms.unwrap_or(0.0)
    }

    /// Whether the whole time to the first token is known (the target reported
    /// [`FIRST_TOKEN_WRITTEN`]), not only its steps before the head.
    pub fn whole(&self) -> bool {
        self.after_head_ms.is_some()
    }
}

/// A timing's name as [`FIRST_TOKEN_WRITTEN`] is compared with.
fn plain_name(name: &str) -> String {
    let name = name.to_ascii_lowercase().replace('-', "_");
    name.strip_suffix("_ms").unwrap_or(&name).to_owned()
}

impl Layers {
    /// `sample`'s layers; `None` when it has no TTFT to split.
    pub fn of(sample: &Sample) -> Option<Layers> {
        let ttft = sample.ttft_ms.filter(|t| t.is_finite() && *t >= 0.0)?;
        let before_send = before_send(sample.conn.as_ref(), ttft);
        let sent = before_send.as_ref().ok().copied();
        let server = server(sample, ttft, sent);
        let known = sent.unwrap_or(0.0) + server.as_ref().map_or(0.0, Server::total_ms);
        Some(Layers {
            ttft_ms: ttft,
            before_send_ms: before_send,
            server,
            rest_ms: (ttft - known).max(0.0),
        })
    }

    /// What the rest holds, in words: "the network both ways and the stream's delivery",
    /// with whatever is not known apart. Worked out when shown, not for every sample the
    /// collector splits.
    pub fn rest_holds(&self) -> String {
        let mut unknown = Vec::new();
        if self.before_send_ms.is_err() {
            unknown.push("setting up the connection");
        }
        match &self.server {
            Ok(s) if s.whole() => {}
            Ok(_) => {
                unknown.push("the server's time after its response head (the model's, usually)")
            }
            Err(_) => unknown.push("the server's time"),
        }
        let mut holds = "the network both ways and the stream's delivery".to_owned();
        if !unknown.is_empty() {
            holds += &format!(", with {} in it, not known apart", in_words(&unknown));
        }
        holds
    }
}

/// `["a", "b", "c"]` as "a, b and c".
fn in_words(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => (*one).to_owned(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

fn before_send(conn: Option<&Connection>, ttft: f64) -> Result<f64, Absent> {
    let Some(sent) = conn.and_then(|c| c.sent_ms) else {
        return Err(Absent(
            "the browser showed no connection detail: the target sends no Timing-Allow-Origin header".into(),
        ));
    };
    if !(0.0..=ttft).contains(&sent) {
        return Err(Absent(format!(
            "the browser's {sent:.1} ms before sending does not fit in the {ttft:.1} ms to the first token"
        )));
    }
    Ok(sent)
}

fn server(sample: &Sample, ttft: f64, sent: Option<f64>) -> Result<Server, Absent> {
    let named = |e: &&ServerTimingEntry| plain_name(&e.name) == FIRST_TOKEN_WRITTEN;
    let steps: Vec<(String, f64)> = sample
        .server_timing
        .iter()
        .filter(|e| e.duration_ms > 0.0 && !named(e))
        .map(|e| (e.name.clone(), e.duration_ms))
        .collect();
    let whole = sample
        .server_timing
        .iter()
        .find(named)
        .map(|e| e.duration_ms)
        .or_else(|| {
            let timings = sample.stream_timings.as_ref()?;
            timings
                .iter()
                .find(|(name, _)| plain_name(name) == FIRST_TOKEN_WRITTEN)
                .map(|(_, ms)| *ms)
        });
    if steps.is_empty() && whole.is_none() {
        return Err(Absent(format!(
            "the target reports no time of its own: a Server-Timing header with its steps (auth;dur=12) and {FIRST_TOKEN_WRITTEN}_ms in its stream's timings would show it"
        )));
    }
    let after_sent = |at: f64| at - sent.unwrap_or(0.0);
    let steps_ms: f64 = steps.iter().map(|(_, ms)| ms).sum();
    // The steps come before the head: within the browser's wait for it.
    if let Some(head) = sample.headers_ms.filter(|_| !steps.is_empty()) {
        let waited = after_sent(head);
        if steps_ms > waited {
            return Err(Absent(format!(
                "the target's Server-Timing steps add up to {steps_ms:.1} ms, more than the {waited:.1} ms the browser waited for its response head: they overlap or nest (report each step once)"
            )));
        }
    }
    let after_head_ms = match whole {
        None => None,
        Some(whole) => {
            let waited = after_sent(ttft);
            if !(0.0..=waited).contains(&whole) {
                return Err(Absent(format!(
                    "the target's {FIRST_TOKEN_WRITTEN} of {whole:.1} ms does not fit in the {waited:.1} ms the browser waited for the first token"
                )));
            }
            if whole < steps_ms {
                return Err(Absent(format!(
                    "the target's {FIRST_TOKEN_WRITTEN} of {whole:.1} ms is less than its Server-Timing steps, {steps_ms:.1} ms: they overlap or nest (report each step once)"
                )));
            }
            Some(whole - steps_ms)
        }
    };
    Ok(Server {
        steps,
        after_head_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(name: &str, ms: f64) -> ServerTimingEntry {
        ServerTimingEntry {
            name: name.into(),
            duration_ms: ms,
            description: None,
        }
    }

    /// The seed's request: 2.3 s to the first token, 60 ms before sending, the server's
    /// auth and rate limit before its head, the model after it.
    fn seed() -> Sample {
        Sample {
            ttft_ms: Some(2300.0),
            headers_ms: Some(1400.0),
            conn: Some(Connection {
                sent_ms: Some(60.0),
                ..Connection::default()
            }),
            server_timing: vec![
                step("auth", 300.0),
                step("ratelimit", 174.0),
                step("cache", 0.0),
            ],
            stream_timings: Some([("first_token_written_ms".to_owned(), 1232.0)].into()),
            ..Sample::default()
        }
    }

    #[test]
    fn the_layers_add_up_to_the_ttft() {
        let layers = Layers::of(&seed()).expect("a first token");
        assert_eq!(layers.before_send_ms, Ok(60.0));
        let server = layers.server.clone().expect("the server's layer");
        // A step of no duration is a description, not a step.
        assert_eq!(
            server.steps,
            vec![("auth".into(), 300.0), ("ratelimit".into(), 174.0)]
        );
        assert_eq!(server.after_head_ms, Some(758.0));
        assert_eq!(server.total_ms(), 1232.0);
        assert!(server.whole());
        assert_eq!(layers.rest_ms, 2300.0 - 60.0 - 1232.0);
        assert_eq!(
            layers.rest_holds(),
            "the network both ways and the stream's delivery"
        );
    }

    #[test]
    fn the_whole_may_come_in_server_timing_by_any_spelling() {
        let mut s = seed();
        s.stream_timings = None;
        s.server_timing.push(step("First-Token-Written", 1000.0));
        let server = Layers::of(&s)
            .expect("a first token")
            .server
            .expect("the server's layer");
        assert_eq!(server.after_head_ms, Some(526.0));
        assert_eq!(server.steps.len(), 2);
    }

    #[test]
    fn without_the_whole_the_rest_holds_the_model() {
        let mut s = seed();
        s.stream_timings = None;
        let layers = Layers::of(&s).expect("a first token");
        let server = layers.server.clone().expect("the server's layer");
        assert!(!server.whole());
        assert_eq!(server.total_ms(), 474.0);
        assert_eq!(layers.rest_ms, 2300.0 - 60.0 - 474.0);
        assert_eq!(
            layers.rest_holds(),
            "the network both ways and the stream's delivery, with the server's time after its response head (the model's, usually) in it, not known apart"
        );
    }

    #[test]
    fn without_connection_detail_the_rest_holds_the_connection() {
        let mut s = seed();
        s.conn = None;
        let layers = Layers::of(&s).expect("a first token");
        assert!(
            layers
                .before_send_ms
                .clone()
                .expect_err("no time before sending")
                .0
                .contains("Timing-Allow-Origin")
        );
        assert_eq!(layers.rest_ms, 2300.0 - 1232.0);
        assert_eq!(
            layers.rest_holds(),
            "the network both ways and the stream's delivery, with setting up the connection in it, not known apart"
        );
    }

    #[test]
    fn a_target_that_reports_nothing_is_told_what_to_add() {
        let mut s = seed();
        s.server_timing.clear();
        s.stream_timings = Some([("total_ms".to_owned(), 900.0)].into());
        let layers = Layers::of(&s).expect("a first token");
        let why = layers.server.expect_err("no server layer").0;
        assert!(
            why.contains("Server-Timing") && why.contains("first_token_written_ms"),
            "{why}"
        );
        assert_eq!(layers.rest_ms, 2240.0);
    }

    /// Nested steps (a `total` holding the others) add up to more than the browser waited
    /// for the head: dropped, not shown as a server slower than the request.
    #[test]
    fn steps_longer_than_the_wait_for_the_head_are_dropped() {
        let mut s = seed();
        s.server_timing.push(step("total", 1300.0));
        let why = Layers::of(&s)
            .expect("a first token")
            .server
            .expect_err("no server layer")
            .0;
        assert!(why.contains("overlap or nest"), "{why}");
        // Without Resource Timing, the bound is the wait from `fetch()`.
        s.conn = None;
        s.stream_timings = None;
        s.server_timing.pop();
        s.server_timing.push(step("total", 900.0));
        assert!(Layers::of(&s).expect("a first token").server.is_ok());
    }

    #[test]
    fn a_whole_that_does_not_fit_is_dropped() {
        for whole in [2300.0, -1.0, 400.0] {
            let mut s = seed();
            s.stream_timings = Some([("first_token_written_ms".to_owned(), whole)].into());
            let layers = Layers::of(&s).expect("a first token");
            assert!(layers.server.is_err(), "{whole}");
            assert_eq!(layers.rest_ms, 2240.0);
        }
    }

    #[test]
    fn a_request_without_a_first_token_has_no_layers() {
        let mut s = seed();
        s.ttft_ms = None;
        assert_eq!(Layers::of(&s), None);
        // A first token sooner than the browser's own set-up: neither layer fits in it.
        s.ttft_ms = Some(50.0);
        let layers = Layers::of(&s).expect("a first token");
        assert!(layers.before_send_ms.is_err());
        assert!(layers.server.is_err());
        assert_eq!(layers.rest_ms, 50.0);
    }
}
