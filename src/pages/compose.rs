//! The operator's page: describe what to measure and get a link to share with beta users.
//! The form covers the usual study; the study as JSON covers everything (several request
//! bodies, headers, custom stream formats, hand-made phases).
//!
//! The page's state is made once, as one `Compose` (the `state` module): the form's values
//! as one [`firsttoken_pages::compose::Form`], with what the page keeps beside them. Each
//! section of the form, and the link card, is a component in its own file that takes it
//! whole.

use leptos::prelude::*;

mod access;
mod actions;
mod checklist;
mod compare;
mod delivery;
mod link;
mod protocol;
mod request;
mod state;
mod target;

use access::AccessFields;
use actions::FormActions;
use compare::CompareFields;
use delivery::DeliveryFields;
use link::LinkCard;
use protocol::ProtocolFields;
use request::RequestFields;
use state::Compose;
pub use state::DEFAULT_BODY;
use target::TargetFields;

#[component]
pub fn ComposePage() -> impl IntoView {
    let state = Compose::new();
    let make = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        link::make(state);
    };

    view! {
        <section class="card" aria-labelledby="compose-title">
            <h2 id="compose-title">"Make a link for your beta users"</h2>
            <p class="status">"Describe what to measure; share the link. Each person who opens it runs the measurement in their own browser, on their own network, and chooses whether to send you the results."</p>
            <form class="setup" on:submit=make novalidate>
                <TargetFields state=state />
                <ProtocolFields state=state />
                <RequestFields state=state />
                <CompareFields state=state />
                <AccessFields state=state />
                <DeliveryFields state=state />
                <FormActions state=state />
            </form>
        </section>
        <LinkCard state=state />
    }
}
