//! The operator's page: describe what to measure and get a link to share with beta users.
//! The form covers the usual study; the study as JSON covers everything (several request
//! bodies, headers, custom stream formats, hand-made phases).

use firsttoken_core::share::Study;
use firsttoken_core::study_id::study_id_from_random;
use firsttoken_core::url::origin_of;
use firsttoken_pages::compose::{
    Form, LocalOnly, Protocol, headers_text, local_only, loopback_fresh_url, results_of,
};
use firsttoken_pages::page::Page;
use firsttoken_pages::presets::{KeyHeader, PRESETS, Preset};
use firsttoken_pages::{check, qr};
use firsttoken_stream::dialect::Dialect;
use leptos::prelude::*;

use crate::platform::Scope;
use crate::{browser, collector, target_check};

mod checklist;
use checklist::{Checked, Checklist, link_check_note};

/// An OpenAI-style streaming request, asking for usage so tokens are counted by the
/// server rather than guessed from chunks.
pub const DEFAULT_BODY: &str = r#"{
  "model": "firsttoken-demo",
  "stream": true,
  "stream_options": { "include_usage": true },
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#;

fn link_to(study: &Study) -> String {
    format!("{}/run#{}", browser::app_root(), study.to_fragment())
}

/// A new study id from the browser's cryptographic generator.
fn new_study_id() -> String {
    let random = Scope::current().random_bytes();
    let mut first = [0u8; 10];
    first.copy_from_slice(&random[..10]);
    study_id_from_random(first)
}

/// This page, as the form's rules see it.
fn on_this_page<T>(f: impl FnOnce(Page) -> T) -> T {
    let (origin, base_path) = (browser::page_origin(), browser::base_path());
    let host = web_sys::window()
        .and_then(|w| w.location().host().ok())
        .unwrap_or_default();
    f(Page {
        origin: &origin,
        host: &host,
        base_path: &base_path,
    })
}

