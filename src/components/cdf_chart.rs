//! Distribution curves: for each group, the fraction of requests whose first token came
//! within a given time. Lines further left are faster; a long tail shows as a line that
//! reaches 100% late. Axis labels are HTML beside a stretchable SVG, so they stay readable
//! on a phone.

use leptos::prelude::*;

use super::axis::nice_ceiling;
use crate::format;

const SPAN: f64 = 1000.0;
/// Series colours, as CSS variables (style/main.css).
const COLOURS: usize = 8;

/// One curve: its name and `[ms, fraction]` points, fractions rising from 0 to 1.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<[f64; 2]>,
    /// A phase's colour, so a phase looks the same in every chart; `None` takes the
    /// next of the chart's own colours.
    pub phase: Option<&'static str>,
}

impl Series {
    /// The CSS classes that colour the `i`th series' line and legend key.
    fn colour(&self, i: usize) -> (String, String) {
        match self.phase {
            Some(name) => (format!("phase-{name}"), format!("phase-key-{name}")),
            None => (
                format!("series-{}", i % COLOURS),
                format!("series-key-{}", i % COLOURS),
            ),
        }
    }
}

#[component]
pub fn CdfChart(
    #[prop(into)] series: Signal<Vec<Series>>,
    #[prop(into)] label: String,
) -> impl IntoView {
    // The axis ends at the slowest group's 97.5th percentile: the last few percent of a
    // tail would squeeze everything else into the left edge.
    let x_max = Memo::new(move |_| {
        series.with(|all| {
            nice_ceiling(
                all.iter()
                    .filter_map(|s| s.points.iter().rev().find(|p| p[1] <= 0.975).map(|p| p[0]))
                    .fold(0.0, f64::max),
            )
        })
    });
    let lines = move || {
        let max = x_max.get();
        series.with(|all| {
            all.iter()
                .enumerate()
                .map(|(i, s)| {
                    let path: String = s
                        .points
                        .iter()
                        .enumerate()
                        .map(|(j, [ms, fraction])| {
                            let x = SPAN * (ms / max).min(1.0);
                            let y = SPAN * (1.0 - fraction);
                            format!("{}{x:.1},{y:.1}", if j == 0 { "M" } else { " L" })
                        })
                        .collect();
                    view! { <path class=format!("cdf-line {}", s.colour(i).0) d=path></path> }
                })
                .collect::<Vec<_>>()
        })
    };
    let x_ticks =
        move || {
            let max = x_max.get();
            [0.0, 0.25, 0.5, 0.75, 1.0]
            .into_iter()
            .map(|f| {
                let label = if f == 0.0 { "0".to_owned() } else { format::ms(Some(f * max)) };
                view! { <span class="tick" style=format!("left: {}%", f * 100.0)>{label}</span> }
            })
            .collect::<Vec<_>>()
        };
    let legend = move || {
        series.with(|all| {
            all.iter()
                .enumerate()
                .map(|(i, s)| {
                    view! {
                        <span class="legend">
                            <span class=format!("key {}", s.colour(i).1)></span>
                            {s.name.clone()}
                        </span>
                    }
                })
                .collect::<Vec<_>>()
        })
    };
    view! {
        <figure class="cdf" data-testid="cdf-chart">
            <div class="plot">
                <div class="y-ticks" aria-hidden="true">
                    <span class="tick" style="top: 0%">"100%"</span>
                    <span class="tick" style="top: 50%">"50%"</span>
                    <span class="tick" style="top: 100%">"0%"</span>
                </div>
                <svg viewBox=format!("0 0 {SPAN} {SPAN}") preserveAspectRatio="none" role="img" aria-label=label.clone()>
                    <line class="grid" x1="0" x2=SPAN y1="0" y2="0"></line>
                    <line class="grid" x1="0" x2=SPAN y1=SPAN / 2.0 y2=SPAN / 2.0></line>
                    <line class="grid" x1="0" x2=SPAN y1=SPAN y2=SPAN></line>
                    {lines}
                </svg>
                <div class="x-ticks" aria-hidden="true">{x_ticks}</div>
            </div>
            <figcaption>
                <span class="axis-note">{label}</span>
                {legend}
            </figcaption>
        </figure>
    }
}
