//! One request, step by step: its life on the browser's clock (sending, the response
//! head, the first byte, the first token, the rest of the answer), and where its wait for
//! the first token went, in layers ([`super::layers`]).

use firsttoken_core::layers::Layers;
use firsttoken_core::plan::Phase;
use firsttoken_core::schema::Sample;
use leptos::prelude::*;

use super::axis::phase_title;
use crate::format;

/// A bar of a track `end` ms long, from `from` to `to`.
fn bar(name: String, from: f64, to: f64, end: f64, class: &'static str) -> AnyView {
    let width = ((to - from) / end * 100.0).max(0.4);
    view! {
        <div class="wf-row">
            <span class="wf-name">{name}</span>
            <span class="wf-track">
                <span class=format!("wf-bar {class}") style=format!("left: {:.2}%; width: {:.2}%", from / end * 100.0, width)></span>
            </span>
            <span class="wf-time">{format::ms(Some(to - from))}</span>
        </div>
    }
    .into_any()
}

/// The request's life on the browser's clock: every bar is a time the browser saw.
fn timeline(s: &Sample) -> Vec<AnyView> {
    let end = s
        .e2e_ms
        .or(s.ttft_ms)
        .or(s.headers_ms)
        .unwrap_or(1.0)
        .max(1.0);
    let mut rows = Vec::new();
    if let Some(sent) = s
        .conn
        .as_ref()
        .and_then(|c| c.sent_ms)
        .filter(|ms| *ms > 0.0)
    {
        rows.push(bar("before sending".into(), 0.0, sent, end, "wf-connect"));
    }
    if let Some(headers) = s.headers_ms {
        rows.push(bar(
            "waiting for the response head".into(),
            0.0,
            headers,
            end,
            "wf-wait",
        ));
        if let Some(ttfb) = s.ttfb_ms {
            rows.push(bar(
                "first byte of the body".into(),
                headers,
                ttfb,
                end,
                "wf-byte",
            ));
            if let Some(ttft) = s.ttft_ms {
                rows.push(bar(
                    "until the first token".into(),
                    ttfb,
                    ttft,
                    end,
                    "wf-token",
                ));
                if let Some(e2e) = s.e2e_ms {
                    rows.push(bar(
                        "the rest of the answer".into(),
                        ttft,
                        e2e,
                        end,
                        "wf-rest",
                    ));
                }
            }
        }
    }
    rows
}

/// One request's life: its timeline on the browser's clock, and its wait for the first
/// token in layers.
#[component]
pub fn Waterfall(#[prop(into)] samples: Signal<Vec<Sample>>) -> impl IntoView {
    // None: follow the latest request.
    let chosen = RwSignal::new(None::<u32>);
    let sample = move || {
        samples.with(|all| match chosen.get() {
            Some(i) => all.iter().find(|s| s.index == i).cloned(),
            None => all.last().cloned(),
        })
    };
    let bars = move || {
        let Some(s) = sample() else {
            return view! { <p class="status">"No request yet."</p> }.into_any();
        };
        let mut rows = timeline(&s);
        if let Some(problem) = &s.error_message {
            rows.push(view! { <p class="error">{problem.clone()}</p> }.into_any());
        }
        if let Some(layers) = Layers::of(&s) {
            rows.push(super::layers::request_layers(&layers));
        }
        view! { <div class="waterfall">{rows}</div> }.into_any()
    };
    // The latest 500 requests, newest first, keyed so a new request adds one option.
    let options = Memo::new(move |_| {
        samples.with(|all| {
            all.iter()
                .rev()
                .take(500)
                .map(|s| (s.index, s.phase, s.ttft_ms.map(f64::to_bits)))
                .collect::<Vec<_>>()
        })
    });
    let option = move |(i, phase, ttft): (u32, Phase, Option<u64>)| {
        view! {
            <option value=i.to_string() selected=move || chosen.get() == Some(i)>
                {format!("#{} {} — {}", i + 1, phase_title(phase), format::ms(ttft.map(f64::from_bits)))}
            </option>
        }
    };
    view! {
        <figure class="live-chart" data-testid="waterfall">
            <h3>"One request, step by step"</h3>
            <label class="inline">
                <span>"Request"</span>
                <select data-testid="waterfall-request" on:change=move |ev| chosen.set(event_target_value(&ev).parse().ok())>
                    <option value="latest" selected=move || chosen.get().is_none()>"the latest"</option>
                    <For each=move || options.get() key=|o| *o children=option />
                </select>
            </label>
            {bars}
        </figure>
    }
}
