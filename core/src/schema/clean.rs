//! Cleaning where values enter: what a target or a browser reported that no record may
//! hold is dropped or clipped, and counted, so a measured run is never lost to validation.

use crate::schema::bounds::{EFFECTIVE_TYPES, MAX_DOWNLINK_MBPS, is_protocol, storable_time};
use crate::schema::{MAX_MS, MAX_TIMING_ENTRIES, MAX_TOKENS, Run, Sample};
use crate::text::clean_text;

impl Run {
    /// Makes the record storable without losing a measurement: whatever the browser
    /// reported of its network that no record may hold (an unknown effective type, an
    /// impossible round trip) left out, and the whole within a run's bounds
    /// ([`Run::fit`]). Its samples are not touched: each was made clean once, when the
    /// engine made it ([`crate::outcome::Observation::into_sample`]); debug builds (every
    /// test) check that, and [`Run::validate`] refuses a record that would hold anything
    /// else.
    pub fn clean(&mut self) {
        debug_assert!(
            self.samples.iter().all(Sample::is_clean),
            "a sample was not made clean"
        );
        self.fit();
        let client = &mut self.client;
        clean_reading(
            &mut client.effective_type,
            &mut client.rtt_ms,
            &mut client.downlink_mbps,
        );
        if let Some(start) = &mut client.at_start {
            clean_reading(
                &mut start.effective_type,
                &mut start.rtt_ms,
                &mut start.downlink_mbps,
            );
        }
    }
}

/// A Network Information reading with what no record may hold left out: an unknown
/// effective type, an impossible round trip or rate.
fn clean_reading(
    effective_type: &mut Option<String>,
    rtt_ms: &mut Option<f64>,
    downlink_mbps: &mut Option<f64>,
) {
    if effective_type
        .as_deref()
        .is_some_and(|t| !EFFECTIVE_TYPES.contains(&t))
    {
        *effective_type = None;
    }
    if rtt_ms.is_some_and(|v| !storable_time(v)) {
        *rtt_ms = None;
    }
    if downlink_mbps.is_some_and(|v| !(v.is_finite() && (0.0..=MAX_DOWNLINK_MBPS).contains(&v))) {
        *downlink_mbps = None;
    }
}

impl Sample {
    /// Makes the sample storable without losing the measurement: every value that
    /// [`Sample::validate`] would refuse, and that came from outside (a server's timing
    /// object or `Server-Timing` header, its error message, its token counts), is dropped
    /// or clipped, and each one dropped is counted in `dropped`. Each sample the engine
    /// makes is cleaned once, as it is made ([`crate::outcome::Observation::into_sample`]),
    /// so a run the user sat through is never lost to one odd value.
    pub fn clean(&mut self) {
        let mut dropped = 0u32;
        let mut drop_time = |value: &mut Option<f64>| {
            if value.is_some_and(|v| !storable_time(v)) {
                *value = None;
                dropped += 1;
            }
        };
        for value in self.optional_times() {
            drop_time(value);
        }
        if let Some(conn) = &mut self.conn {
            for value in [
                &mut conn.dns_ms,
                &mut conn.connect_ms,
                &mut conn.tls_ms,
                &mut conn.sent_ms,
                &mut conn.wait_ms,
            ] {
                drop_time(value);
            }
            if conn.protocol.as_deref().is_some_and(|p| !is_protocol(p)) {
                conn.protocol = None;
                dropped += 1;
            }
        }
        if !storable_time(self.start_ms) {
            self.start_ms = if self.start_ms.is_finite() && self.start_ms > 0.0 {
                MAX_MS.next_down()
            } else {
                0.0
            };
            dropped += 1;
        }
        let gaps = self.itl_ms.len();
        self.itl_ms.retain(|gap| storable_time(*gap));
        self.itl_ms
            .truncate(firsttoken_stream::recorder::MAX_ITL_GAPS);
        dropped += (gaps - self.itl_ms.len()) as u32;
        if let Some(message) = &mut self.error_message {
            *message = clean_text(message, MAX_MESSAGE_CHARS);
        }
        let entries = self.server_timing.len();
        self.server_timing.retain_mut(|entry| {
            entry.name = clean_text(&entry.name, 64);
            entry.description = entry
                .description
                .as_deref()
                .map(|d| clean_text(d, 128))
                .filter(|d| !d.is_empty());
            !entry.name.trim().is_empty() && storable_time(entry.duration_ms)
        });
        self.server_timing.truncate(MAX_TIMING_ENTRIES);
        dropped += (entries - self.server_timing.len()) as u32;
        if let Some(timings) = &mut self.stream_timings {
            let entries = timings.len();
            timings.retain(|name, ms| {
                !name.trim().is_empty()
                    && name.chars().count() <= 64
                    && !name.chars().any(char::is_control)
                    && storable_time(*ms)
            });
            while timings.len() > MAX_TIMING_ENTRIES {
                timings.pop_last();
            }
            dropped += (entries - timings.len()) as u32;
        }
        if let Some(usage) = &mut self.usage {
            for count in [
                &mut usage.input_tokens,
                &mut usage.output_tokens,
                &mut usage.reasoning_tokens,
            ] {
                if count.is_some_and(|c| c > MAX_TOKENS) {
                    *count = None;
                    dropped += 1;
                }
            }
        }
        self.dropped = self.dropped.saturating_add(dropped);
        self.round_times();
    }

