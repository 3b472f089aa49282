//! The target check on the Compose page: its state, its checklist (a line per thing a run
//! needs, with what was seen and the headers that fix it) and what the link card says of it.

use firsttoken_pages::check::{Line, Verdict};
use leptos::prelude::*;

/// The target check's state on the page.
#[derive(Debug, Clone)]
pub(super) enum Checked {
    Running {
        url: String,
    },
    Done {
        url: String,
        lines: Vec<Line>,
        /// What to change, per stack; empty when nothing needs changing.
        examples: Vec<(&'static str, String)>,
    },
}

/// The check's checklist: a line per thing a run needs, with its verdict, what was seen,
/// and the headers that fix it; then examples for common stacks.
#[component]
pub(super) fn Checklist(checked: Checked) -> impl IntoView {
    let (url, lines, examples) = match checked {
        Checked::Running { url } => {
            return view! {
                <section class="checklist wide" data-testid="target-check" data-state="running" aria-live="polite">
                    <h3>"Checking the target"</h3>
                    <p class="status">{format!("Sending one request of the study to {url} from this browser, then, for another origin, the same once more after {} s (is the preflight's answer kept?)…", firsttoken_pages::check::PREFLIGHT_WAIT_MS / 1000)}</p>
                </section>
            }
            .into_any();
        }
        Checked::Done {
            url,
            lines,
            examples,
        } => (url, lines, examples),
    };
    let count = |v: Verdict| lines.iter().filter(|l| l.verdict == v).count();
    let summary = match (count(Verdict::Fail), count(Verdict::Warn)) {
        (0, 0) => "Everything runs need is there.".to_owned(),
        (0, w) => format!(
            "Runs will work, but {w} line{} will leave numbers out.",
            plural(w)
        ),
        (f, _) => format!(
            "{f} line{} will make runs fail or mismeasure: fix {} before sharing the link.",
            plural(f),
            if f == 1 { "it" } else { "them" }
        ),
    };
    view! {
        <section class="checklist wide" data-testid="target-check" data-state="done" aria-live="polite">
            <h3>"Target check"</h3>
            <p class="status">{format!("One request of the study from this browser to {url}. ")}{summary}</p>
            <ul>
                {lines.into_iter().map(|l| {
                    let verdict = l.verdict.name();
                    let mark = match l.verdict {
                        Verdict::Pass => "✓",
                        Verdict::Warn => "!",
                        Verdict::Fail => "✗",
                        Verdict::Skip => "–",
                    };
                    view! {
                        <li class=format!("check-line {verdict}") data-testid=format!("check-{}", l.key) data-verdict=verdict>
                            <span class="mark" aria-label=verdict>{mark}</span>
                            <div>
                                <strong>{l.title}</strong>" "
                                <span>{l.detail}</span>
                                {l.fix.map(|fix| view! {
                                    <div class="fix"><span class="status">"Add:"</span><pre data-testid="check-fix">{fix}</pre></div>
                                })}
                            </div>
                        </li>
                    }
                }).collect::<Vec<_>>()}
            </ul>
            {(!examples.is_empty()).then(|| view! {
                <details class="examples" data-testid="check-examples">
                    <summary>"The same headers for FastAPI / Starlette, Express, nginx and Caddy"</summary>
                    {examples.into_iter().map(|(stack, code)| view! {
                        <h4>{stack}</h4>
                        <pre>{code}</pre>
                    }).collect::<Vec<_>>()}
                </details>
            })}
        </section>
    }
    .into_any()
}

/// What the link card says of the target check: what runs of this link will lack.
pub(super) fn link_check_note(checked: Option<&Checked>) -> String {
    let Some(Checked::Done { lines, .. }) = checked else {
        return "Not checked: Check the target (above) sends one request from this browser and says what runs will show.".to_owned();
    };
    let titles = |v: Verdict| {
        lines
            .iter()
            .filter(|l| l.verdict == v)
            .map(|l| l.title.as_str())
            .collect::<Vec<_>>()
    };
    match (titles(Verdict::Fail), titles(Verdict::Warn)) {
        (fail, _) if !fail.is_empty() => format!(
            "The check failed on: {}. Runs of this link will fail or mismeasure until that is fixed.",
            fail.join(", ")
        ),
        (_, warn) if !warn.is_empty() => format!(
            "The check passed with numbers missing ({}): runs will work without them.",
            warn.join(", ")
        ),
        _ => "The check passed: runs will have every number.".to_owned(),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
