//! The runs kept on this device for upload, and where each one is: waiting to be sent,
//! sent (with a link to it, and a way to delete it from the collector), refused, or
//! deleted.

use leptos::prelude::*;
use leptos::task::spawn_local;

use crate::uploads::{Entry, State, Uploads};

#[component]
pub fn UploadsList() -> impl IntoView {
    let uploads = Uploads::get();
    let entries = uploads.entries;
    let kept = move || uploads.unavailable.with(Option::is_none);
    view! {
        <Show when=move || !entries.with(Vec::is_empty)>
            <section class="card" aria-labelledby="uploads-title" data-testid="uploads">
                <h2 id="uploads-title">{move || if kept() { "Results kept on this device" } else { "Results on this page (not kept on this device)" }}</h2>
                <p class="status">{move || if kept() {
                    "Each run you chose to send is kept here until the collector confirms it; it is sent again if the network or the collector was away. A sent run can be deleted from the collector here, with a key only this browser holds."
                } else {
                    "This browser keeps no data for this site, so these runs live only as long as this page: close it before one is sent and that run is lost. A sent run can be deleted from the collector here while the page is open."
                }}</p>
                <ul class="uploads">
                    {move || entries.get().into_iter().map(|entry| view! { <UploadEntry entry=entry /> }).collect::<Vec<_>>()}
                </ul>
            </section>
        </Show>
    }
}

#[component]
fn UploadEntry(entry: Entry) -> impl IntoView {
    let to = web_sys::Url::new(&entry.collector)
        .map(|u| u.host())
        .unwrap_or_else(|_| entry.collector.clone());
    let when = js_sys::Date::new(&entry.saved_at_ms.into())
        .to_locale_string("default", &wasm_bindgen::JsValue::UNDEFINED);
    let deleting = RwSignal::new(false);
    let delete_error = RwSignal::new(None::<String>);
    let can_delete = entry.deleting_token().is_some();
    let run_id = entry.run_id.clone();
    let delete = move |_| {
        let run_id = run_id.clone();
        deleting.set(true);
        delete_error.set(None);
        spawn_local(async move {
            if let Err(why) = Uploads::get().delete(&run_id).await {
                delete_error.set(Some(format!("Not deleted: {why}")));
            }
            deleting.set(false);
        });
    };
    let (class, state) = match &entry.state {
        State::Pending => (
            "pending",
            view! {
                <span>
                    {match &entry.last_error {
                        Some(why) => format!("waiting to be sent to {to} (attempt {}: {why})", entry.attempts),
                        None => format!("sending to {to}…"),
                    }}
                </span>
            }
            .into_any(),
        ),
        State::Sent { url, .. } => (
            "sent",
            view! {
                <span>"sent: " <a href=url.clone() data-testid="sent-link">"the stored run"</a></span>
                {can_delete.then(|| view! {
                    <button type="button" class="small" data-testid="delete-run"
                        disabled=move || deleting.get() on:click=delete.clone()>
                        {move || if deleting.get() { "Deleting…" } else { "Delete from the collector" }}
                    </button>
                })}
            }
            .into_any(),
        ),
        State::Refused { reason } => (
            "refused",
            view! { <span>{format!("not accepted: {reason}")}</span> }.into_any(),
        ),
        State::Deleted => (
            "deleted",
            view! { <span>{format!("deleted from {to}")}</span> }.into_any(),
        ),
    };
    view! {
        <li class=format!("upload {class}") data-testid="upload-entry" data-state=class data-run-id=entry.run_id.clone()>
            <strong>{entry.title.clone()}</strong>
            <span class="when">{String::from(when)}</span>
            {state}
            {move || delete_error.get().map(|e| view! { <span class="error" role="alert">{e}</span> })}
        </li>
    }
}
