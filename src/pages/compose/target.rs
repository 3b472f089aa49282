//! The compose form's target section: the study's title, the Endpoint menu (this server's
//! demo, a provider's preset or your own), the target's URLs, name, version and stream
//! format.

use firsttoken_pages::compose::{Form, headers_text, loopback_fresh_url};
use firsttoken_pages::presets::{KeyHeader, PRESETS, Preset};
use firsttoken_stream::dialect::Dialect;
use leptos::prelude::*;

use super::state::{Aside, Compose, DEFAULT_BODY, demo_url};

/// The fresh-connection URL follows the target URL, this server's `{n}.localhost` names,
/// until edited by hand.
fn follow_fresh(aside: RwSignal<Aside>, form: &mut Form, target: &str) {
    if !aside.with_untracked(|a| a.fresh_edited) {
        form.fresh_url = loopback_fresh_url(target).unwrap_or_default();
    }
}

/// The Endpoint menu's choice: a preset fills in what its API needs; "demo" puts this
/// server's demo back; another endpoint leaves the form as it is, to be edited.
fn pick(state: Compose, name: String) {
    let chosen = Preset::find(&name);
    state.aside.update(|a| {
        a.endpoint = name.clone();
        a.preset = chosen;
        if let Some(p) = chosen {
            a.base_url = p.base_url.unwrap_or_default().to_owned();
        }
    });
    let filled = match chosen {
        Some(p) => (
            p.url(p.base_url.unwrap_or_default()),
            p.dialect.dialect(),
            p.body.to_owned(),
            headers_text(p),
            p.key_header,
            p.key,
        ),
        None if name == "demo" => (
            demo_url(),
            Dialect::OpenaiChat,
            DEFAULT_BODY.to_owned(),
            String::new(),
            KeyHeader::Bearer,
            "demo",
        ),
        None => return,
    };
    let (url, dialect, body, headers, key_header, label) = filled;
    state.form.update(|f| {
        follow_fresh(state.aside, f, &url);
        f.url = url;
        f.dialect = dialect;
        f.body = body;
        f.headers = headers;
        f.key_header = key_header;
        f.label = label.to_owned();
    });
}

/// The title, the endpoint and the target: where the study's requests go, and how its
/// stream reads.
#[component]
pub(super) fn TargetFields(state: Compose) -> impl IntoView {
    let Compose { form, aside, .. } = state;
    let endpoint = Memo::new(move |_| aside.with(|a| a.endpoint.clone()));
    let preset = Memo::new(move |_| aside.with(|a| a.preset));
    let dialect = Memo::new(move |_| form.with(|f| f.dialect.name()));

    view! {
        <label class="wide">
            <span>"Title"</span>
            <input type="text" data-testid="study-title-input" bind:value=slice!(form.title) />
            <small>"What beta users read at the top of the page."</small>
        </label>
        <label class="wide">
            <span>"Endpoint"</span>
            <select data-testid="preset" on:change=move |ev| pick(state, event_target_value(&ev))>
                <option value="demo" prop:selected=move || endpoint.with(|e| e == "demo")>"This server's demo target"</option>
                {PRESETS.iter().map(|p| view! { <option value=p.key prop:selected=move || endpoint.with(|e| e == p.key)>{p.title}</option> }).collect::<Vec<_>>()}
                <option value="custom" prop:selected=move || endpoint.with(|e| e == "custom")>"Your own endpoint (fill in below)"</option>
            </select>
            <small>"A provider fills in its URL, stream format, headers and a minimal streaming request; edit any of them after (the model, surely)."</small>
        </label>
        <Show when=move || preset.with(|p| p.is_some_and(|p| p.base_url.is_some()))>
            <label class="wide">
                <span>"Base URL"</span>
                <input type="url" spellcheck="false" data-testid="base-url" bind:value=slice!(aside.base_url) on:input=move |ev| {
                    if let Some(p) = preset.get_untracked() {
                        let target = p.url(&event_target_value(&ev));
                        form.update(|f| {
                            follow_fresh(aside, f, &target);
                            f.url = target;
                        });
                    }
                } />
                <small>"The server's OpenAI-compatible base URL, as its clients are given: vLLM http://host:8000/v1, Ollama http://host:11434/v1, llama.cpp http://host:8080/v1, TGI http://host:8080/v1."</small>
            </label>
        </Show>
        <label class="wide">
            <span>"Target URL"</span>
            <input type="url" data-testid="target-url" bind:value=slice!(form.url) on:input=move |ev| {
                let target = event_target_value(&ev);
                form.update(|f| follow_fresh(aside, f, &target));
                aside.update(|a| a.endpoint = "custom".to_owned());
            } />
            <small>"Your streaming chat endpoint: the one your app's page calls. The default is this server's built-in demo, which answers after 300 ms."</small>
        </label>
        <div class="wide fresh">
            <label>
                <span>"Fresh-connection URL (optional)"</span>
                <input type="text" spellcheck="false" placeholder="https://{n}.fresh.chat.example.com/v1/chat" data-testid="fresh-url"
                    bind:value=slice!(form.fresh_url) on:input=move |_| aside.update(|a| a.fresh_edited = true) />
                <small>"The target's URL on a wildcard host name that reaches the same server, with {n} where a number goes: each request gets a host name never used before, the only way to force a new connection. Empty: new connections are not measured. Check the target (below) to see that it reaches the same server on a new connection."</small>
            </label>
        </div>
        <label>
            <span>"Target name"</span>
            <input type="text" data-testid="target-label" bind:value=slice!(form.label) />
        </label>
        <label>
            <span>"Version"</span>
            <input type="text" placeholder="v1.4.2" data-testid="target-version" bind:value=slice!(form.version) />
            <small>"Compare before and after a fix on the Results page."</small>
        </label>
        <label>
            <span>"Stream format"</span>
            <select data-testid="dialect" on:change=move |ev| {
                if let Some(d) = Dialect::from_name(&event_target_value(&ev)) { form.update(|f| f.dialect = d) }
            }>
                {Dialect::PLAIN.into_iter().map(|d| {
                    let name = d.name();
                    view! { <option value=name selected=move || dialect.get() == name>{name}</option> }
                }).collect::<Vec<_>>()}
            </select>
        </label>
    }
}
