//! A finished run's results, read in plain words: percentiles per phase with their
//! intervals (each only where the count supports it), what concurrency did, what a new
//! connection cost, cold requests one by one, the app's overhead over the targets it was
//! compared with, the network round trip, and where the steady requests' wait went.

use firsttoken_core::schema::{EngineReport, Run};
use firsttoken_crowd::stats::{Distribution, Estimate, min_values_for};
use firsttoken_pages::readings::{Concurrency, LevelDegradation, MIN_BATCHES_FOR_READING};
use firsttoken_pages::report::{ColdStart, ConnectionCost, ProbeRoundTrip, RunReport};
use leptos::prelude::*;

use super::axis::phase_title;
use crate::format;

/// A value with its interval beneath; no interval when there is none to speak of (one
/// request: every resample is the same).
fn estimate(e: &Estimate) -> AnyView {
    let interval = (e.low < e.high).then(|| {
        format!(
            "{}–{}",
            format::ms(Some(e.low)).trim_end_matches(" ms"),
            format::ms(Some(e.high))
        )
    });
    view! {
        <span class="estimate">
            {format::ms(Some(e.value))}
            {interval.map(|i| view! { <small class="ci">{i}</small> })}
        </span>
    }
    .into_any()
}

/// A percentile where the count supports it; otherwise what it would need.
fn percentile(d: &Distribution, p: f64, value: Option<&Estimate>) -> AnyView {
    match value {
        Some(e) => estimate(e),
        None => view! {
            <span class="note" title="Too few values for this percentile to mean anything">
                {format!("needs {} (has {})", min_values_for(p), d.count)}
            </span>
        }
        .into_any(),
    }
}

/// A ratio as `2.04×`; an unbounded one (mostly failures) as `∞`.
fn times(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{ratio:.2}×")
    } else {
        "∞".to_owned()
    }
}

/// `2.0× as long as alone (95% interval 1.9–2.1×)`.
fn ratio_words(ratio: &Estimate) -> String {
    format!(
        "{} as long as alone (95% interval {}–{})",
        times(ratio.value),
        times(ratio.low).trim_end_matches('×'),
        times(ratio.high)
    )
}

