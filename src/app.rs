//! The two apps and their shell: header, the page the address names, footer.
//!
//! Three pages need no router: each is its own address (`/`, `/run` and `/results`), and
//! the server answers every app address with an app. The beta user's `/run` is its own
//! bundle ([`RunApp`]), the operator's pages another ([`App`]).

use firsttoken_pages::landing;
use leptos::prelude::*;

use crate::pages::{ComposePage, ResultsPage, StudyPage};
use crate::uploads::Uploads;

/// Which of the app's pages the address names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    /// The operator's: make a link.
    Compose,
    /// The beta user's: a study from a link.
    Study,
    /// The operator's: the crowd's numbers.
    Results,
}

fn current_route() -> Route {
    let path = web_sys::window()
        .and_then(|w| w.location().pathname().ok())
        .unwrap_or_default();
    let path = path.trim_end_matches('/');
    if path.ends_with("/results") {
        Route::Results
    } else if path.ends_with("/run") {
        Route::Study
    } else {
        Route::Compose
    }
}

/// The operator's app: make a link, read the results (and a study page, for a server that
/// answers `/run` with this bundle rather than [`RunApp`]'s).
#[component]
pub fn App() -> impl IntoView {
    let route = current_route();
    let base = crate::browser::base_path();
    // Runs an earlier visit left unsent are sent now, whichever page this is.
    Uploads::get();
    let current = move |r: Route| if route == r { Some("page") } else { None };
    // A beta user's page is about their measurement alone.
    let nav = (route != Route::Study).then(|| {
        view! {
            <nav aria-label="Pages">
                <a href=format!("{base}/") aria-current=current(Route::Compose) data-testid="nav-compose">"Make a link"</a>
                <a href=format!("{base}/results") aria-current=current(Route::Results) data-testid="nav-results">"Results"</a>
            </nav>
        }
        .into_any()
    });
    let main = match route {
        Route::Compose => view! { <ComposePage /> }.into_any(),
        Route::Study => view! { <StudyPage /> }.into_any(),
        Route::Results => view! { <ResultsPage /> }.into_any(),
    };
    view! { <Shell nav=nav main=main /> }
}

/// The beta user's app, its own bundle (`run.html`): the study page alone, so that none
/// of the operator's pages is downloaded by a phone that only measures.
#[component]
pub fn RunApp() -> impl IntoView {
    Uploads::get();
    view! { <Shell nav=None main=view! { <StudyPage /> }.into_any() /> }
}

/// Header, the page, footer: the same around every page of both apps.
#[component]
fn Shell(nav: Option<AnyView>, main: AnyView) -> impl IntoView {
    view! {
        <header class="top">
            <div class="title-row">
                <h1>{landing::APP_NAME}</h1>
                {nav}
            </div>
            <p class="tagline">{landing::TAGLINE}</p>
        </header>
        <main>{main}</main>
        <footer>
            <p>{landing::FOOTER}</p>
        </footer>
    }
}
