//! One line that answers "how long did people wait?": the median and p90 TTFT and the
//! median total time of the requests that answered, and how many failed. Warm-up
//! requests, probes and other targets' requests are left out, and so are requests after
//! idle time, which are single values (ARCHITECTURE.md, "The statistics"); the p90 waits for the 10
//! values it needs.

use firsttoken_core::plan::Phase;
use firsttoken_core::schema::Sample;
use firsttoken_crowd::stats::{median, min_values_for, percentile};
use leptos::prelude::*;

use crate::format;

#[component]
pub fn Summary(#[prop(into)] samples: Signal<Vec<Sample>>) -> impl IntoView {
    // One computation per change, however many places read it.
    let numbers = Memo::new(move |_| {
        samples.with(|samples| {
            let samples: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.counts_for_latency() && s.phase != Phase::Cold)
                .collect();
            let answered: Vec<&&Sample> = samples.iter().filter(|s| s.error.is_none()).collect();
            let ttft: Vec<f64> = answered.iter().filter_map(|s| s.ttft_ms).collect();
            let e2e: Vec<f64> = answered.iter().filter_map(|s| s.e2e_ms).collect();
            (
                samples.len(),
                samples.len() - answered.len(),
                median(&ttft),
                (ttft.len() >= min_values_for(90.0))
                    .then(|| percentile(&ttft, 90.0))
                    .flatten(),
                ttft.len(),
                median(&e2e),
            )
        })
    });
    let numbers = move || numbers.get();
    view! {
        <dl class="summary" data-testid="summary">
            <div>
                <dt>"Median time to first token"</dt>
                <dd data-testid="median-ttft">{move || format::ms(numbers().2)}</dd>
            </div>
            <div>
                <dt>"p90 time to first token"</dt>
                <dd>{move || {
                    let (_, _, _, p90, count, _) = numbers();
                    match p90 {
                        Some(_) => format::ms(p90),
                        None => format!("— (needs {}, has {count})", min_values_for(90.0)),
                    }
                }}</dd>
            </div>
            <div>
                <dt>"Median total time"</dt>
                <dd>{move || format::ms(numbers().5)}</dd>
            </div>
            <div>
                <dt>"Failed"</dt>
                <dd data-testid="failed-count">
                    {move || {
                        let (total, failed, ..) = numbers();
                        format!("{failed} of {total}")
                    }}
                </dd>
            </div>
        </dl>
    }
}