#[component]
pub fn ComposePage() -> impl IntoView {
    // This server: the demo, the collector and the app are under its base path.
    let origin = browser::app_root();
    let title = RwSignal::new("Chat latency".to_owned());
    let url = RwSignal::new(format!("{origin}/v1/chat/completions"));
    let fresh_url = RwSignal::new(loopback_fresh_url(&url.get_untracked()).unwrap_or_default());
    // Follows the target URL (this server's `{n}.localhost` names) until edited by hand.
    let fresh_edited = RwSignal::new(false);
    let checked = RwSignal::new(None::<Checked>);
    let label = RwSignal::new("demo".to_owned());
    let version = RwSignal::new(String::new());
    let dialect = RwSignal::new(Dialect::OpenaiChat);
    let body = RwSignal::new(DEFAULT_BODY.to_owned());
    let protocol = RwSignal::new(Protocol::Quick);
    let requests = RwSignal::new("20".to_owned());
    let preset = RwSignal::new(None::<&'static Preset>);
    // What the Endpoint menu shows: "demo", a preset's key, or "custom" once the target
    // URL is edited by hand.
    let endpoint_kind = RwSignal::new("demo".to_owned());
    let base_url = RwSignal::new(String::new());
    let headers = RwSignal::new(String::new());
    let key_header = RwSignal::new(KeyHeader::Bearer);
    let compare_url = RwSignal::new(String::new());
    let compare_label = RwSignal::new(String::new());
    let compare_preset = RwSignal::new(None::<&'static Preset>);
    let compare_base = RwSignal::new(String::new());
    let compare_key = RwSignal::new(String::new());
    let token = RwSignal::new(String::new());
    let token_is_for_benchmark = RwSignal::new(false);
    let send_cookies = RwSignal::new(false);
    let admin_token = RwSignal::new(String::new());
    let signed = RwSignal::new(false);
    let collector_url = RwSignal::new(on_this_page(|page| page.own_collector()));
    let run_tag_header = RwSignal::new(String::new());
    let link = RwSignal::new(None::<String>);
    let results = RwSignal::new(None::<String>);
    let json = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);

    // With the admin token the server signs the link; without it the link is anyone's,
    // and one that sends cookies cannot be made.
    let show = move |study: Study| {
        json.set(serde_json::to_string_pretty(&study).unwrap_or_default());
        results.set(on_this_page(|page| results_of(&study, page)));
        error.set(None);
        link.set(None);
        let admin = admin_token.get_untracked().trim().to_owned();
        if admin.is_empty() {
            if study.plan.targets.iter().any(|t| t.send_cookies) {
                error.set(Some("A link that sends this browser's cookies must be signed: enter this server's admin token.".into()));
                return;
            }
            signed.set(false);
            link.set(Some(link_to(&study)));
            return;
        }
        leptos::task::spawn_local(async move {
            let url = format!(
                "{}{}",
                browser::app_root(),
                firsttoken_core::api::STUDIES_PATH
            );
            let body = serde_json::to_string(&study).unwrap_or_default();
            match collector::sign_study(&Scope::current(), &url, &body, &admin).await {
                Ok(answer) => {
                    signed.set(true);
                    link.set(Some(format!(
                        "{}/run#{}",
                        browser::app_root(),
                        answer.fragment
                    )));
                }
                Err(e) => error.set(Some(format!("The link could not be signed: {e}"))),
            }
        });
    };
    let form = move || Form {
        title: title.get_untracked(),
        url: url.get_untracked(),
        fresh_url: fresh_url.get_untracked(),
        label: label.get_untracked(),
        version: version.get_untracked(),
        dialect: dialect.get_untracked(),
        body: body.get_untracked(),
        protocol: protocol.get_untracked(),
        requests: requests.get_untracked(),
        headers: headers.get_untracked(),
        key_header: key_header.get_untracked(),
        compare_url: compare_url.get_untracked(),
        compare_label: compare_label.get_untracked(),
        compare_preset: compare_preset.get_untracked(),
        compare_key: compare_key.get_untracked(),
        token: token.get_untracked(),
        token_is_for_benchmark: token_is_for_benchmark.get_untracked(),
        send_cookies: send_cookies.get_untracked(),
        collector: collector_url.get_untracked(),
        run_tag_header: run_tag_header.get_untracked(),
    };
    let make = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        match on_this_page(|page| form().build(page, new_study_id())) {
            Ok(study) => show(study),
            Err(e) => {
                link.set(None);
                error.set(Some(e.to_string()));
            }
        }
    };
    let from_json = move |_| match serde_json::from_str::<Study>(&json.get_untracked()) {
        // A study written by hand gets an id, so its runs can be read apart too; one that
        // has an id keeps it (the same link, edited).
        Ok(mut study) => {
            study.study_id = study.study_id.or_else(|| Some(new_study_id()));
            match study.validate() {
                Ok(()) => show(study),
                Err(e) => error.set(Some(format!("The study is not valid: {e}"))),
            }
        }
        Err(e) => error.set(Some(format!("The JSON is not a study: {e}"))),
    };
    // The check sends the study the form describes now, as the runs will.
    let check = move |_| {
        let study = match on_this_page(|page| form().build(page, new_study_id())) {
            Ok(study) => study,
            Err(e) => {
                error.set(Some(e.to_string()));
                return;
            }
        };
        error.set(None);
        checked.set(Some(Checked::Running {
            url: study.plan.main_target().url.clone(),
        }));
        leptos::task::spawn_local(async move {
            let observed = target_check::run(&study.plan).await;
            let lines = check::checklist(&observed);
            checked.set(Some(Checked::Done {
                url: study.plan.main_target().url.clone(),
                examples: check::examples(&observed.page_origin, &lines),
                lines,
            }));
        });
    };
    // A preset fills in what its API needs; "demo" puts this server's demo back.
    let demo_url = format!("{origin}/v1/chat/completions");
    let follow_fresh = move |target: &str| {
        if !fresh_edited.get_untracked() {
            fresh_url.set(loopback_fresh_url(target).unwrap_or_default());
        }
    };
    let pick = move |name: String| {
        endpoint_kind.set(name.clone());
        let chosen = Preset::find(&name);
        preset.set(chosen);
        let filled = match chosen {
            Some(p) => {
                let base = p.base_url.unwrap_or_default();
                base_url.set(base.to_owned());
                (
                    p.url(base),
                    p.dialect.dialect(),
                    p.body.to_owned(),
                    headers_text(p),
                    p.key_header,
                    p.key,
                )
            }
            None if name == "demo" => (
                demo_url.clone(),
                Dialect::OpenaiChat,
                DEFAULT_BODY.to_owned(),
                String::new(),
                KeyHeader::Bearer,
                "demo",
            ),
            // Another endpoint: the form stays as it is, to be edited.
            None => return,
        };
        let (new_url, new_dialect, new_body, new_headers, new_key_header, new_label) = filled;
        follow_fresh(&new_url);
        url.set(new_url);
        dialect.set(new_dialect);
        body.set(new_body);
        headers.set(new_headers);
        key_header.set(new_key_header);
        label.set(new_label.to_owned());
    };
    let pick_compare = move |name: String| {
        let chosen = Preset::find(&name);
        compare_preset.set(chosen);
        if let Some(p) = chosen {
            let base = p.base_url.unwrap_or_default();
            compare_base.set(base.to_owned());
            compare_url.set(p.url(base));
        }
    };
    let copy = move |_| {
        if let (Some(link), Some(window)) = (link.get_untracked(), web_sys::window()) {
            let _ = window.navigator().clipboard().write_text(&link);
        }
    };

    view! {
        <section class="card" aria-labelledby="compose-title">
            <h2 id="compose-title">"Make a link for your beta users"</h2>
            <p class="status">"Describe what to measure; share the link. Each person who opens it runs the measurement in their own browser, on their own network, and chooses whether to send you the results."</p>
            <form class="setup" on:submit=make novalidate>
                <label class="wide">
                    <span>"Title"</span>
                    <input type="text" data-testid="study-title-input" bind:value=title />
                    <small>"What beta users read at the top of the page."</small>
                </label>
                <label class="wide">
                    <span>"Endpoint"</span>
                    <select data-testid="preset" on:change=move |ev| pick(event_target_value(&ev))>
                        <option value="demo" prop:selected=move || endpoint_kind.get() == "demo">"This server's demo target"</option>
                        {PRESETS.iter().map(|p| view! { <option value=p.key prop:selected=move || endpoint_kind.get() == p.key>{p.title}</option> }).collect::<Vec<_>>()}
                        <option value="custom" prop:selected=move || endpoint_kind.get() == "custom">"Your own endpoint (fill in below)"</option>
                    </select>
                    <small>"A provider fills in its URL, stream format, headers and a minimal streaming request; edit any of them after (the model, surely)."</small>
                </label>
                <Show when=move || preset.with(|p| p.is_some_and(|p| p.base_url.is_some()))>
                    <label class="wide">
                        <span>"Base URL"</span>
                        <input type="url" spellcheck="false" data-testid="base-url" bind:value=base_url on:input=move |ev| {
                            if let Some(p) = preset.get_untracked() {
                                let target = p.url(&event_target_value(&ev));
                                follow_fresh(&target);
                                url.set(target);
                            }
                        } />
                        <small>"The server's OpenAI-compatible base URL, as its clients are given: vLLM http://host:8000/v1, Ollama http://host:11434/v1, llama.cpp http://host:8080/v1, TGI http://host:8080/v1."</small>
                    </label>
                </Show>
                <label class="wide">
                    <span>"Target URL"</span>
                    <input type="url" data-testid="target-url" bind:value=url on:input=move |ev| {
                        follow_fresh(&event_target_value(&ev));
                        endpoint_kind.set("custom".to_owned());
                    } />
                    <small>"Your streaming chat endpoint: the one your app's page calls. The default is this server's built-in demo, which answers after 300 ms."</small>
                </label>
                <div class="wide fresh">
                    <label>
                        <span>"Fresh-connection URL (optional)"</span>
                        <input type="text" spellcheck="false" placeholder="https://{n}.fresh.chat.example.com/v1/chat" data-testid="fresh-url"
                            bind:value=fresh_url on:input=move |_| fresh_edited.set(true) />
                        <small>"The target's URL on a wildcard host name that reaches the same server, with {n} where a number goes: each request gets a host name never used before, the only way to force a new connection. Empty: new connections are not measured. Check the target (below) to see that it reaches the same server on a new connection."</small>
                    </label>
                </div>
                <label>
                    <span>"Target name"</span>
                    <input type="text" data-testid="target-label" bind:value=label />
                </label>
                <label>
                    <span>"Version"</span>
                    <input type="text" placeholder="v1.4.2" data-testid="target-version" bind:value=version />
                    <small>"Compare before and after a fix on the Results page."</small>
                </label>
                <label>
                    <span>"Stream format"</span>
                    <select data-testid="dialect" on:change=move |ev| {
                        if let Some(d) = Dialect::from_name(&event_target_value(&ev)) { dialect.set(d) }
                    }>
                        {Dialect::PLAIN.into_iter().map(|d| {
                            let name = d.name();
                            view! { <option value=name selected=move || dialect.get().name() == name>{name}</option> }
                        }).collect::<Vec<_>>()}
                    </select>
                </label>
                <label class="wide">
                    <span>"Protocol"</span>
                    <select data-testid="protocol" on:change=move |ev| {
                        let name = event_target_value(&ev);
                        if let Some(p) = Protocol::ALL.into_iter().find(|p| p.name() == name) { protocol.set(p) }
                    }>
                        {Protocol::ALL.into_iter().map(|p| view! {
                            <option value=p.name() selected=move || protocol.get() == p>{p.title()}</option>
                        }).collect::<Vec<_>>()}
                    </select>
                </label>
                {move || protocol.get().left_out(&fresh_url.get()).map(|note| view! {
                    <p class="notice wide" role="note" data-testid="left-out">{note}</p>
                })}
                <Show when=move || protocol.get() == Protocol::Steady>
                    <label>
                        <span>"Requests"</span>
                        <input type="number" min="1" max="1000" inputmode="numeric" data-testid="request-count" bind:value=requests />
                    </label>
                </Show>
                <details class="wide">
                    <summary>"Request body"</summary>
                    <textarea rows="7" spellcheck="false" data-testid="request-body" bind:value=body></textarea>
                </details>
                <details class="wide">
                    <summary>"Request headers"</summary>
                    <textarea rows="3" spellcheck="false" placeholder="anthropic-version: 2023-06-01" data-testid="request-headers" bind:value=headers></textarea>
                    <small>"One Name: value a line, sent with each request (not with probes). On another origin each one must be allowed by the target's CORS preflight."</small>
                </details>
                <label class="wide">
                    <span>"Compare with (optional)"</span>
                    <select data-testid="compare-preset" on:change=move |ev| pick_compare(event_target_value(&ev))>
                        <option value="" selected>"An endpoint that takes the target's request"</option>
                        {PRESETS.iter().map(|p| view! { <option value=p.key>{p.title}</option> }).collect::<Vec<_>>()}
                    </select>
                    <small>"The same question to another endpoint, interleaved with the target's: the model provider directly, say. The difference is your app's own time."</small>
                </label>
                <Show when=move || compare_preset.with(|p| p.is_some_and(|p| p.base_url.is_some()))>
                    <label class="wide">
                        <span>"Its base URL"</span>
                        <input type="url" spellcheck="false" data-testid="compare-base-url" bind:value=compare_base on:input=move |ev| {
                            if let Some(p) = compare_preset.get_untracked() { compare_url.set(p.url(&event_target_value(&ev))) }
                        } />
                    </label>
                </Show>
                <label class="wide">
                    <span>"Its URL"</span>
                    <input type="url" placeholder="https://api.provider.example/v1/chat/completions" data-testid="compare-url" bind:value=compare_url />
                </label>
                <Show when=move || compare_preset.with(Option::is_some)>
                    <label class="wide">
                        <span>"Its API key"</span>
                        <input type="text" autocomplete="off" spellcheck="false" data-testid="compare-key" bind:value=compare_key />
                        <small>{move || format!("Sent as {} to it. It travels in the link: use a key made for this benchmark, with a spending limit.", compare_preset.get().map_or_else(String::new, |p| p.key_header.describe()))}</small>
                    </label>
                </Show>
                <Show when=move || !compare_url.with(String::is_empty)>
                    <label>
                        <span>"Its name"</span>
                        <input type="text" data-testid="compare-label" bind:value=compare_label />
                    </label>
                </Show>
                <label class="wide">
                    <span>"Benchmark token or API key (optional)"</span>
                    <input type="text" autocomplete="off" spellcheck="false" data-testid="token" bind:value=token />
                    <small>{move || format!("Sent as {} with each request. It travels in the link, so anyone with the link can use it: make one for this benchmark only.", key_header.get().describe())}</small>
                </label>
                <Show when=move || !token.with(String::is_empty) || !compare_key.with(String::is_empty)>
                    <label class="check wide">
                        <input type="checkbox" data-testid="token-confirmed" bind:checked=token_is_for_benchmark />
                        "This token is for this benchmark only, and I accept that it travels in the link"
                    </label>
                </Show>
                <Show when=move || url.with(|u| origin_of(u.trim()) == Some(browser::page_origin()))>
                    <label class="check wide">
                        <input type="checkbox" data-testid="send-cookies" bind:checked=send_cookies />
                        {move || format!(
                            "Send this browser's cookies with each request: beta users' own signed-in session with {}, exactly as your app's page sends it (only for a target on this page's origin, as it is here)",
                            web_sys::window().and_then(|w| w.location().host().ok()).unwrap_or_default()
                        )}
                    </label>
                </Show>
                <label class="wide">
                    <span>"Admin token, to sign the link"</span>
                    <input type="password" autocomplete="off" data-testid="admin-token" bind:value=admin_token />
                    <small>"This server's --admin-token. A signed link tells beta users it is yours (a link without it says anyone could have made it), and only a signed link sends cookies. The token goes to this server only, never into the link."</small>
                </label>
                <details class="wide">
                    <summary>"Where results go, and tagging requests"</summary>
                    <label>
                        <span>"Collector"</span>
                        <input type="url" data-testid="collector-url" bind:value=collector_url />
                    </label>
                    <label>
                        <span>"Tag each request with the run id in this header"</span>
                        <input type="text" placeholder="X-Benchmark-Run" bind:value=run_tag_header />
                        <small>"So your target can leave benchmark traffic out of its analytics. On another origin a custom header costs a CORS preflight."</small>
                    </label>
                </details>
                <div class="actions wide">
                    <button type="button" data-testid="check-target" on:click=check
                        disabled=move || checked.with(|c| matches!(c, Some(Checked::Running { .. })))>"Check the target"</button>
                    <button type="submit" class="primary" data-testid="make-link">"Make the link"</button>
                </div>
                {move || checked.get().map(|c| view! { <Checklist checked=c /> })}
                <Show when=move || error.with(Option::is_some)>
                    <p class="error wide" role="alert" data-testid="compose-error">{move || error.get()}</p>
                </Show>
            </form>
        </section>
        <Show when=move || link.with(Option::is_some)>
            <section class="card" aria-labelledby="link-title">
                <h2 id="link-title">"The link"</h2>
                <div class="link-row">
                    <input type="text" readonly data-testid="share-link" prop:value=move || link.get().unwrap_or_default() aria-label="The link to share" />
                    <button type="button" on:click=copy>"Copy"</button>
                    <a class="button" target="_blank" rel="noopener" href=move || link.get().unwrap_or_default() data-testid="open-link">"Open"</a>
                </div>
                {move || link.with(|l| l.as_deref().and_then(local_only)).map(|reach| view! {
                    <p class="notice local-only" role="alert" data-testid="link-local-only">{local_only_note(reach)}</p>
                })}
                <p class="status">{move || format!("{} characters. The study travels in the part after #, which browsers never send to a server.", link.with(|l| l.as_ref().map_or(0, String::len)))}</p>
                <p class="status" data-testid="link-signed" data-signed=move || signed.get().to_string()>{move || if signed.get() {
                    "Signed by this server: the page tells beta users you made this link."
                } else {
                    "Not signed: the page tells beta users anyone could have made this link. Enter the admin token above to sign it."
                }}</p>
                {move || link.get().map(|l| view! { <LinkQrCode link=l /> })}
                <p class="notice" role="note" data-testid="link-check">{move || link_check_note(checked.get().as_ref())}</p>
                <Show when=move || results.with(Option::is_some)>
                    <p class="status" data-testid="link-results">
                        "Runs from this link will appear on "
                        <a data-testid="link-results-href" href=move || results.get().unwrap_or_default() target="_blank" rel="noopener">{move || results.get().unwrap_or_default()}</a>
                        " (every run carries the link's id; a new link gets a new id)."
                    </p>
                </Show>
                <details>
                    <summary>"The study as JSON (scenarios, headers, custom stream formats, phases)"</summary>
                    <textarea rows="16" spellcheck="false" data-testid="study-json" bind:value=json></textarea>
                    <button type="button" data-testid="use-json" on:click=from_json>"Make the link from this JSON"</button>
                </details>
            </section>
        </Show>
    }
}

