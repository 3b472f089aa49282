//! The operator's page: describe what to measure and get a link to share with beta users.
//! The form covers the usual study; the study as JSON covers everything (several request
//! bodies, headers, custom stream formats, hand-made phases).

use firsttoken_core::Dialect;
use firsttoken_core::Plan;
use firsttoken_core::plan::{PhasePlan, RunTag, TargetPlan};
use firsttoken_core::qr;
use firsttoken_core::schema::origin_of;
use firsttoken_core::share::{Study, study_id_from_random};
use leptos::prelude::*;

use crate::browser;
use crate::collector;
use crate::engine::Scope;

/// An OpenAI-style streaming request, asking for usage so tokens are counted by the
/// server rather than guessed from chunks.
pub const DEFAULT_BODY: &str = r#"{
  "model": "firsttoken-demo",
  "stream": true,
  "stream_options": { "include_usage": true },
  "messages": [{ "role": "user", "content": "Say hello in a few words." }]
}"#;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Protocol {
    Quick,
    Session,
    Steady,
}

impl Protocol {
    const ALL: [Protocol; 3] = [Protocol::Quick, Protocol::Session, Protocol::Steady];

    fn name(self) -> &'static str {
        match self {
            Protocol::Quick => "quick",
            Protocol::Session => "session",
            Protocol::Steady => "steady",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Protocol::Quick => "Quick: every phase, about a minute",
            Protocol::Session => "Session: the full protocol, about 20 minutes",
            Protocol::Steady => "Only requests one after another",
        }
    }
}

/// On a loopback server, `{n}.localhost` names reach the same server under a new origin
/// each (browsers resolve every `*.localhost` to loopback), so fresh requests really get
/// new connections.
pub fn loopback_fresh_url(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    ["127.0.0.1", "localhost"].into_iter().find_map(|host| {
        let after = rest.strip_prefix(host)?;
        (after.starts_with(':') || after.starts_with('/'))
            .then(|| format!("http://{{n}}.localhost{after}"))
    })
}

/// The form's values.
#[derive(Clone)]
struct Form {
    title: String,
    url: String,
    fresh_url: String,
    label: String,
    version: String,
    dialect: Dialect,
    body: String,
    protocol: Protocol,
    requests: String,
    compare_url: String,
    compare_label: String,
    token: String,
    token_is_for_benchmark: bool,
    collector: String,
    run_tag_header: String,
}

fn target(
    label: &str,
    url: &str,
    dialect: &Dialect,
    body: &str,
    version: &str,
    fresh_url: &str,
) -> Result<TargetPlan, String> {
    let origin = browser::url_origin(url)?;
    let label = if label.trim().is_empty() {
        origin.split("://").nth(1).unwrap_or(&origin).to_owned()
    } else {
        label.trim().to_owned()
    };
    let mut t = TargetPlan::new(&label, url.trim(), dialect.clone(), body);
    if !version.trim().is_empty() {
        t.version = Some(version.trim().to_owned());
    }
    let page = browser::page_origin();
    if origin == page {
        // This server: its ping endpoint is the probe, and the demo reports its timing
        // breakdown at /server_timings.
        t.probe_url = Some(format!("{page}/api/v1/ping"));
        t.timings_pointer = Some("/server_timings".into());
    }
    t.fresh_url = Some(fresh_url.trim().to_owned()).filter(|f| !f.is_empty());
    Ok(t)
}

