//! The link: how the form's study becomes one (signed by this server with the admin
//! token, or anyone's), and the card that shows it, with its QR code, what the target
//! check says of it, where its runs can be read and the study as JSON.

use firsttoken_core::share::Study;
use firsttoken_pages::compose::{LocalOnly, local_only, results_of};
use firsttoken_pages::qr;
use leptos::prelude::*;

use super::checklist::link_check_note;
use super::state::{Compose, new_study_id, on_this_page};
use crate::platform::Scope;
use crate::{browser, collector};

fn link_to(study: &Study) -> String {
    format!("{}/run#{}", browser::app_root(), study.to_fragment())
}

/// Make the link: the study the form describes, as a link, or the field at fault.
pub(super) fn make(state: Compose) {
    match state.build() {
        Ok(study) => show(state, study),
        Err(e) => state.outcome.update(|o| {
            o.link = None;
            o.error = Some(e.to_string());
        }),
    }
}

/// Shows `study` and its link. With the admin token the server signs the link; without
/// it the link is anyone's, and one that sends cookies cannot be made.
fn show(state: Compose, study: Study) {
    let outcome = state.outcome;
    outcome.update(|o| {
        o.json = serde_json::to_string_pretty(&study).unwrap_or_default();
        o.results = on_this_page(|page| results_of(&study, page));
        o.error = None;
        o.link = None;
    });
    let admin = state
        .aside
        .with_untracked(|a| a.admin_token.trim().to_owned());
    if admin.is_empty() {
        if study.plan.targets.iter().any(|t| t.send_cookies) {
            state.fail("A link that sends this browser's cookies must be signed: enter this server's admin token.".into());
            return;
        }
        outcome.update(|o| {
            o.signed = false;
            o.link = Some(link_to(&study));
        });
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
            Ok(answer) => outcome.update(|o| {
                o.signed = true;
                o.link = Some(format!("{}/run#{}", browser::app_root(), answer.fragment));
            }),
            Err(e) => state.fail(format!("The link could not be signed: {e}")),
        }
    });
}

/// Makes the link from the study as JSON, edited by hand.
fn from_json(state: Compose) {
    match state
        .outcome
        .with_untracked(|o| serde_json::from_str::<Study>(&o.json))
    {
        // A study written by hand gets an id, so its runs can be read apart too; one that
        // has an id keeps it (the same link, edited).
        Ok(mut study) => {
            study.study_id = study.study_id.or_else(|| Some(new_study_id()));
            match study.validate() {
                Ok(()) => show(state, study),
                Err(e) => state.fail(format!("The study is not valid: {e}")),
            }
        }
        Err(e) => state.fail(format!("The JSON is not a study: {e}")),
    }
}

/// The link card, once a link is made.
#[component]
pub(super) fn LinkCard(state: Compose) -> impl IntoView {
    let Compose {
        checked, outcome, ..
    } = state;
    let link = Memo::new(move |_| outcome.with(|o| o.link.clone()));
    let signed = Memo::new(move |_| outcome.with(|o| o.signed));
    let results = Memo::new(move |_| outcome.with(|o| o.results.clone()));
    let copy = move |_| {
        if let (Some(link), Some(window)) = (link.get_untracked(), web_sys::window()) {
            let _ = window.navigator().clipboard().write_text(&link);
        }
    };

    view! {
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
                    <textarea rows="16" spellcheck="false" data-testid="study-json" bind:value=slice!(outcome.json)></textarea>
                    <button type="button" data-testid="use-json" on:click=move |_| from_json(state)>"Make the link from this JSON"</button>
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