/// What the link card says of a link that only this computer, or only this local network,
/// can open ([`local_only`]): the first link an operator makes on `cargo xtask run` points
/// at 127.0.0.1.
fn local_only_note(reach: LocalOnly) -> &'static str {
    match reach {
        LocalOnly::ThisComputer => {
            "Only this computer can open this link: it points at a loopback address. Beta users on other machines need a firsttoken server they can reach (see the book's Deployment chapter, docs/src/deploy/index.md in the repository)."
        }
        LocalOnly::LocalNetwork => {
            "Only machines on this local network can open this link: it points at a private or local address. Beta users elsewhere need a firsttoken server they can reach (see the book's Deployment chapter, docs/src/deploy/index.md in the repository)."
        }
    }
}

/// The link as a QR code, for beta users who will open it on a phone, with a button that
/// saves it as an SVG file; where the link is too long for one, the reason instead.
#[component]
fn LinkQrCode(link: String) -> impl IntoView {
    match qr::link_qr(&link, QR_PX).map_err(|e| e.to_string()) {
        Ok(code) => {
            let file = format!(
                "data:image/svg+xml;charset=utf-8,{}",
                String::from(js_sys::encode_uri_component(&code.svg))
            );
            view! {
                <div class="qr">
                    <div class="qr-code" role="img" aria-label="The link as a QR code" data-testid="link-qr" inner_html=code.inline_svg().to_owned()></div>
                    <div class="qr-side">
                        <p class="status">{format!(
                            "Point a phone's camera at it to open the link. Version {} ({} × {} modules), error correction {}.",
                            code.version, code.modules, code.modules, code.level
                        )}</p>
                        <a class="button" href=file download="firsttoken-link-qr.svg" data-testid="download-qr">"Download QR"</a>
                    </div>
                </div>
            }
            .into_any()
        }
        Err(why) => view! { <p class="status" data-testid="qr-absent">{why}</p> }.into_any(),
    }
}

/// The QR code's smallest side in pixels: the renderer gives each module a whole number
/// of pixels, so a quick-protocol link (about 113 modules with the quiet zone) is drawn
/// 3 pixels a module, 339 pixels a side; a phone's page narrows it to fit.
const QR_PX: u32 = 240;
