//! A finished run's results, read in plain words: percentiles per phase with their
//! intervals, what concurrency did, what a new connection cost, cold starts, and the app's
//! overhead over the targets it was compared with.

use firsttoken_core::Run;
use firsttoken_core::report::RunReport;
use firsttoken_core::stats::{Concurrency, Estimate};
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

/// What the concurrency phase says about the server, in a sentence.
fn reading(report: &RunReport) -> Option<String> {
    let worst = report
        .degradation
        .iter()
        .filter(|d| d.reading().is_some())
        .max_by_key(|d| d.level)?;
    let (k, ratio, model) = (worst.level, worst.ratio?, worst.serial_model);
    Some(match worst.reading()? {
        Concurrency::Serial => format!(
            "Your server appears to handle requests one at a time: with {k} at once, the first token took {ratio:.1}× as long as alone, about what a one-at-a-time server gives ({model:.1}×)."
        ),
        Concurrency::Partial => format!(
            "Your server slows down when requests arrive together: {ratio:.1}× as long with {k} at once, less than a one-at-a-time server would ({model:.1}×)."
        ),
        Concurrency::Parallel => format!(
            "Your server handles simultaneous requests side by side: with {k} at once the first token took {ratio:.1}× as long as alone (one at a time would be {model:.1}×)."
        ),
    })
}

#[component]
pub fn ReportView(run: Run) -> impl IntoView {
    let report = RunReport::of(&run);
    let rows = report
        .phases
        .iter()
        .map(|p| {
            let name = if p.phase == firsttoken_core::Phase::Compare {
                format!("{}: {}", phase_title(p.phase), p.target)
            } else {
                phase_title(p.phase).to_owned()
            };
            let numbers = match &p.ttft {
                Some(d) => view! {
                    <td data-label="TTFT p50">{estimate(&d.p50)}</td>
                    <td data-label="TTFT p90">{estimate(&d.p90)}</td>
                    <td class="wide-only" data-label="TTFT p99">{estimate(&d.p99)}</td>
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
    let concurrency = reading(&report);
    // Every level, so a server that holds up at 3 but not at 5 shows where it turns.
    let levels = report
        .degradation
        .iter()
        .map(|d| {
            let ratio = match d.ratio {
                Some(r) if d.level > 1 => {
                    format!(", {r:.1}× alone (one at a time: {:.1}×)", d.serial_model)
                }
                _ => String::new(),
            };
            view! {
                <li>{format!(
                    "{} at once: first token at {} (median of {}){ratio}",
                    d.level,
                    format::ms(Some(d.median_ttft_ms)),
                    d.samples
                )}</li>
            }
        })
        .collect::<Vec<_>>();
    let connection = report.connection.map(|c| {
        let verified = if c.unverifiable == c.fresh_requests {
            " (whether each really opened a new connection could not be verified: the target does not report the client's port, and a preflighted request hides its connection)".to_owned()
        } else {
            format!(", {} of {} verified on a new connection", c.verified_new, c.fresh_requests)
        };
        format!(
            "A new connection added {} to the first token: {} with a new connection, {} on a warm one (medians{verified}).",
            format::ms(Some(c.extra_ms().max(0.0))),
            format::ms(Some(c.median_fresh_ttft_ms)),
            format::ms(Some(c.median_warm_ttft_ms)),
        )
    });
    let cold = report
        .cold
        .iter()
        .map(|c| {
            let what = match (&c.ttft_ms, &c.error) {
                (Some(t), _) => format::ms(Some(*t)),
                (None, Some(e)) => format!("failed ({e})"),
                (None, None) => "no answer".to_owned(),
            };
            view! { <li>{format!("After {} idle: first token at {what}", format::wait(u64::from(c.idle_ms)))}</li> }
        })
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
                </li>
            }
            .into_any(),
            None => view! { <li>{format!("Compared with {}: no round where both answered.", o.target)}</li> }.into_any(),
        })
        .collect::<Vec<_>>();
    let probes = report.probe_rtt.as_ref().map(|d| {
        format!(
            "Network round trip to the target (probes): {} median.",
            format::ms(Some(d.p50.value))
        )
    });
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
            <p class="status">"Each percentile has its 95% bootstrap interval beneath it. Warm-up requests are left out."</p>
            {concurrency.map(|text| view! { <p class="reading" data-testid="concurrency-reading">{text}</p> })}
            {(report.degradation.len() > 1).then(|| view! { <ul class="reading" data-testid="concurrency-levels">{levels}</ul> })}
            {connection.map(|text| view! { <p class="reading" data-testid="connection-reading">{text}</p> })}
            {(!cold.is_empty()).then(|| view! { <ul class="reading" data-testid="cold-reading">{cold}</ul> })}
            {(!overhead.is_empty()).then(|| view! { <ul class="reading">{overhead}</ul> })}
            {probes.map(|text| view! { <p class="reading">{text}</p> })}
        </div>
    }
}
