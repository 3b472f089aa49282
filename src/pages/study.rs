//! The page a beta user opens from a share link: what will happen and what is uploaded,
//! one Start button, the run live, and the results, kept and uploaded if they chose so.

use firsttoken_core::plan::PhasePlan;
use firsttoken_core::progress::Progress;
use firsttoken_core::schema::origin_of;
use firsttoken_core::share::Study;
use firsttoken_core::{NetworkLabel, Plan, Run};
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::prelude::*;

use crate::browser;
use crate::collector;
use crate::components::axis::phase_title;
use crate::components::live::{ConcurrencyChart, PhaseDistributions, Timeline, Waterfall};
use crate::components::report_view::ReportView;
use crate::components::uploads_list::UploadsList;
use crate::components::{SamplesTable, Summary};
use crate::platform::Scope;
use crate::session::{Session, Status};
use crate::uploads::{Entry, State, Uploads};

/// A typical chat answer's length, for the duration estimate.
const TYPICAL_REQUEST_S: f64 = 1.5;

#[component]
pub fn StudyPage() -> impl IntoView {
    let hash = web_sys::window()
        .and_then(|w| w.location().hash().ok())
        .unwrap_or_default();
    // A new link pasted into this tab changes only the part after #: read it afresh.
    let on_hash_change = Closure::<dyn FnMut()>::new(|| {
        if let Some(w) = web_sys::window() {
            let _ = w.location().reload();
        }
    });
    if let Some(w) = web_sys::window() {
        let _ = w.add_event_listener_with_callback(
            "hashchange",
            on_hash_change.as_ref().unchecked_ref(),
        );
    }
    on_hash_change.forget();
    // Cookies go only to the page's own origin (`credentials: "same-origin"`): a link
    // that asks for them elsewhere asks for what the page will not do.
    let page = crate::browser::page_origin();
    let opened = Study::from_fragment(&hash).map_err(|e| e.to_string()).and_then(|study| {
        match study
            .plan
            .targets
            .iter()
            .find(|t| t.send_cookies && origin_of(&t.url).as_deref() != Some(page.as_str()))
        {
            Some(t) => Err(format!(
                "target {:?} asks for this browser's cookies, but they are sent only to the page's own origin ({page}), and it is on another",
                t.label
            )),
            None => Ok(study),
        }
    });
    match opened {
        Ok(study) => view! { <StudyView study=study /> }.into_any(),
        Err(error) => view! {
            <section class="card" data-testid="broken-link" role="alert">
                <h2>"This link cannot be opened"</h2>
                <p class="error" data-testid="broken-link-reason">{crate::format::sentence(&error)}</p>
                <p>"Ask whoever sent it for a new link, and open it whole: some apps cut long links short."</p>
            </section>
        }
        .into_any(),
    }
}

