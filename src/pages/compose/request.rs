//! The compose form's request section: the body each request sends, and its extra
//! headers.

use leptos::prelude::*;

use super::state::Compose;

/// The request body and headers, each folded away in its own `<details>`.
#[component]
pub(super) fn RequestFields(state: Compose) -> impl IntoView {
    let form = state.form;

    view! {
        <details class="wide">
            <summary>"Request body"</summary>
            <textarea rows="7" spellcheck="false" data-testid="request-body" bind:value=slice!(form.body)></textarea>
        </details>
        <details class="wide">
            <summary>"Request headers"</summary>
            <textarea rows="3" spellcheck="false" placeholder="anthropic-version: 2023-06-01" data-testid="request-headers" bind:value=slice!(form.headers)></textarea>
            <small>"One Name: value a line, sent with each request (not with probes). On another origin each one must be allowed by the target's CORS preflight."</small>
        </details>
    }
}