/// The study the form describes, named `study_id`, or what is wrong with the form.
fn build(form: &Form, study_id: String) -> Result<Study, String> {
    serde_json::from_str::<serde_json::Value>(&form.body)
        .map_err(|e| format!("Request body is not valid JSON: {e}"))?;
    let mut main = target(
        &form.label,
        &form.url,
        &form.dialect,
        &form.body,
        &form.version,
        &form.fresh_url,
    )
    .map_err(|e| format!("Target URL: {e}"))?;
    if !form.token.trim().is_empty() {
        main.headers.insert(
            "Authorization".into(),
            format!("Bearer {}", form.token.trim()),
        );
    }
    let compare = (!form.compare_url.trim().is_empty())
        .then(|| {
            target(
                &form.compare_label,
                &form.compare_url,
                &form.dialect,
                &form.body,
                "",
                "",
            )
        })
        .transpose()
        .map_err(|e| format!("Compare with: {e}"))?;
    let mut plan = match form.protocol {
        Protocol::Quick => Plan::quick(main),
        Protocol::Session => Plan::session(main, compare.clone().into_iter().collect()),
        Protocol::Steady => {
            let n = form
                .requests
                .trim()
                .parse()
                .ok()
                .filter(|n| (1..=1000).contains(n))
                .ok_or("Requests: enter a whole number from 1 to 1000")?;
            Plan::steady(main, n)
        }
    };
    if let Some(compare) = compare
        && form.protocol != Protocol::Session
    {
        plan.targets.push(compare);
        plan.phases.push(PhasePlan::Compare { rounds: 5 });
    }
    if !form.run_tag_header.trim().is_empty() {
        plan.run_tag = Some(RunTag::Header(form.run_tag_header.trim().to_owned()));
    }
    let own_collector = format!("{}{}", browser::page_origin(), collector::RUNS_PATH);
    let study = Study {
        title: form.title.trim().to_owned(),
        plan,
        collector: (form.collector.trim() != own_collector)
            .then(|| form.collector.trim().to_owned()),
        carries_token: form.token_is_for_benchmark,
        study_id: Some(study_id),
    };
    study.validate().map_err(|e| {
        if e.field.ends_with("fresh_url") {
            format!("Fresh-connection URL: {}", e.message)
        } else {
            format!("The study is not valid: {e}")
        }
    })?;
    Ok(study)
}

/// What a preset leaves out for want of a URL, in a sentence; `None` when nothing is.
fn left_out(protocol: Protocol, fresh_url: &str) -> Option<&'static str> {
    (matches!(protocol, Protocol::Quick | Protocol::Session) && fresh_url.trim().is_empty()).then_some(
        "Without a fresh-connection URL this protocol leaves out the requests on new connections: there is no way to force a new connection to the same host name.",
    )
}

fn link_to(study: &Study) -> String {
    format!("{}/run#{}", browser::page_origin(), study.to_fragment())
}

/// A new study id from the browser's cryptographic generator.
fn new_study_id() -> String {
    let random = Scope::current().random_bytes();
    let mut first = [0u8; 10];
    first.copy_from_slice(&random[..10]);
    study_id_from_random(first)
}

/// Where the runs of `study` can be read: the Results page of the server that collects
/// them, showing this link alone. `None` for a study without an id.
fn results_of(study: &Study) -> Option<String> {
    let id = study.study_id.as_ref()?;
    let server = study
        .collector
        .as_deref()
        .and_then(origin_of)
        .unwrap_or_else(browser::page_origin);
    Some(format!("{server}/results?study={id}"))
}

