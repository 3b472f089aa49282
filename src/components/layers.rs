//! A wait for the first token in layers, drawn: one request's (`firsttoken_core::layers`)
//! under *One request, step by step*, a run's steady requests' (`firsttoken_pages::split`)
//! in its results, and the crowd's by group (`firsttoken_crowd::summary::Layer`) on the
//! Results page. One stacked bar, a line per layer with its time and its share, and in
//! words what is not known and why.

use firsttoken_core::layers::{FIRST_TOKEN_WRITTEN, Layers};
use firsttoken_crowd::summary::Group;
use firsttoken_pages::split::RunSplit;
use leptos::prelude::*;

use crate::format;

/// A layer's colour, by its name.
fn class_of(name: &str) -> &'static str {
    match name {
        "before sending" => "wf-connect",
        "server: after its head" => "wf-model",
        "the rest" | "network and delivery" => "wf-wait",
        _ => "wf-server",
    }
}

/// One stacked bar of `parts` (name, share of the whole), each as wide as its share.
fn stacked(parts: &[(String, f64)]) -> AnyView {
    let mut at = 0.0;
    let segments = parts
        .iter()
        .map(|(name, share)| {
            let (left, width) = (at * 100.0, share * 100.0);
            at += share;
            view! {
                <span class=format!("wf-bar {}", class_of(name)) style=format!("left: {left:.2}%; width: {width:.2}%")></span>
            }
        })
        .collect::<Vec<_>>();
    view! { <span class="wf-track layers-track" aria-hidden="true">{segments}</span> }.into_any()
}

/// A line of the legend: the layer's key, name, time and share.
fn line(name: &str, time: AnyView, share: f64) -> AnyView {
    view! {
        <li>
            <span class=format!("key {}", class_of(name))></span>
            <span class="wf-name">{name.to_owned()}</span>
            <span class="wf-time">{time}</span>
            <span class="wf-share">{format!("{:.0}%", share * 100.0)}</span>
        </li>
    }
    .into_any()
}

/// One request's TTFT in layers; a layer that is not known says why.
pub fn request_layers(layers: &Layers) -> AnyView {
    let mut parts: Vec<(String, f64)> = Vec::new();
    if let Ok(sent) = layers.before_send_ms {
        parts.push(("before sending".into(), sent));
    }
    if let Ok(server) = &layers.server {
        for (name, ms) in &server.steps {
            parts.push((format!("server: {name}"), *ms));
        }
        if let Some(ms) = server.after_head_ms {
            parts.push(("server: after its head".into(), ms));
        }
    }
    parts.push(("the rest".into(), layers.rest_ms));
    let total = layers.ttft_ms.max(f64::MIN_POSITIVE);
    let shares: Vec<(String, f64)> = parts
        .iter()
        .map(|(n, ms)| (n.clone(), ms / total))
        .collect();
    let lines = parts
        .iter()
        .map(|(name, ms)| line(name, format::ms(Some(*ms)).into_any(), ms / total))
        .collect::<Vec<_>>();
    let mut notes = vec![format!("The rest is {}.", layers.rest_holds())];
    if let Err(absent) = &layers.before_send_ms {
        notes.push(format!("Before sending: not known, {}.", absent.0));
    }
    match &layers.server {
        Err(absent) => notes.push(format!("The server: not known, {}.", absent.0)),
        Ok(server) if !server.whole() => notes.push(format!(
            "The server reported its steps before its response head, not its time to the first token ({FIRST_TOKEN_WRITTEN}_ms in its stream's timings would show it)."
        )),
        Ok(_) => {}
    }
    view! {
        <div class="layers" data-testid="layers">
            <h4>{format!("Where its {} to the first token went", format::ms(Some(layers.ttft_ms)))}</h4>
            {stacked(&shares)}
            <ul class="layer-lines">{lines}</ul>
            {notes.into_iter().map(|n| view! { <p class="status">{n}</p> }).collect::<Vec<_>>()}
        </div>
    }
    .into_any()
}

