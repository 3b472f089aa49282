//! The compose form's delivery section: where the runs' results go, and the header that
//! tags each request with its run's id.

use leptos::prelude::*;

use super::state::Compose;

/// The collector's URL and the run-tag header, folded away in one `<details>`.
#[component]
pub(super) fn DeliveryFields(state: Compose) -> impl IntoView {
    let form = state.form;

    view! {
        <details class="wide">
            <summary>"Where results go, and tagging requests"</summary>
            <label>
                <span>"Collector"</span>
                <input type="url" data-testid="collector-url" bind:value=slice!(form.collector) />
            </label>
            <label>
                <span>"Tag each request with the run id in this header"</span>
                <input type="text" placeholder="X-Benchmark-Run" bind:value=slice!(form.run_tag_header) />
                <small>"So your target can leave benchmark traffic out of its analytics. On another origin a custom header costs a CORS preflight."</small>
            </label>
        </details>
    }
}
