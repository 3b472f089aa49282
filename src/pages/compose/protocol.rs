//! The compose form's protocol section: which protocol the study runs, what it leaves out
//! without a fresh-connection URL, and how many requests "one after another" makes.

use firsttoken_pages::compose::Protocol;
use leptos::prelude::*;

use super::state::Compose;

/// The protocol menu, its note, and the request count for the steady protocol.
#[component]
pub(super) fn ProtocolFields(state: Compose) -> impl IntoView {
    let form = state.form;
    let protocol = Memo::new(move |_| form.with(|f| f.protocol));
    let left_out = Memo::new(move |_| form.with(|f| f.protocol.left_out(&f.fresh_url)));

    view! {
        <label class="wide">
            <span>"Protocol"</span>
            <select data-testid="protocol" on:change=move |ev| {
                let name = event_target_value(&ev);
                if let Some(p) = Protocol::ALL.into_iter().find(|p| p.name() == name) { form.update(|f| f.protocol = p) }
            }>
                {Protocol::ALL.into_iter().map(|p| view! {
                    <option value=p.name() selected=move || protocol.get() == p>{p.title()}</option>
                }).collect::<Vec<_>>()}
            </select>
        </label>
        {move || left_out.get().map(|note| view! {
            <p class="notice wide" role="note" data-testid="left-out">{note}</p>
        })}
        <Show when=move || protocol.get() == Protocol::Steady>
            <label>
                <span>"Requests"</span>
                <input type="number" min="1" max="1000" inputmode="numeric" data-testid="request-count" bind:value=slice!(form.requests) />
            </label>
        </Show>
    }
}
