//! One request, step by step: its life on the browser's clock (sending, the response
//! head, the first byte, the first token, the rest of the answer), and where its wait for
//! the first token went, in layers (`firsttoken_core::layers`): before sending, the
//! server's own time as it reported it, and the rest, each absent with the reason.

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

/// The request's TTFT in layers, as one stacked bar and a line per layer with its share;
/// a layer that is not known says why.
fn layers_view(layers: &Layers) -> AnyView {
    let total = layers.ttft_ms.max(f64::MIN_POSITIVE);
    let mut parts: Vec<(String, f64, &'static str)> = Vec::new();
    if let Ok(sent) = layers.before_send_ms {
        parts.push(("before sending".into(), sent, "wf-connect"));
    }
    if let Ok(server) = &layers.server {
        for (name, ms) in &server.steps {
            parts.push((format!("server: {name}"), *ms, "wf-server"));
        }
        if let Some(ms) = server.after_head_ms {
            parts.push(("server: after its head".into(), ms, "wf-model"));
        }
    }
    parts.push(("the rest".into(), layers.rest_ms, "wf-wait"));
    let mut at = 0.0;
    let segments = parts
        .iter()
        .map(|(name, ms, class)| {
            let (left, width) = (at / total * 100.0, ms / total * 100.0);
            at += ms;
            view! {
                <span class=format!("wf-bar {class}") style=format!("left: {left:.2}%; width: {width:.2}%")>
                    <title>{format!("{name}: {}", format::ms(Some(*ms)))}</title>
                </span>
            }
        })
        .collect::<Vec<_>>();
    let lines = parts
        .iter()
        .map(|(name, ms, class)| {
            let share = ms / total * 100.0;
            view! {
                <li>
                    <span class=format!("key {class}")></span>
                    <span class="wf-name">{name.clone()}</span>
                    <span class="wf-time">{format::ms(Some(*ms))}</span>
                    <span class="wf-share">{format!("{share:.0}%")}</span>
                </li>
            }
        })
        .collect::<Vec<_>>();
    let mut notes = vec![format!("The rest is {}.", layers.rest_holds)];
    if let Err(absent) = &layers.before_send_ms {
        notes.push(format!("Before sending: not known, {}.", absent.0));
    }
    match &layers.server {
        Err(absent) => notes.push(format!("The server: not known, {}.", absent.0)),
        Ok(server) if !server.whole() => notes.push(format!(
            "The server reported its steps before its response head, not its time to the first token ({}_ms in its stream's timings would show it).",
            firsttoken_core::layers::FIRST_TOKEN_WRITTEN
        )),
        Ok(_) => {}
    }
    view! {
        <div class="layers" data-testid="layers">
            <h4>{format!("Where its {} to the first token went", format::ms(Some(layers.ttft_ms)))}</h4>
            <span class="wf-track layers-track">{segments}</span>
            <ul class="layer-lines">{lines}</ul>
            {notes.into_iter().map(|n| view! { <p class="status">{n}</p> }).collect::<Vec<_>>()}
        </div>
    }
    .into_any()
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
            rows.push(layers_view(&layers));
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
