//! The compose form's end: Check the target and Make the link, the target check's
//! checklist, and what is wrong with the form.

use firsttoken_pages::check;
use leptos::prelude::*;

use super::checklist::{Checked, Checklist};
use super::state::Compose;
use crate::target_check;

/// Checks the target: sends the study the form describes now, as the runs will, and
/// keeps what the check found.
fn check_target(state: Compose) {
    let study = match state.build() {
        Ok(study) => study,
        Err(e) => {
            state.fail(e.to_string());
            return;
        }
    };
    state.outcome.update(|o| o.error = None);
    let checked = state.checked;
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
}

/// The form's two buttons (the second submits it), the checklist once the target is
/// checked, and the form's error.
#[component]
pub(super) fn FormActions(state: Compose) -> impl IntoView {
    let checked = state.checked;
    let outcome = state.outcome;
    let error = Memo::new(move |_| outcome.with(|o| o.error.clone()));

    view! {
        <div class="actions wide">
            <button type="button" data-testid="check-target" on:click=move |_| check_target(state)
                disabled=move || checked.with(|c| matches!(c, Some(Checked::Running { .. })))>"Check the target"</button>
            <button type="submit" class="primary" data-testid="make-link">"Make the link"</button>
        </div>
        {move || checked.get().map(|c| view! { <Checklist checked=c /> })}
        <Show when=move || error.with(Option::is_some)>
            <p class="error wide" role="alert" data-testid="compose-error">{move || error.get()}</p>
        </Show>
    }
}