    /// Whether cleaning would change nothing: the sample holds only what a record may,
    /// rounded, and counts nothing more as dropped.
    pub fn is_clean(&self) -> bool {
        let mut cleaned = self.clone();
        cleaned.clean();
        cleaned == *self
    }

    /// Every time of the sample that may be absent.
    fn optional_times(&mut self) -> [&mut Option<f64>; 9] {
        [
            &mut self.headers_ms,
            &mut self.ttfb_ms,
            &mut self.ttft_any_ms,
            &mut self.ttft_ms,
            &mut self.e2e_ms,
            &mut self.last_token_ms,
            &mut self.idle_spent_ms,
            &mut self.idle_timer_late_ms,
            &mut self.retry_wait_ms,
        ]
    }

    /// Rounds every time to 0.01 ms ([`STEPS_PER_MS`]). Browser clocks are no finer than 5 µs (0.1 ms
    /// in a page that is not cross-origin isolated), so nothing measured is lost, and a
    /// time such as `1234.5000000000002` stops costing 18 characters: a record stays
    /// small enough for the browser's `keepalive` limit when the page goes away.
    fn round_times(&mut self) {
        let round = |v: &mut f64| *v = rounded(*v);
        round(&mut self.start_ms);
        for v in self.optional_times().into_iter().flatten() {
            round(v);
        }
        self.itl_ms.iter_mut().for_each(round);
        if let Some(conn) = &mut self.conn {
            for v in [
                &mut conn.dns_ms,
                &mut conn.connect_ms,
                &mut conn.tls_ms,
                &mut conn.sent_ms,
                &mut conn.wait_ms,
            ]
            .into_iter()
            .flatten()
            {
                round(v);
            }
        }
        for entry in &mut self.server_timing {
            round(&mut entry.duration_ms);
        }
        if let Some(timings) = &mut self.stream_timings {
            timings.values_mut().for_each(round);
        }
    }
}

/// A time rounded to 0.01 ms ([`STEPS_PER_MS`]), as a record stores it.
fn rounded(v: f64) -> f64 {
    // n / 100 is the double nearest to the decimal, so it prints as one.
    let rounded = (v * STEPS_PER_MS).round() / STEPS_PER_MS;
    // At the very edge of the range rounding up would leave it: keep the value.
    if storable_time(rounded) { rounded } else { v }
}

/// A time as a cleaned sample holds it: `None` where no record may hold it (dropped by
/// [`Sample::clean`]), otherwise rounded as [`Sample::clean`] rounds it.
pub fn stored_time(v: f64) -> Option<f64> {
    storable_time(v).then(|| rounded(v))
}

/// Stored times are rounded to 1 / this many milliseconds (0.01 ms).
pub const STEPS_PER_MS: f64 = 100.0;

/// The longest error message a record keeps.
pub const MAX_MESSAGE_CHARS: usize = 500;

#[cfg(test)]
mod tests {
    use super::*;

    /// A clean sample (as the engine makes them) is one cleaning leaves as it is; one
    /// with a value no record may hold is not.
    #[test]
    fn a_sample_is_clean_when_cleaning_changes_nothing() {
        let run: Run =
            serde_json::from_str(include_str!("../../schema/example-run.v1.json")).expect("a run");
        let clean = Sample {
            ttft_ms: Some(301.12),
            ..run.samples[0].clone()
        };
        assert!(clean.is_clean(), "{clean:?}");
        let mut odd = clean.clone();
        odd.ttft_ms = Some(301.123_456);
        odd.itl_ms.push(-1.0);
        assert!(!odd.is_clean());
        odd.clean();
        assert!(odd.is_clean());
        assert_eq!(odd.ttft_ms, Some(301.12));
        assert_eq!(odd.itl_ms, clean.itl_ms);
        assert_eq!(odd.dropped, clean.dropped + 1);
    }
}
