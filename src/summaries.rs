//! Asking the collector for crowd summaries, as the Results page shows them: the query
//! string, the results token kept for the browser session, and the answers through a
//! Leptos resource so that only the newest ask's answers are ever shown.

use firsttoken_crowd::summary::Summary;
use leptos::prelude::*;

use crate::browser;
use crate::collector::{self, SummaryError};
use crate::platform::Scope;

/// What the collector answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    Waiting,
    Loaded(Summary),
    Failed(String),
    /// The collector wants the results token (none was given, or not the right one).
    NeedsToken(String),
}

/// Where the results token is kept for the browser session.
const TOKEN_KEY: &str = "firsttoken.results-token";

fn session_storage() -> Option<web_sys::Storage> {
    web_sys::window()?.session_storage().ok().flatten()
}

/// The results token given earlier in this browser session.
pub fn results_token() -> Option<String> {
    session_storage()?
        .get_item(TOKEN_KEY)
        .ok()
        .flatten()
        .filter(|t| !t.is_empty())
}

pub fn keep_results_token(token: &str) {
    if let Some(storage) = session_storage() {
        let _ = storage.set_item(TOKEN_KEY, token);
    }
}

/// `key=value&…`, values encoded.
pub fn query(pairs: &[(&str, String)]) -> String {
    pairs
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={}", String::from(js_sys::encode_uri_component(v))))
        .collect::<Vec<_>>()
        .join("&")
}

/// Asks for one summary.
async fn ask(query: &str) -> Answer {
    let url = format!(
        "{}{}",
        browser::app_root(),
        firsttoken_core::api::SUMMARY_PATH
    );
    match collector::summary(&Scope::current(), &url, query, results_token().as_deref()).await {
        Ok(summary) => Answer::Loaded(summary),
        Err(SummaryError::NeedsToken(message)) => Answer::NeedsToken(message),
        Err(SummaryError::Other(error)) => Answer::Failed(error.to_string()),
    }
}

/// What was asked last: the queries, and a number that grows with each ask (so asking the
/// same again, after the token was given, asks again).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Asked {
    n: u64,
    queries: Vec<String>,
}

/// The answers to what `asked` holds, through a Leptos resource: each ask starts a fetch,
/// and only the newest one's answers are kept (the resource drops an older fetch that
/// finishes later), so two quick clicks cannot end on the first one's numbers. The
/// queries are asked one after another: the collector computes one at a time. Until the
/// newest answers arrive, every answer reads [`Answer::Waiting`].
pub fn answers(asked: RwSignal<Asked>) -> impl Fn(usize) -> Answer + Copy {
    let fetched = LocalResource::new(move || {
        let Asked { n, queries } = asked.get();
        async move {
            let mut answers = Vec::with_capacity(queries.len());
            for query in &queries {
                answers.push(ask(query).await);
            }
            (n, answers)
        }
    });
    move |i: usize| match fetched.get() {
        Some((n, answers)) if n == asked.with(|a| a.n) => {
            answers.get(i).cloned().unwrap_or(Answer::Waiting)
        }
        _ => Answer::Waiting,
    }
}

/// Asks `queries` anew.
pub fn ask_again(asked: RwSignal<Asked>, queries: Vec<String>) {
    asked.update(|a| {
        a.n += 1;
        a.queries = queries;
    });
}
