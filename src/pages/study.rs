//! The page a beta user opens from a share link: what will happen and what is uploaded,
//! one Start button, the run live, and the results, kept and uploaded if they chose so.

use firsttoken_core::plan::Plan;
use firsttoken_core::schema::{NetworkLabel, Run};
use firsttoken_core::share::Study;
use firsttoken_pages::landing;
use firsttoken_pages::landing::{Landing, Provenance};
use firsttoken_pages::progress::Progress;
use leptos::prelude::*;
use leptos::task::spawn_local;
use wasm_bindgen::prelude::*;

use crate::components::axis::phase_title;
use crate::components::live::{ConcurrencyChart, PhaseDistributions, Timeline};
use crate::components::report_view::ReportView;
use crate::components::uploads_list::UploadsList;
use crate::components::waterfall::Waterfall;
use crate::components::{SamplesTable, Summary};
use crate::platform::Scope;
use crate::session::{Session, Status};
use crate::uploads::{Entry, State, Uploads};
use crate::{browser, collector};

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
    match landing::open(&hash, &browser::page_origin()) {
        Ok(link) => view! { <CheckedStudy link=link /> }.into_any(),
        Err(error) => broken_link(error.to_string()).into_any(),
    }
}

fn broken_link(error: String) -> impl IntoView {
    view! {
        <section class="card" data-testid="broken-link" role="alert">
            <h2>"This link cannot be opened"</h2>
            <p class="error" data-testid="broken-link-reason">{crate::format::sentence(&error)}</p>
            <p>"Ask whoever sent it for a new link, and open it whole: some apps cut long links short."</p>
        </section>
    }
}

/// Asks the page's own server who made the link, then shows the landing, or says why
/// this link may not run here (it asks for this browser's cookies and its operator did
/// not sign it for that). Until the answer comes the landing says it is checking, and
/// Start waits.
#[component]
fn CheckedStudy(link: firsttoken_core::share::Link) -> impl IntoView {
    let provenance = RwSignal::new(Provenance::Checking);
    let fragment = link.fragment();
    spawn_local(async move {
        let url = format!(
            "{}{}",
            browser::app_root(),
            firsttoken_core::api::CHECK_PATH
        );
        let answer = match collector::check_link(&Scope::current(), &url, &fragment).await {
            Ok(check) => Provenance::of(check),
            Err(e) => Provenance::unanswered(&e.to_string()),
        };
        provenance.set(answer);
    });
    let host = web_sys::window()
        .and_then(|w| w.location().host().ok())
        .unwrap_or_default();
    let study = link.study;
    let refused = {
        let study = study.clone();
        Memo::new(move |_| {
            provenance.with(|p| match p {
                Provenance::Checking => None,
                answered => landing::admit(&study, answered, &host).err(),
            })
        })
    };
    move || match refused.get() {
        Some(reason) => broken_link(reason).into_any(),
        None => view! { <StudyView study=study.clone() provenance=provenance /> }.into_any(),
    }
}

/// The network the browser says it is on, where it says (Chrome on Android does); the
/// landing painter (`paint/`) guesses the same way.
fn network_hint() -> NetworkLabel {
    let kind = web_sys::window()
        .and_then(|w| js_sys::Reflect::get(&w.navigator(), &"connection".into()).ok())
        .filter(|c| c.is_object())
        .and_then(|c| js_sys::Reflect::get(&c, &"type".into()).ok())
        .and_then(|t| t.as_string());
    NetworkLabel::guess(kind.as_deref())
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
fn StudyView(study: Study, provenance: RwSignal<Provenance>) -> impl IntoView {
    let session = Session::new();
    let network = RwSignal::new(network_hint());
    let consent = RwSignal::new(false);
    let page_host = web_sys::window()
        .and_then(|w| w.location().host().ok())
        .unwrap_or_default();
    let words = Landing::of(
        &study,
        firsttoken_pages::page::Page {
            origin: &browser::page_origin(),
            host: &page_host,
            base_path: &browser::base_path(),
        },
        &Provenance::Checking,
    );
    let host_named = StoredValue::new(page_host.clone());
    let collector_url = words.collector_url.clone();
    // Shown in two places that each need their own copy: a stored value is Copy.
    let collector_host = StoredValue::new(words.collector_host.clone());
    let uploads = Uploads::get();
    let save_problem = RwSignal::new(None::<String>);

    let plan = study.plan.clone();
    let run_total = Signal::stored(u32::try_from(plan.total_requests()).unwrap_or(u32::MAX));
    let others_compared = plan.targets.len() > 1;
    let charts_off = crate::session::query_has("charts=off");

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
            // Start waits for the page's server to say who made the link.
            if provenance.with_untracked(|p| *p == Provenance::Checking) {
                return;
            }
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
            <h2 id="study-title" data-testid="study-title">{words.title}</h2>
            <p class="lead">
                {landing::LEAD_START}
                <strong>{words.target_label}</strong>
                {words.target_origin}
                {landing::LEAD_MIDDLE}
                {words.lead_end}
            </p>
            <Show when=idle>
                <p class=move || provenance.with(|p| match p {
                        Provenance::Operator { .. } => "notice provenance operator",
                        _ => "notice provenance",
                    })
                    data-testid="provenance"
                    data-made-by=move || provenance.with(|p| match p {
                        Provenance::Checking => "checking",
                        Provenance::Operator { .. } => "operator",
                        Provenance::Anyone { .. } => "anyone",
                    })
                    role="note">
                    {move || provenance.with(|p| p.words(&host_named.get_value()))}
                </p>
                {words.session_notice.clone().map(|notice| view! {
                    <p class="notice" data-testid="session-notice" role="note">{notice}</p>
                })}
                {words.token_notice.clone().map(|notice| view! {
                    <p class="notice" data-testid="token-notice" role="note">{notice}</p>
                })}
                <form class="start" on:submit=start.clone()>
                    <fieldset class="networks">
                        <legend>{landing::NETWORK_QUESTION}</legend>
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
                        {words.consent.clone()}
                    </label>
                    // Start comes when the page's server has said who made the link.
                    {move || if provenance.with(|p| *p == Provenance::Checking) {
                        view! { <button type="button" class="primary big" disabled data-testid="start-waiting">{landing::START}</button> }.into_any()
                    } else {
                        view! { <button type="submit" class="primary big" data-testid="start-button">{landing::START}</button> }.into_any()
                    }}
                </form>
                <div class="landing-details">
                    <div>
                        <h3>{landing::WHAT_IT_DOES}</h3>
                        <ul>{words.phases.iter().map(|p| view! { <li>{p.clone()}</li> }).collect::<Vec<_>>()}</ul>
                        {words.compared.clone().map(|compared| view! { <p class="status">{compared}</p> })}
                        <p class="status" data-testid="hosts">{words.hosts.clone()}</p>
                        <p class="status">{landing::CANCEL}</p>
                    </div>
                    <div>
                        <h3>{landing::WHAT_IS_SENT}</h3>
                        <ul>{landing::SENT.map(|line| view! { <li>{line}</li> })}</ul>
                        <h3>{landing::WHAT_IS_NEVER_SENT}</h3>
                        <ul>{landing::NEVER_SENT.map(|line| view! { <li>{line}</li> })}</ul>
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
                            let json = firsttoken_pages::pretty::pretty_json(&serde_json::to_string(&run).unwrap_or_default());
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
