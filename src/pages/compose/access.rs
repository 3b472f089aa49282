//! The compose form's access section: the token the link carries for the target, the
//! cookies it may send, and this server's admin token that signs it.

use firsttoken_core::url::origin_of;
use leptos::prelude::*;

use super::state::Compose;
use crate::browser;

/// The benchmark token and its confirmation, sending cookies, and the admin token.
#[component]
pub(super) fn AccessFields(state: Compose) -> impl IntoView {
    let Compose { form, aside, .. } = state;
    let key_header = Memo::new(move |_| form.with(|f| f.key_header));
    let url = Memo::new(move |_| form.with(|f| f.url.clone()));
    let (token, set_token) = slice!(form.token);
    let compare_key = Memo::new(move |_| form.with(|f| f.compare_key.clone()));

    view! {
        <label class="wide">
            <span>"Benchmark token or API key (optional)"</span>
            <input type="text" autocomplete="off" spellcheck="false" data-testid="token" bind:value=(token, set_token) />
            <small>{move || format!("Sent as {} with each request. It travels in the link, so anyone with the link can use it: make one for this benchmark only.", key_header.get().describe())}</small>
        </label>
        <Show when=move || !token.with(String::is_empty) || !compare_key.with(String::is_empty)>
            <label class="check wide">
                <input type="checkbox" data-testid="token-confirmed" bind:checked=slice!(form.token_is_for_benchmark) />
                "This token is for this benchmark only, and I accept that it travels in the link"
            </label>
        </Show>
        <Show when=move || url.with(|u| origin_of(u.trim()) == Some(browser::page_origin()))>
            <label class="check wide">
                <input type="checkbox" data-testid="send-cookies" bind:checked=slice!(form.send_cookies) />
                {move || format!(
                    "Send this browser's cookies with each request: beta users' own signed-in session with {}, exactly as your app's page sends it (only for a target on this page's origin, as it is here)",
                    web_sys::window().and_then(|w| w.location().host().ok()).unwrap_or_default()
                )}
            </label>
        </Show>
        <label class="wide">
            <span>"Admin token, to sign the link"</span>
            <input type="password" autocomplete="off" data-testid="admin-token" bind:value=slice!(aside.admin_token) />
            <small>"This server's --admin-token. A signed link tells beta users it is yours (a link without it says anyone could have made it), and only a signed link sends cookies. The token goes to this server only, never into the link."</small>
        </label>
    }
}
