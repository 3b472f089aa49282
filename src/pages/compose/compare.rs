//! The compose form's comparison section: another endpoint asked the same question,
//! interleaved with the target's (a provider's preset, or any URL that takes the
//! target's request), with its key and its name.

use firsttoken_pages::presets::{PRESETS, Preset};
use leptos::prelude::*;

use super::state::Compose;

/// The Compare menu's choice: a preset fills in its URL; the first entry (an endpoint
/// that takes the target's request) leaves the URL as it is.
fn pick_compare(state: Compose, name: String) {
    let chosen = Preset::find(&name);
    state.form.update(|f| {
        f.compare_preset = chosen;
        if let Some(p) = chosen {
            f.compare_url = p.url(p.base_url.unwrap_or_default());
        }
    });
    if let Some(p) = chosen {
        state
            .aside
            .update(|a| a.compare_base = p.base_url.unwrap_or_default().to_owned());
    }
}

/// The endpoint to compare with: its menu, base URL, URL, API key and name.
#[component]
pub(super) fn CompareFields(state: Compose) -> impl IntoView {
    let Compose { form, aside, .. } = state;
    let compare_preset = Memo::new(move |_| form.with(|f| f.compare_preset));
    let (compare_url, set_compare_url) = slice!(form.compare_url);

    view! {
        <label class="wide">
            <span>"Compare with (optional)"</span>
            <select data-testid="compare-preset" on:change=move |ev| pick_compare(state, event_target_value(&ev))>
                <option value="" selected>"An endpoint that takes the target's request"</option>
                {PRESETS.iter().map(|p| view! { <option value=p.key>{p.title}</option> }).collect::<Vec<_>>()}
            </select>
            <small>"The same question to another endpoint, interleaved with the target's: the model provider directly, say. The difference is your app's own time."</small>
        </label>
        <Show when=move || compare_preset.with(|p| p.is_some_and(|p| p.base_url.is_some()))>
            <label class="wide">
                <span>"Its base URL"</span>
                <input type="url" spellcheck="false" data-testid="compare-base-url" bind:value=slice!(aside.compare_base) on:input=move |ev| {
                    if let Some(p) = compare_preset.get_untracked() { set_compare_url.set(p.url(&event_target_value(&ev))) }
                } />
            </label>
        </Show>
        <label class="wide">
            <span>"Its URL"</span>
            <input type="url" placeholder="https://api.provider.example/v1/chat/completions" data-testid="compare-url" bind:value=(compare_url, set_compare_url) />
        </label>
        <Show when=move || compare_preset.with(Option::is_some)>
            <label class="wide">
                <span>"Its API key"</span>
                <input type="text" autocomplete="off" spellcheck="false" data-testid="compare-key" bind:value=slice!(form.compare_key) />
                <small>{move || format!("Sent as {} to it. It travels in the link: use a key made for this benchmark, with a spending limit.", compare_preset.get().map_or_else(String::new, |p| p.key_header.describe()))}</small>
            </label>
        </Show>
        <Show when=move || !compare_url.with(String::is_empty)>
            <label>
                <span>"Its name"</span>
                <input type="text" data-testid="compare-label" bind:value=slice!(form.compare_label) />
            </label>
        </Show>
    }
}