/// `2 of 10 failed (timeout 2)`, or nothing when none did.
fn failures_words(d: &LevelDegradation, classes: &[(u32, String, usize)]) -> Option<String> {
    (d.failed > 0).then(|| {
        let by_class = classes
            .iter()
            .filter(|(k, ..)| *k == d.level)
            .map(|(_, class, n)| format!("{class} {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        format!("{} of {} failed ({by_class})", d.failed, d.requests)
    })
}

/// What the concurrency phase says about the server, in a sentence: the highest level
/// that says anything, a model named only where its interval decides.
pub fn concurrency_reading(report: &RunReport) -> Option<String> {
    let d = report
        .degradation
        .iter()
        .filter(|d| d.reading().is_some())
        .max_by_key(|d| d.level)?;
    let (k, model) = (d.level, times(d.serial_model));
    let failed = failures_words(d, &report.level_failures)
        .map(|f| format!(" At {k} at once {f}, counted as slower than any answer."))
        .unwrap_or_default();
    if d.median_ttft_ms.is_none() {
        return Some(format!(
            "Your server does not keep up with {k} requests at once: {}, so half of them or more gave no first token.",
            failures_words(d, &report.level_failures).unwrap_or_default()
        ));
    }
    let ratio = d.ratio?;
    let what = if d.network_floor_ms > 0.0 {
        "the server's part of the first token"
    } else {
        "the first token"
    };
    let sentence = match d.reading()? {
        Concurrency::Serial => format!(
            "Your server appears to handle requests one at a time: with {k} at once, {what} took {}, about what a one-at-a-time server gives ({model}).",
            ratio_words(&ratio)
        ),
        Concurrency::Partial => format!(
            "Your server slows down when requests arrive together: with {k} at once, {what} took {}, less than a one-at-a-time server would ({model}).",
            ratio_words(&ratio)
        ),
        Concurrency::Parallel => format!(
            "Your server handles simultaneous requests side by side: with {k} at once, {what} took {} (one at a time would be {model}).",
            ratio_words(&ratio)
        ),
        Concurrency::Undecided if d.batches < MIN_BATCHES_FOR_READING => format!(
            "Not enough requests to tell how your server handles simultaneous requests: with {k} at once, {what} took {} as long as alone, but from only {}; at least {MIN_BATCHES_FOR_READING} are needed.",
            times(ratio.value),
            batches_words(d.batches)
        ),
        Concurrency::Undecided => format!(
            "Not enough requests to tell how your server handles simultaneous requests: with {k} at once, {what} took {}, which fits both side by side (1×) and one at a time ({model}).",
            ratio_words(&ratio)
        ),
    };
    let floor = if d.network_floor_ms > 0.0 {
        format!(
            " The network's round trip ({}, from the warm probes) is taken out of each first token first: it is not queued behind other requests.",
            format::ms(Some(d.network_floor_ms))
        )
    } else {
        " The run had no probes, so the network's round trip is left in each first token: on a slow link that makes any server read less affected than it is.".to_owned()
    };
    Some(sentence + &failed + &floor)
}

/// `1 batch`, `2 batches`.
fn batches_words(batches: usize) -> String {
    if batches == 1 {
        "1 batch".to_owned()
    } else {
        format!("{batches} batches")
    }
}

/// One line per concurrency level: the interval of its ratio only from enough batches.
fn level_line(d: &LevelDegradation, classes: &[(u32, String, usize)]) -> String {
    let median = match d.median_ttft_ms {
        Some(ms) => format!(
            "first token at {} (median of {}",
            format::ms(Some(ms)),
            d.requests
        ),
        None => format!("no median (of {}", d.requests),
    };
    let failed = failures_words(d, classes)
        .map(|f| format!("; {f}"))
        .unwrap_or_default();
    let ratio = match &d.ratio {
        // A bootstrap over fewer batches than a reading needs resamples almost only
        // level 1's requests: its interval would claim more than the run knows.
        Some(r) if d.batches < MIN_BATCHES_FOR_READING => format!(
            ", {} as long as alone (no interval from only {}; at least {MIN_BATCHES_FOR_READING} are needed); one at a time: {}",
            times(r.value),
            batches_words(d.batches),
            times(d.serial_model)
        ),
        Some(r) => format!(
            ", {}; one at a time: {}",
            ratio_words(r),
            times(d.serial_model)
        ),
        None => String::new(),
    };
    format!("{} at once: {median}{failed}){ratio}", d.level)
}

/// What a new connection cost, or why no number is given.
pub fn connection_reading(c: &ConnectionCost) -> String {
    let left_out = [
        (c.reused > 0).then(|| {
            format!(
                "{} of the {} fresh requests ran on a connection already in use and are left out",
                c.reused, c.fresh_requests
            )
        }),
        (c.unverifiable > 0)
            .then(|| format!("{} could not be verified either way", c.unverifiable)),
    ]
    .into_iter()
    .flatten()
    .collect::<Vec<_>>();
    let left_out = if left_out.is_empty() {
        String::new()
    } else {
        format!(" {}.", format::sentence(&left_out.join("; ")))
    };
    let sent = match (c.median_fresh_sent_ms, c.median_warm_sent_ms) {
        (Some(fresh), Some(warm)) => format!(
            " Before each request left the browser (DNS, connection, TLS, preflight): {} on a new host name, {} on a warm connection.",
            format::ms(Some(fresh)),
            format::ms(Some(warm))
        ),
        _ => String::new(),
    };
    match (c.difference, c.extra_ms(), c.missing()) {
        (Some(d), Some(extra), _) => {
            let what = if extra >= 0.0 {
                format!(
                    "A new host name (DNS lookup, connection, TLS and the CORS preflight a new origin pays) added {} to the first token (95% interval {} to {})",
                    format::ms(Some(extra)),
                    format::ms(Some(d.low)),
                    format::ms(Some(d.high)),
                )
            } else {
                format!(
                    "Requests on a new host name got their first token {} sooner than warm ones (95% interval {} to {}): the server's own time varied more than the connection cost",
                    format::ms(Some(-extra)),
                    format::ms(Some(-d.high)),
                    format::ms(Some(-d.low)),
                )
            };
            let how = if c.pairs > 0 {
                format!(
                    "the median of {} pairs, each fresh request against the warm one sent right before it",
                    c.pairs
                )
            } else {
                "median against median".to_owned()
            };
            format!(
                "{what}, {how}: {} on {} requests verified on a new connection, {} on {} verified on a warm one (medians).{sent} A returning user reconnecting to the same host name pays less: DNS cached, TLS resumed, the preflight cached.{left_out}",
                format::ms(c.median_fresh_ttft_ms),
                c.verified_new,
                format::ms(c.median_warm_ttft_ms),
                c.verified_warm,
            )
        }
        (_, _, why) => format!(
            "No figure for what a new host name costs: {}.{sent}{left_out}",
            why.unwrap_or_else(|| "too few verified requests".into())
        ),
    }
}

/// How many steady requests waited for a CORS preflight on a warm connection: the
/// browser's preflight cache had expired (no `Access-Control-Max-Age`, or a short one),
/// so those requests paid a round trip more than the rest.
fn preflight_reading(report: &RunReport) -> Option<String> {
    let steady = report
        .phases
        .iter()
        .find(|p| p.phase == firsttoken_core::plan::Phase::Steady)?;
    match steady.preflighted? {
        0 => None,
        n => Some(format!(
            "{n} of {} steady requests waited about a round trip on a warm connection before they were sent, as a CORS preflight takes: the browser's preflight cache had most likely expired between requests, which happens when the target sends no Access-Control-Max-Age or a short one (browsers keep a preflight 5 s without it). Real users pay this too; Access-Control-Max-Age: 7200 spares them.",
            steady.requests
        )),
    }
}

/// What the compared rounds left out, after the difference.
fn overhead_note(o: &firsttoken_pages::report::Overhead) -> String {
    if o.setup_included {
        ". Some rounds include a reconnect or a CORS preflight on one side (fewer than 3 rounds were free of both), which is no part of the app's own overhead".to_owned()
    } else if o.left_out > 0 {
        format!(
            ". {} rounds where either request opened a connection or waited for a CORS preflight are left out: a short keep-alive closes a target's idle connection while the other answers",
            o.left_out
        )
    } else {
        String::new()
    }
}

/// The browser's network reading, when it changed during the run: the readings at the
/// start and at the end (the crowd groups by the end's).
fn network_change(client: &firsttoken_core::schema::Client) -> Option<String> {
    if client.network_changed() != Some(true) {
        return None;
    }
    let words = |r: &firsttoken_core::schema::NetworkReading| {
        [
            r.effective_type.clone(),
            r.rtt_ms
                .map(|ms| format!("round trip about {}", format::ms(Some(ms)))),
            r.downlink_mbps.map(|mbps| format!("{mbps} Mbps")),
        ]
        .into_iter()
        .flatten()
        .collect::<Vec<_>>()
        .join(", ")
    };
    Some(format!(
        "The browser's own estimate of the network changed during the run: {} at the start, {} at the end (a move between networks, or the run's own slow answers; the browser rounds and caps these).",
        words(client.at_start.as_ref()?),
        words(&client.at_end())
    ))
}

/// One cold request, with what the wait really was.
pub fn cold_line(c: &ColdStart) -> String {
    let what = match (&c.ttft_ms, &c.error) {
        (Some(t), _) => format::ms(Some(*t)),
        (None, Some(e)) => format!("failed ({e})"),
        (None, None) => "no answer".to_owned(),
    };
    let mut wait = Vec::new();
    if let Some(spent) = c.idle_spent_ms {
        wait.push(format!("waited {}", format::ms(Some(spent))));
    }
    if c.hidden {
        wait.push("the page was hidden, so the browser may have slowed it".to_owned());
    }
    if let Some(late) = c.idle_timer_late_ms.filter(|ms| *ms >= 1000.0) {
        wait.push(format!(
            "the browser paused the page for {}",
            format::ms(Some(late))
        ));
    }
    let wait = if wait.is_empty() {
        String::new()
    } else {
        format!(" ({})", wait.join("; "))
    };
    // A reconnect is not a server's cold start: say which it ran on, and what the browser
    // spent before the request left.
    let sent = c
        .sent_ms
        .map(|ms| format!(", {} of it before the request left", format::ms(Some(ms))))
        .unwrap_or_default();
    let conn = match c.new_connection {
        Some(true) => format!(
            " (on a new connection, the idle one having been closed: this includes setting up a connection, over HTTPS its TLS handshake, and maybe a CORS preflight{sent})"
        ),
        Some(false) => format!(" (on the connection kept from before{sent})"),
        None if !sent.is_empty() => format!(" ({})", sent.trim_start_matches(", ")),
        None => String::new(),
    };
    format!(
        "After {} idle{wait}: first token at {what}{conn}",
        format::wait(u64::from(c.idle_ms))
    )
}

/// The network round trip from the warm probes, or why there is none.
fn probe_line(p: &ProbeRoundTrip) -> String {
    let left_out = match p.cold_probes {
        0 => String::new(),
        1 => " (the probe that opened the connection left out)".to_owned(),
        n => format!(" ({n} probes that opened connections left out)"),
    };
    let mut more = String::new();
    if p.redirected > 0 {
        more.push_str(&format!(
            " {} of the {} probes were redirected and are left out: each redirect costs a round trip of its own. Point the probe at the URL it ends on.",
            p.redirected, p.probes
        ));
    }
    if p.unverified > 0 {
        more.push_str(&format!(
            " The browser showed nothing of the connection of {} of them (no Timing-Allow-Origin, no client port): one that opened a connection would be counted too.",
            p.unverified
        ));
    }
    match &p.rtt {
        Some(d) => format!(
            "Network round trip to the target: {} median of {} warm probes, {}{left_out}.{more}",
            format::ms(Some(d.p50.value)),
            d.count,
            if p.from_stack {
                "from each probe sent to its answer's first byte as the browser's network stack timed it, the probe handler's own time included"
            } else {
                "from fetch() to the response head, the probe handler's own time and the page's hops to the browser's network stack included"
            }
        ),
        None if p.each_opened_a_connection() => format!(
            "No network round trip: each of the {} probes opened a connection of its own, so each paid TCP and TLS too (the probe endpoint closes its connections: Connection: close, or no keep-alive).{more}",
            p.probes
        ),
        None => format!("No network round trip: no warm probe answered{left_out}.{more}"),
    }
}

/// What the browser could not measure, in sentences: a clock coarser than Chromium's
/// (no time in the run is finer), and each feature it lacks with what is missing for it.
fn browser_limits(engine: &EngineReport) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(step) = engine.clock_step_ms.filter(|s| *s >= 0.5) {
        let why = match engine.cross_origin_isolated {
            Some(false) => {
                " (the page was not cross-origin isolated, which this browser needs for a finer one)"
            }
            _ => "",
        };
        lines.push(format!(
            "This browser's clock moved in steps of {}{why}: no time here is finer than that.",
            format::ms(Some(step))
        ));
    }
    lines.extend(
        engine
            .unavailable
            .iter()
            .map(|u| format::sentence(u.consequence())),
    );
    lines
}

#[component]
pub fn ReportView(run: Run) -> impl IntoView {
    let report = RunReport::of(&run);
    let limits = browser_limits(&run.engine)
        .into_iter()
        .chain(network_change(&run.client))
        .map(|line| view! { <li>{line}</li> })
        .collect::<Vec<_>>();
    let rows = report
        .phases
        .iter()
        .map(|p| {
            let name = if p.phase == firsttoken_core::plan::Phase::Compare {
                format!("{}: {}", phase_title(p.phase), p.target)
            } else {
                phase_title(p.phase).to_owned()
            };
            let numbers = match &p.ttft {
                Some(d) => view! {
                    <td data-label="TTFT p50">{estimate(&d.p50)}</td>
                    <td data-label="TTFT p90">{percentile(d, 90.0, d.p90.as_ref())}</td>
                    <td class="wide-only" data-label="TTFT p99">{percentile(d, 99.0, d.p99.as_ref())}</td>
                    <td data-label="Total p50">{p.e2e.as_ref().map(|e| estimate(&e.p50))}</td>
                    <td class="wide-only" data-label="Per token">{format::ms(p.tpot_ms)}</td>
                    <td class="wide-only" data-label="Longest stall">{format::ms(p.itl.map(|i| i.max))}</td>
                }
                .into_any(),
                None => {
                    view! { <td colspan="6" class="note">"no request answered"</td> }.into_any()
                }
            };
            view! {
                <tr data-testid="report-row">
                    <td class="group-key">{name}</td>
                    <td data-label="Requests">{p.requests}</td>
                    <td data-label="Failed">{p.failed}</td>
                    {numbers}
                </tr>
            }
        })
        .collect::<Vec<_>>();
    let concurrency = concurrency_reading(&report);
    // Every level, so a server that holds up at 3 but not at 5 shows where it turns.
    let levels = report
        .degradation
        .iter()
        .map(|d| view! { <li>{level_line(d, &report.level_failures)}</li> })
        .collect::<Vec<_>>();
    let connection = report.connection.as_ref().map(connection_reading);
    let preflights = preflight_reading(&report);
    let cold = report
        .cold
        .iter()
        .map(|c| view! { <li>{cold_line(c)}</li> })
        .collect::<Vec<_>>();
    let overhead = report
        .overhead
        .iter()
        .map(|o| match &o.difference_ms {
            Some(d) => view! {
                <li>
                    {format!("Compared with {} over {} rounds, this target's first token came ", o.target, o.rounds)}
                    {estimate(&Estimate { value: d.value.abs(), low: d.low.abs().min(d.high.abs()), high: d.low.abs().max(d.high.abs()) })}
                    {if d.value >= 0.0 { " later (median of the differences)" } else { " sooner (median of the differences)" }}
                    {overhead_note(o)}
                </li>
            }
            .into_any(),
            None => view! { <li>{format!("Compared with {}: no round where both answered.", o.target)}</li> }.into_any(),
        })
        .collect::<Vec<_>>();
    let probes = report.probes.as_ref().map(probe_line);
    view! {
        <div class="report" data-testid="run-report">
            <div class="table-scroll" tabindex="0" role="region" aria-label="Results by phase">
                <table class="samples results stack">
                    <thead>
                        <tr>
                            <th scope="col">"Phase"</th>
                            <th scope="col">"Requests"</th>
                            <th scope="col">"Failed"</th>
                            <th scope="col">"TTFT p50"</th>
                            <th scope="col">"TTFT p90"</th>
                            <th scope="col" class="wide-only">"TTFT p99"</th>
                            <th scope="col">"Total p50"</th>
                            <th scope="col" class="wide-only" title="Time per output token after the first">"Per token"</th>
                            <th scope="col" class="wide-only" title="The longest gap between two pieces of the answer">"Longest stall"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            <p class="status">"Each percentile has its 95% interval beneath it (widened where the run's requests were alike in streaks), and is shown only where there are enough requests (p90 from 10, p99 from 100). Warm-up requests are left out; requests after idle time are listed one by one below."</p>
            {report.split.as_ref().map(super::layers::run_split)}
            {concurrency.map(|text| view! { <p class="reading" data-testid="concurrency-reading">{text}</p> })}
            {(report.degradation.len() > 1).then(|| view! { <ul class="reading" data-testid="concurrency-levels">{levels}</ul> })}
            {preflights.map(|text| view! { <p class="reading" data-testid="preflight-reading">{text}</p> })}
            {connection.map(|text| view! { <p class="reading" data-testid="connection-reading">{text}</p> })}
            {(!cold.is_empty()).then(|| view! { <ul class="reading" data-testid="cold-reading">{cold}</ul> })}
            {(!overhead.is_empty()).then(|| view! { <ul class="reading">{overhead}</ul> })}
            {probes.map(|text| view! { <p class="reading">{text}</p> })}
            {(!limits.is_empty()).then(|| view! { <ul class="reading" data-testid="browser-limits">{limits}</ul> })}
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    fn level(batches: usize) -> LevelDegradation {
        LevelDegradation {
            level: 3,
            requests: 3 * batches,
            batches,
            failed: 0,
            median_ttft_ms: Some(420.0),
            ratio: Some(Estimate {
                value: 1.94,
                low: 1.90,
                high: 1.94,
            }),
            serial_model: 2.0,
            network_floor_ms: 0.0,
        }
    }

    /// Below the batches a reading needs, a level's line gives its ratio without the
    /// interval, and says why; from that count on, with it.
    #[wasm_bindgen_test(unsupported = test)]
    fn a_level_line_gives_the_interval_only_from_enough_batches() {
        let one = level_line(&level(1), &[]);
        assert_eq!(
            one,
            "3 at once: first token at 420 ms (median of 3), 1.94× as long as alone (no interval from only 1 batch; at least 3 are needed); one at a time: 2.00×"
        );
        let two = level_line(&level(2), &[]);
        assert!(two.contains("(no interval from only 2 batches;"), "{two}");
        let three = level_line(&level(MIN_BATCHES_FOR_READING), &[]);
        assert!(
            three.contains("1.94× as long as alone (95% interval 1.90–1.94×)"),
            "{three}"
        );
        assert!(!three.contains("no interval"), "{three}");
    }
}
