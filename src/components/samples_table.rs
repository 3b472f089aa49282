//! Every request of the run, one row each, as it finishes. Failed requests are rows too.

use firsttoken_core::plan::Phase;
use firsttoken_core::schema::Sample;
use leptos::prelude::*;

use crate::format;

/// What tells one row from another: the request's place, and its numbers (a new run
/// reuses the places).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct RowKey {
    index: u32,
    status: u16,
    ttft_bits: Option<u64>,
    e2e_bits: Option<u64>,
}

impl RowKey {
    fn of(s: &Sample) -> Self {
        Self {
            index: s.index,
            status: s.status,
            ttft_bits: s.ttft_ms.map(f64::to_bits),
            e2e_bits: s.e2e_ms.map(f64::to_bits),
        }
    }
}

#[component]
pub fn SamplesTable(#[prop(into)] samples: Signal<Vec<Sample>>) -> impl IntoView {
    view! {
        <div class="table-scroll" tabindex="0" role="region" aria-label="Requests">
            <table class="samples" data-testid="samples-table">
                <thead>
                    <tr>
                        <th scope="col">"#"</th>
                        <th scope="col" class="wide-only">"Status"</th>
                        <th scope="col" title="The first byte of the response body arrived">"First byte"</th>
                        <th scope="col" title="The first piece of answer text arrived">"First token"</th>
                        <th scope="col" title="The whole answer had arrived">"Total"</th>
                        <th scope="col" class="wide-only" title="Events that carried output">"Chunks"</th>
                        <th scope="col" class="wide-only" title="Output tokens, as the stream reported them">"Tokens"</th>
                        <th scope="col" class="problem">"Problem"</th>
                    </tr>
                </thead>
                <tbody>
                    // Keyed by what a row shows, and built from the sample it names, so a
                    // new request adds one row without copying every other sample.
                    <For
                        each=move || samples.with(|all| all.iter().map(RowKey::of).collect::<Vec<_>>())
                        key=|k| *k
                        children=move |k: RowKey| {
                            let Some(s) = samples.with_untracked(|all| all.iter().rev().find(|s| RowKey::of(s) == k).cloned()) else {
                                return ().into_any();
                            };
                            let failed = s.error.is_some();
                            let reused_fresh = s.phase == Phase::Fresh
                                && s.conn.as_ref().and_then(|c| c.new_connection) == Some(false);
                            view! {
                                <tr data-testid="sample-row" class:failed=failed>
                                    <td>{s.index + 1}</td>
                                    <td class="wide-only">{if s.status == 0 { "—".to_owned() } else { s.status.to_string() }}</td>
                                    <td>{format::ms(s.ttfb_ms)}</td>
                                    <td class="ttft" data-testid="sample-ttft">{format::ms(s.ttft_ms)}</td>
                                    <td>{format::ms(s.e2e_ms)}</td>
                                    <td class="wide-only">{s.output_chunks}</td>
                                    <td class="wide-only">{format::count(s.usage.and_then(|u| u.output_tokens))}</td>
                                    <td class="problem">
                                        {s.error.map(|e| format!("{}: {}", e.name(), s.error_message.clone().unwrap_or_default()))}
                                        {reused_fresh.then_some("ran on a connection already in use, so it does not count as a new one")}
                                    </td>
                                </tr>
                            }
                            .into_any()
                        }
                    />
                </tbody>
            </table>
        </div>
    }
}