/// The phase in words, for the landing.
fn phase_words(phase: &PhasePlan, others: &[String]) -> String {
    let plural = |n: u32, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    match phase {
        PhasePlan::Probe { requests } => format!(
            "{} to time the network round trip",
            plural(*requests, "small request", "small requests")
        ),
        PhasePlan::Warmup { requests } => format!(
            "{} to open the connection (not counted)",
            plural(*requests, "request", "requests")
        ),
        PhasePlan::Steady { requests } => format!(
            "{} one after another",
            plural(*requests, "chat request", "chat requests")
        ),
        PhasePlan::Fresh { requests } => format!(
            "{}, each on a new connection",
            plural(*requests, "request", "requests")
        ),
        PhasePlan::Concurrency {
            levels,
            requests_per_level,
        } => format!(
            "requests in groups sent at the same time ({} at once; about {requests_per_level} each)",
            levels
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PhasePlan::Cold { idle_ms } => format!(
            "after waiting idle ({}), one request each",
            idle_ms
                .iter()
                .map(|ms| crate::format::wait(u64::from(*ms)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PhasePlan::Compare { rounds } => {
            format!("{rounds} rounds comparing with {}", others.join(", "))
        }
    }
}

/// "about 2 minutes", from a typical answer's length and the idle waits.
fn duration_estimate(plan: &Plan) -> String {
    let seconds = plan.expected_seconds(TYPICAL_REQUEST_S);
    if seconds < 60.0 {
        "under a minute".to_owned()
    } else {
        let minutes = (seconds / 60.0).ceil() as u32;
        format!(
            "about {minutes} minute{}",
            if minutes == 1 { "" } else { "s" }
        )
    }
}

/// The network the browser says it is on, where it says (Chrome on Android does).
fn network_hint() -> NetworkLabel {
    let kind = web_sys::window()
        .and_then(|w| js_sys::Reflect::get(&w.navigator(), &"connection".into()).ok())
        .filter(|c| c.is_object())
        .and_then(|c| js_sys::Reflect::get(&c, &"type".into()).ok())
        .and_then(|t| t.as_string());
    match kind.as_deref() {
        Some("cellular") => NetworkLabel::Cellular,
        Some("wifi") => NetworkLabel::Wifi,
        _ => NetworkLabel::Unknown,
    }
}

/// "about 40 s left", from how long requests have taken so far and the idle waits ahead.
/// Reads the samples in place: this runs at each tick and each sample while requests are
/// in flight, and a copy of every sample each time would be work the page does mid-batch.
fn time_left(plan: &Plan, session: &Session, now: f64) -> Option<String> {
    let total = session.progress.get()?.total;
    let (requests_done, idle_done_ms) = session.samples.with(|samples| {
        let idle: f64 = samples
            .iter()
            .filter_map(|s| s.idle_ms)
            .map(f64::from)
            .sum();
        (samples.len(), idle)
    });
    let progress = Progress {
        elapsed_ms: now - session.started.get(),
        requests_done,
        requests_total: total as usize,
        idle_done_ms,
        idle_total_ms: Progress::idle_total_ms(plan),
    };
    Some(progress.words())
}

/// Offers `text` as a file download.
fn download(name: &str, mime: &str, text: &str) {
    let parts = js_sys::Array::of1(&JsValue::from_str(text));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let Ok(blob) = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options) else {
        return;
    };
    let Ok(url) = web_sys::Url::create_object_url_with_blob(&blob) else {
        return;
    };
    if let Some(document) = web_sys::window().and_then(|w| w.document())
        && let Ok(link) = document.create_element("a")
    {
        let _ = link.set_attribute("href", &url);
        let _ = link.set_attribute("download", name);
        if let Some(link) = link.dyn_ref::<web_sys::HtmlElement>() {
            link.click();
        }
    }
    let _ = web_sys::Url::revoke_object_url(&url);
}

#[component]
fn StudyView(study: Study) -> impl IntoView {
    let session = Session::new();
    let network = RwSignal::new(network_hint());
    let consent = RwSignal::new(false);
    let collector_url = study
        .collector
        .clone()
        .unwrap_or_else(|| format!("{}{}", browser::app_root(), collector::RUNS_PATH));
    // Shown in two places that each need their own copy: a stored value is Copy.
    let collector_host = StoredValue::new(
        firsttoken_core::schema::origin_of(&collector_url)
            .map(|o| o.split("://").nth(1).unwrap_or(&o).to_owned())
            .unwrap_or_else(|| collector_url.clone()),
    );
    let uploads = Uploads::get();
    let save_problem = RwSignal::new(None::<String>);

    let plan = study.plan.clone();
    let targets: Vec<(String, String)> = plan
        .targets
        .iter()
        .map(|t| {
            (
                t.label.clone(),
                firsttoken_core::schema::origin_of(&t.url).unwrap_or_default(),
            )
        })
        .collect();
    let others: Vec<String> = targets.iter().skip(1).map(|(l, _)| l.clone()).collect();
    let hosts = plan.hosts().join(", ");
    let phases = plan
        .phases
        .iter()
        .map(|p| view! { <li>{phase_words(p, &others)}</li> })
        .collect::<Vec<_>>();
    let total = plan.total_requests();
    let run_total = Signal::stored(u32::try_from(total).unwrap_or(u32::MAX));
    let others_compared = plan.targets.len() > 1;
    let charts_off = crate::session::query_has("charts=off");
    let duration = duration_estimate(&plan);
    let secrets = study.secret_headers();
    // The host whose session the requests use, when the study sends the page's cookies
    // (the page's own host: the link was refused otherwise).
    let session_host = study
        .plan
        .targets
        .iter()
        .any(|t| t.send_cookies)
        .then(|| web_sys::window().and_then(|w| w.location().host().ok()))
        .flatten();

    let upload = {
        let (title, collector_url) = (study.title.clone(), collector_url.clone());
        Callback::new(move |run: Run| {
            let entry = Entry::new(
                run.run_id.clone(),
                title.clone(),
                collector_url.clone(),
                serde_json::to_string(&run).unwrap_or_default(),
            );
            spawn_local(async move {
                if let Err(why) = Uploads::get().add(entry).await {
                    save_problem.set(Some(format!(
                        "The results could not be kept on this device: {why}. They are sent from memory only, so if this page closes before they are sent, they are lost."
                    )));
                }
            });
        })
    };
    let start = {
        let (plan, study_id) = (plan.clone(), study.study_id.clone());
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            session.start(
                plan.clone(),
                study_id.clone(),
                network.get_untracked(),
                move |run| {
                    if consent.get_untracked() {
                        upload.run(run);
                    }
                },
            );
        }
    };

    // A clock for the time left, ticking while the run goes on.
    let now = RwSignal::new(0.0);
    let tick = Closure::<dyn FnMut()>::new(move || now.set(Scope::current().performance().now()));
    let _ = Scope::current().set_interval(&tick, 1000);
    tick.forget();

    let progress = {
        let plan = plan.clone();
        Memo::new(move |_| {
            let p = session.progress.get()?;
            let doing = match p.idle_ms {
                Some(idle) => format!(
                    "waiting {} idle before one request",
                    crate::format::wait(u64::from(idle))
                ),
                None => format!(
                    "request {} of {}",
                    (session.samples.with(Vec::len) + 1).min(p.total as usize),
                    p.total
                ),
            };
            let left = time_left(&plan, &session, now.get()).unwrap_or_default();
            Some(format!(
                "Part {} of {} ({}): {doing} · {left}",
                p.phase_number,
                p.phases,
                phase_title(p.phase)
            ))
        })
    };
    let fraction = move || match session.status.get() {
        Status::Finished { cancelled: false } => 1.0,
        // Progress messages come at each phase's start; the samples, as each request ends.
        _ => session.progress.get().map_or(0.0, |p| {
            session.samples.with(Vec::len) as f64 / f64::from(p.total.max(1))
        }),
    };

    let this_upload = move || {
        let run_id = session
            .record
            .with(|r| r.as_ref().map(|r| r.run_id.clone()))?;
        uploads
            .entries
            .with(|all| all.iter().find(|e| e.run_id == run_id).cloned())
    };
    let idle = move || session.status.get() == Status::Idle;
    let samples = session.samples;

    view! {
        <section class="card landing" aria-labelledby="study-title">
            <h2 id="study-title" data-testid="study-title">{study.title.clone()}</h2>
            <p class="lead">
                "This page measures how long "
                <strong>{targets[0].0.clone()}</strong>
                {format!(" ({}) ", targets[0].1)}
                "takes to start answering you, from this browser and this network: "
                {format!("{total} requests, {duration}.")}
            </p>
            <Show when=idle>
                {session_host.clone().map(|host| view! {
                    <p class="notice" data-testid="session-notice" role="note">
                        {format!("This measurement uses your signed-in session with {host}: this browser's cookies for {host} go with each request to it, as they do when you use it. They are never uploaded.")}
                    </p>
                })}
                {(!secrets.is_empty()).then(|| view! {
                    <p class="notice" data-testid="token-notice" role="note">
                        {format!(
                            "This link carries an access token for the measured service ({}), which the person who sent it says is for this benchmark only. It goes to that service with each request and is never uploaded.",
                            secrets.join(", ")
                        )}
                    </p>
                })}
                <form class="start" on:submit=start.clone()>
                    <fieldset class="networks">
                        <legend>"Which network are you on?"</legend>
                        {NetworkLabel::ALL.into_iter().map(|n| view! {
                            <label class="check">
                                <input type="radio" name="network" value=n.name() data-testid=format!("network-{}", n.name())
                                    prop:checked=move || network.get() == n
                                    on:change=move |_| network.set(n) />
                                {n.title()}
                            </label>
                        }).collect::<Vec<_>>()}
                    </fieldset>
                    <label class="check consent">
                        <input type="checkbox" data-testid="consent" bind:checked=consent />
                        {format!("Send the results to {} when the run finishes (what is and is not sent: below)", collector_host.get_value())}
                    </label>
                    <button type="submit" class="primary big" data-testid="start-button">"Start"</button>
                </form>
                <div class="landing-details">
                    <div>
                        <h3>"What it does"</h3>
                        <ul>{phases.clone()}</ul>
                        {(!others.is_empty()).then(|| view! {
                            <p class="status">{format!("Compared with: {}.", targets.iter().skip(1).map(|(l, o)| format!("{l} ({o})")).collect::<Vec<_>>().join(", "))}</p>
                        })}
                        <p class="status" data-testid="hosts">
                            {format!("This browser sends requests to {hosts}, and nowhere else")}
                            {format!(" (the results go to {} only if you agree above).", collector_host.get_value())}
                        </p>
                        <p class="status">"You can cancel at any time; what finished is kept."</p>
                    </div>
                    <div>
                        <h3>"What is sent, if you agree"</h3>
                        <ul>
                            <li>"the times each request took, its status, and how it ended"</li>
                            <li>"the target's address (its origin, not the full address)"</li>
                            <li>"the network you pick above, and what your browser says of it (type, round trip, speed)"</li>
                            <li>"your browser's name and major version, your operating system, phone or not"</li>
                            <li>"how precise your browser's clock was, and which of the features this page reads it lacks"</li>
                        </ul>
                        <h3>"What is never sent"</h3>
                        <ul>
                            <li>"your IP address (the collector keeps none, not even in its logs)"</li>
                            <li>"your full browser identification string, or any cookie"</li>
                            <li>"API keys, or the text of the questions and answers"</li>
                        </ul>
                    </div>
                </div>
            </Show>
        </section>

        <Show when=move || !idle()>
            <section class="card" aria-labelledby="live-title">
                <h2 id="live-title">{move || match session.status.get() {
                    Status::Finished { cancelled: true } => "Cancelled",
                    Status::Finished { cancelled: false } | Status::Invalid(_) => "Done",
                    _ => "Measuring",
                }}</h2>
                <div class="progress-row">
                    <progress max="1" prop:value=fraction aria-label="Progress"></progress>
                    <Show when=move || session.running()>
                        <button type="button" data-testid="cancel-button" on:click=move |_| session.cancel()>"Cancel"</button>
                    </Show>
                </div>
                <p class="status" role="status" aria-live="polite" data-testid="run-status">
                    {move || match session.status.get() {
                        Status::Running => progress.get().unwrap_or_else(|| "Starting…".to_owned()),
                        Status::Finished { cancelled } => {
                            let (all, counted) = samples.with(|all| {
                                (all.len(), all.iter().filter(|s| s.counts_for_latency()).count())
                            });
                            format!(
                                "{} {all} requests; {counted} of them count in the results (network probes and warm-up do not{}).",
                                if cancelled { "Cancelled after" } else { "Finished" },
                                if others_compared { ", nor requests to the other targets" } else { "" },
                            )
                        }
                        Status::Invalid(why) => format!("The run finished but its record is not valid: {why}"),
                        Status::Idle => String::new(),
                    }}
                </p>
                // `?charts=off` leaves the page still while the engine measures: the
                // benchmark's "UI idle" case, against which the charts' cost shows.
                <Show when=move || !charts_off>
                    <Summary samples=samples />
                    <div class="live-grid">
                        <Timeline samples=samples total=run_total />
                        <PhaseDistributions samples=samples />
                        <ConcurrencyChart samples=samples />
                        <Waterfall samples=samples />
                    </div>
                    <details class="requests">
                        <summary>"Every request"</summary>
                        <SamplesTable samples=samples />
                    </details>
                </Show>
            </section>
        </Show>

        <Show when=move || session.record.with(Option::is_some)>
            <section class="card" aria-labelledby="results-title">
                <h2 id="results-title">"Results"</h2>
                {move || session.record.get().map(|run| view! { <ReportView run=run /> })}
                <div class="upload" data-testid="upload-status">
                    {
                        move || {
                            let collector_host = collector_host.get_value();
                            if let Status::Invalid(why) = session.status.get() {
                                return view! {
                                    <span class="error" data-testid="upload-impossible">
                                        {format!("These results cannot be sent ({why}). You can still download them below.")}
                                    </span>
                                }.into_any();
                            }
                            match this_upload() {
                                None => view! {
                                    <button type="button" data-testid="upload-button" on:click=move |_| {
                                        if let Some(run) = session.record.get_untracked() { upload.run(run) }
                                    }>"Send the results"</button>
                                    <span class="status">{format!("Not sent: nothing leaves this browser unless you press it. They go to {collector_host}.")}</span>
                                }.into_any(),
                                Some(entry) => match entry.state {
                                    State::Pending => view! {
                                        <span class="status" data-testid="upload-pending">
                                            {match entry.last_error {
                                                Some(why) => format!("Kept on this device and waiting to be sent ({why}). It will be sent when the collector answers, now or on your next visit."),
                                                None => "Sending…".to_owned(),
                                            }}
                                        </span>
                                    }.into_any(),
                                    State::Sent { url, .. } => view! {
                                        <span class="status">"Sent. Thank you! " <a href=url data-testid="stored-run-link">"The stored results"</a></span>
                                    }.into_any(),
                                    State::Refused { reason } => view! {
                                        <span class="error" data-testid="upload-refused">{format!("The collector did not accept the results: {reason}")}</span>
                                    }.into_any(),
                                    State::Deleted => view! {
                                        <span class="status" data-testid="upload-deleted">"Sent, then deleted from the collector at your request."</span>
                                    }.into_any(),
                                },
                            }
                        }
                    }
                    {move || save_problem.get().map(|p| view! { <p class="error" role="alert" data-testid="save-problem">{p}</p> })}
                </div>
                <div class="exports">
                    <button type="button" data-testid="export-json" on:click=move |_| {
                        if let Some(run) = session.record.get_untracked() {
                            let json = serde_json::to_string_pretty(&run).unwrap_or_default();
                            download(&format!("firsttoken-{}.json", run.run_id), "application/json", &json);
                        }
                    }>"Download JSON"</button>
                    <button type="button" data-testid="export-csv" on:click=move |_| {
                        if let Some(run) = session.record.get_untracked() {
                            let csv = firsttoken_core::export::samples_csv(&run);
                            download(&format!("firsttoken-{}.csv", run.run_id), "text/csv", &csv);
                        }
                    }>"Download CSV"</button>
                </div>
            </section>
        </Show>
        <UploadsList />
    }
}