#[component]
pub fn ComposePage() -> impl IntoView {
    let origin = browser::page_origin();
    let title = RwSignal::new("Chat latency".to_owned());
    let url = RwSignal::new(format!("{origin}/v1/chat/completions"));
    let fresh_url = RwSignal::new(loopback_fresh_url(&url.get_untracked()).unwrap_or_default());
    // Follows the target URL (this server's `{n}.localhost` names) until edited by hand.
    let fresh_edited = RwSignal::new(false);
    let fresh_check = RwSignal::new(None::<Vec<CheckLine>>);
    let label = RwSignal::new("demo".to_owned());
    let version = RwSignal::new(String::new());
    let dialect = RwSignal::new(Dialect::OpenaiChat);
    let body = RwSignal::new(DEFAULT_BODY.to_owned());
    let protocol = RwSignal::new(Protocol::Quick);
    let requests = RwSignal::new("20".to_owned());
    let compare_url = RwSignal::new(String::new());
    let compare_label = RwSignal::new(String::new());
    let token = RwSignal::new(String::new());
    let token_is_for_benchmark = RwSignal::new(false);
    let collector_url = RwSignal::new(format!("{origin}{}", collector::RUNS_PATH));
    let run_tag_header = RwSignal::new(String::new());
    let link = RwSignal::new(None::<String>);
    let results = RwSignal::new(None::<String>);
    let json = RwSignal::new(String::new());
    let error = RwSignal::new(None::<String>);

    let show = move |study: Study| {
        json.set(serde_json::to_string_pretty(&study).unwrap_or_default());
        link.set(Some(link_to(&study)));
        results.set(results_of(&study));
        error.set(None);
    };
    let make = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let form = Form {
            title: title.get_untracked(),
            url: url.get_untracked(),
            fresh_url: fresh_url.get_untracked(),
            label: label.get_untracked(),
            version: version.get_untracked(),
            dialect: dialect.get_untracked(),
            body: body.get_untracked(),
            protocol: protocol.get_untracked(),
            requests: requests.get_untracked(),
            compare_url: compare_url.get_untracked(),
            compare_label: compare_label.get_untracked(),
            token: token.get_untracked(),
            token_is_for_benchmark: token_is_for_benchmark.get_untracked(),
            collector: collector_url.get_untracked(),
            run_tag_header: run_tag_header.get_untracked(),
        };
        match build(&form, new_study_id()) {
            Ok(study) => show(study),
            Err(message) => {
                link.set(None);
                error.set(Some(message));
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
    let check = move |_| {
        fresh_check.set(Some(vec![CheckLine::pending("Checking…")]));
        let (target, fresh, body) = (
            url.get_untracked(),
            fresh_url.get_untracked(),
            body.get_untracked(),
        );
        let dialect = dialect.get_untracked();
        leptos::task::spawn_local(async move {
            fresh_check.set(Some(check_fresh_url(&target, &fresh, &body, dialect).await));
        });
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
                    <span>"Target URL"</span>
                    <input type="url" data-testid="target-url" bind:value=url on:input=move |ev| {
                        if !fresh_edited.get_untracked() {
                            fresh_url.set(loopback_fresh_url(&event_target_value(&ev)).unwrap_or_default());
                        }
                    } />
                    <small>"Your streaming chat endpoint. The default is this server's built-in demo, which answers after 300 ms."</small>
                </label>
                <div class="wide fresh">
                    <label>
                        <span>"Fresh-connection URL (optional)"</span>
                        <input type="text" spellcheck="false" placeholder="https://{n}.fresh.chat.example.com/v1/chat" data-testid="fresh-url"
                            bind:value=fresh_url on:input=move |_| { fresh_edited.set(true); fresh_check.set(None); } />
                        <small>"The target's URL on a wildcard host name that reaches the same server, with {n} where a number goes: each request gets a host name never used before, the only way to force a new connection. Empty: new connections are not measured."</small>
                    </label>
                    <div class="actions">
                        <button type="button" data-testid="check-fresh" on:click=check disabled=move || fresh_url.with(|f| f.trim().is_empty())>"Check it reaches the same server"</button>
                    </div>
                    {move || fresh_check.get().map(|lines| view! {
                        <ul class="check-result" data-testid="fresh-check" aria-live="polite">
                            {lines.into_iter().map(|l| {
                                let class = l.class();
                                view! { <li class=class>{l.text}</li> }
                            }).collect::<Vec<_>>()}
                        </ul>
                    })}
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
                {move || left_out(protocol.get(), &fresh_url.get()).map(|note| view! {
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
                <label class="wide">
                    <span>"Compare with (optional)"</span>
                    <input type="url" placeholder="https://api.provider.example/v1/chat/completions" data-testid="compare-url" bind:value=compare_url />
                    <small>"The same requests to another endpoint, interleaved: the model provider directly, say. The difference is your app's own time."</small>
                </label>
                <Show when=move || !compare_url.with(String::is_empty)>
                    <label>
                        <span>"Its name"</span>
                        <input type="text" data-testid="compare-label" bind:value=compare_label />
                    </label>
                </Show>
                <label class="wide">
                    <span>"Benchmark token (optional)"</span>
                    <input type="text" autocomplete="off" spellcheck="false" data-testid="token" bind:value=token />
                    <small>"Sent as Authorization: Bearer … with each request. It travels in the link, so anyone with the link can use it: make one for this benchmark only."</small>
                </label>
                <Show when=move || !token.with(String::is_empty)>
                    <label class="check wide">
                        <input type="checkbox" data-testid="token-confirmed" bind:checked=token_is_for_benchmark />
                        "This token is for this benchmark only, and I accept that it travels in the link"
                    </label>
                </Show>
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
                    <button type="submit" class="primary" data-testid="make-link">"Make the link"</button>
                </div>
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
                <p class="status">{move || format!("{} characters. The study travels in the part after #, which browsers never send to a server.", link.with(|l| l.as_ref().map_or(0, String::len)))}</p>
                {move || link.get().map(|l| view! { <LinkQrCode link=l /> })}
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

/// The link as a QR code, for beta users who will open it on a phone, with a button that
/// saves it as an SVG file; where the link is too long for one, the reason instead.
#[component]
fn LinkQrCode(link: String) -> impl IntoView {
    match qr::link_qr(&link, QR_PX) {
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

/// One line of the fresh-URL check's answer.
#[derive(Debug, Clone)]
struct CheckLine {
    /// `None` while the check runs.
    ok: Option<bool>,
    text: String,
}

impl CheckLine {
    fn pending(text: &str) -> Self {
        Self {
            ok: None,
            text: text.to_owned(),
        }
    }

    fn class(&self) -> &'static str {
        match self.ok {
            None => "pending",
            Some(true) => "ok",
            Some(false) => "bad",
        }
    }
}

/// Sends the study's request to the target and to the fresh URL (under a host name picked
/// at random) with the engine's own code, and says whether the fresh one reached a server
/// that answers the same way on a connection of its own.
async fn check_fresh_url(
    target: &str,
    fresh: &str,
    body: &str,
    dialect: Dialect,
) -> Vec<CheckLine> {
    use crate::engine::{RequestSpec, RunContext, Scope, measure_alone};

    let fail = |text: String| {
        vec![CheckLine {
            ok: Some(false),
            text,
        }]
    };
    let mut probe_target = TargetPlan::new("check", target.trim(), dialect.clone(), body);
    probe_target.fresh_url = Some(fresh.trim().to_owned());
    let mut plan = Plan::steady(probe_target, 1);
    plan.phases.push(PhasePlan::Fresh { requests: 1 });
    if let Err(e) = plan.validate() {
        return fail(firsttoken_core::schema::clean_text(&e.to_string(), 300));
    }
    let scope = Scope::current();
    let number = u64::from(scope.random_bytes()[0]) * 1000 + u64::from(scope.random_bytes()[1]);
    let fresh_url = plan.main_target().fresh_url_for(number).unwrap_or_default();
    let spec = |url: &str| RequestSpec {
        url: url.to_owned(),
        body: Some(body.to_owned()),
        headers: Vec::new(),
        dialect: dialect.clone(),
        timings_pointer: None,
        timeout_ms: 30_000,
        stall_ms: None,
        send_cookies: false,
    };
    let context = RunContext {
        run_start: scope.performance().now(),
        ..RunContext::default()
    };
    let mut measured = Vec::new();
    for url in [target.trim(), fresh_url.as_str()] {
        measured.push(measure_alone(&scope, &spec(url), &context).await);
    }
    let (main, fresh) = (&measured[0], &measured[1]);
    let answered =
        |m: &crate::engine::Measured| m.sample.error.is_none() && m.sample.ttft_ms.is_some();
    let describe = |m: &crate::engine::Measured| match (&m.sample.error, m.sample.ttft_ms) {
        (None, Some(ttft)) => format!(
            "{} with an answer, first token after {}",
            m.sample.status,
            crate::format::ms(Some(ttft))
        ),
        _ => m
            .sample
            .error_message
            .clone()
            .unwrap_or_else(|| format!("HTTP {} without an answer", m.sample.status)),
    };
    let mut lines = Vec::new();
    if !answered(main) {
        return fail(format!(
            "The target itself did not answer: {}.",
            describe(main)
        ));
    }
    lines.push(CheckLine {
        ok: Some(answered(fresh) && fresh.sample.status == main.sample.status),
        text: if answered(fresh) {
            format!(
                "{fresh_url} answers as the target does: {} (the target: {}).",
                describe(fresh),
                describe(main)
            )
        } else {
            format!(
                "{fresh_url} did not answer: {}. Check that the wildcard host name resolves, has a certificate, and allows CORS from this page.",
                describe(fresh)
            )
        },
    });
    if answered(fresh) {
        let new = match (main.client_port, fresh.client_port) {
            (Some(a), Some(b)) => Some((
                a != b,
                format!("client port {b}, the target's {a}, from X-Firsttoken-Client-Port"),
            )),
            _ => fresh
                .sample
                .conn
                .as_ref()
                .and_then(|c| c.reused)
                .filter(|_| !fresh.preflighted)
                .map(|reused| (!reused, "from Resource Timing".to_owned())),
        };
        lines.push(match new {
            Some((true, how)) => CheckLine {
                ok: Some(true),
                text: format!("It ran on a new connection ({how})."),
            },
            Some((false, how)) => CheckLine {
                ok: Some(false),
                text: format!("It ran on a connection already in use ({how}): the browser shares connections between these host names."),
            },
            None => CheckLine {
                ok: None,
                text: "Whether it ran on a new connection cannot be seen from here: the target does not report the client's port in X-Firsttoken-Client-Port, and the CORS preflight hides the connection from Resource Timing. Runs will then give no figure for what a new connection costs.".to_owned(),
            },
        });
    }
    lines
}
