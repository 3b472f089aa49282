//! The runs kept on this device for upload, and where each one is: waiting to be sent,
//! sent (with a link to it), or refused.

use leptos::prelude::*;

use crate::uploads::{State, Uploads};

#[component]
pub fn UploadsList() -> impl IntoView {
    let uploads = Uploads::get();
    let entries = uploads.entries;
    view! {
        <Show when=move || !entries.with(Vec::is_empty)>
            <section class="card" aria-labelledby="uploads-title" data-testid="uploads">
                <h2 id="uploads-title">"Results kept on this device"</h2>
                <p class="status">"Each run you chose to send is kept here until the collector confirms it; it is sent again if the network or the collector was away."</p>
                <ul class="uploads">
                    {move || entries.get().into_iter().map(|entry| {
                        let to = web_sys::Url::new(&entry.collector).map(|u| u.host()).unwrap_or_else(|_| entry.collector.clone());
                        let when = js_sys::Date::new(&entry.saved_at_ms.into()).to_locale_string("default", &wasm_bindgen::JsValue::UNDEFINED);
                        let (class, state) = match &entry.state {
                            State::Pending => ("pending", view! {
                                <span>
                                    {match &entry.last_error {
                                        Some(why) => format!("waiting to be sent to {to} (attempt {}: {why})", entry.attempts),
                                        None => format!("sending to {to}…"),
                                    }}
                                </span>
                            }.into_any()),
                            State::Sent { url, .. } => ("sent", view! {
                                <span>"sent: " <a href=url.clone() data-testid="sent-link">"the stored run"</a></span>
                            }.into_any()),
                            State::Refused { reason } => ("refused", view! { <span>{format!("not accepted: {reason}")}</span> }.into_any()),
                        };
                        view! {
                            <li class=format!("upload {class}") data-testid="upload-entry" data-state=class data-run-id=entry.run_id.clone()>
                                <strong>{entry.title.clone()}</strong>
                                <span class="when">{String::from(when)}</span>
                                {state}
                            </li>
                        }
                    }).collect::<Vec<_>>()}
                </ul>
            </section>
        </Show>
    }
}