/// A run's steady requests' wait in layers: each layer's median with its interval, and
/// its share of the mean TTFT; or why there is no split.
pub fn run_split(split: &RunSplit) -> AnyView {
    let Some(mean) = split.mean_ttft_ms.filter(|_| !split.layers.is_empty()) else {
        let why = split.why_not.clone().unwrap_or_default();
        return view! {
            <p class="reading" data-testid="run-split">
                {format!("Where the wait went: no steady request's wait could be split whole ({why}).")}
            </p>
        }
        .into_any();
    };
    let shares: Vec<(String, f64)> = split
        .layers
        .iter()
        .map(|l| (l.name.clone(), l.share))
        .collect();
    let lines = split
        .layers
        .iter()
        .map(|l| {
            let p50 = &l.times.p50;
            let interval = (p50.low < p50.high).then(|| {
                format!(
                    "{}–{}",
                    format::ms(Some(p50.low)).trim_end_matches(" ms"),
                    format::ms(Some(p50.high))
                )
            });
            let time = view! {
                <span class="estimate">
                    {format::ms(Some(p50.value))}
                    {interval.map(|i| view! { <small class="ci">{i}</small> })}
                </span>
            };
            line(&l.name, time.into_any(), l.share)
        })
        .collect::<Vec<_>>();
    let counted = if split.whole == split.answered {
        format!("all {} steady requests", split.whole)
    } else {
        format!(
            "{} of the {} steady requests that answered (the others could not be split whole: {})",
            split.whole,
            split.answered,
            split.why_not.clone().unwrap_or_default()
        )
    };
    view! {
        <div class="layers" data-testid="run-split">
            <h4>{format!("Where the wait for the first token went (mean {})", format::ms(Some(mean)))}</h4>
            {stacked(&shares)}
            <ul class="layer-lines">{lines}</ul>
            <p class="status">{format!(
                "From {counted}. Each layer's median, with its 95% interval beneath, and its share of the mean TTFT: the bar is drawn by those shares, since means add up and medians do not."
            )}</p>
        </div>
    }
    .into_any()
}

/// The crowd's wait in layers, a group a row: a stacked bar of the layers' shares of the
/// mean TTFT, and each layer's median with its interval; a group without enough requests
/// that split whole says why.
pub fn crowd_split(groups: &[(String, &Group)]) -> AnyView {
    let rows = groups
        .iter()
        .filter(|(_, g)| !g.withheld)
        .map(|(name, g)| {
            if g.layers.is_empty() {
                let why = g.split_note.clone().unwrap_or_default();
                return view! {
                    <div class="crowd-split-row" data-testid="crowd-split-row">
                        <h4>{name.clone()}</h4>
                        <p class="status">{format!("No split: {why}.")}</p>
                    </div>
                }
                .into_any();
            }
            let shares: Vec<(String, f64)> = g
                .layers
                .iter()
                .map(|l| (l.layer.title().to_owned(), l.share))
                .collect();
            let lines = g
                .layers
                .iter()
                .map(|l| {
                    let p50 = &l.ms.p50;
                    let interval =
                        p50.low
                            .zip(p50.high)
                            .filter(|(lo, hi)| lo < hi)
                            .map(|(lo, hi)| {
                                format!(
                                    "{}–{}",
                                    format::ms(Some(lo)).trim_end_matches(" ms"),
                                    format::ms(Some(hi))
                                )
                            });
                    let time = view! {
                        <span class="estimate">
                            {format::ms(Some(p50.value))}
                            {interval.map(|i| view! { <small class="ci">{i}</small> })}
                        </span>
                    };
                    line(l.layer.title(), time.into_any(), l.share)
                })
                .collect::<Vec<_>>();
            let of = format!("{} requests split whole", g.split.unwrap_or_default());
            view! {
                <div class="crowd-split-row" data-testid="crowd-split-row">
                    <h4>{name.clone()} " " <small class="status">{of}</small></h4>
                    {stacked(&shares)}
                    <ul class="layer-lines">{lines}</ul>
                </div>
            }
            .into_any()
        })
        .collect::<Vec<_>>();
    view! {
        <figure class="layers crowd-split" data-testid="crowd-split">
            <h3>"Where the wait for the first token goes"</h3>
            <p class="status">
                "Each group's requests whose wait split whole: the time before sending (Resource Timing), the server's own time to its first token (as the target reports it: Server-Timing and first_token_written_ms), and the rest, the network both ways and the stream's delivery. Each layer's median with its 95% interval; the bar and the percentages are each layer's share of the mean TTFT, since means add up and medians do not."
            </p>
            {rows}
        </figure>
    }
    .into_any()
}
