//! The live view's charts. Each draws from the samples it is given, which the session
//! updates at most once per animation frame. Axis labels are HTML beside stretchable SVG,
//! so text stays readable on a phone; points are zero-length round-capped lines, which
//! stay round however the SVG is stretched.

use firsttoken_core::plan::Phase;
use firsttoken_core::schema::Sample;
use firsttoken_crowd::stats::median;
use leptos::prelude::*;

use super::axis::{nice_ceiling, phase_title};
use super::cdf_chart::{CdfChart, Series};
use crate::format;

const SPAN: f64 = 1000.0;

fn y_ticks(max: f64) -> impl IntoView {
    [max, max / 2.0, 0.0]
        .into_iter()
        .map(|v| {
            let label = if v == 0.0 { "0".to_owned() } else { format::ms(Some(v)) };
            view! { <span class="tick" style=format!("top: {}%", 100.0 * (1.0 - v / max))>{label}</span> }
        })
        .collect::<Vec<_>>()
}

fn grid() -> impl IntoView {
    view! {
        <line class="grid" x1="0" x2=SPAN y1="0" y2="0"></line>
        <line class="grid" x1="0" x2=SPAN y1=SPAN / 2.0 y2=SPAN / 2.0></line>
        <line class="grid" x1="0" x2=SPAN y1=SPAN y2=SPAN></line>
    }
}

/// What the timeline draws of one request. It is also the point's key, so a request whose
/// numbers changed (a new run reusing its place) is drawn afresh.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct TimelinePoint {
    index: u32,
    phase: Phase,
    /// The TTFT's bits, `None` for a failed request or one without a first token.
    ttft_bits: Option<u64>,
}

impl TimelinePoint {
    fn of(s: &Sample) -> Self {
        Self {
            index: s.index,
            phase: s.phase,
            ttft_bits: match (s.error, s.ttft_ms) {
                (None, Some(ttft)) => Some(ttft.to_bits()),
                _ => None,
            },
        }
    }

    fn ttft(&self) -> Option<f64> {
        self.ttft_bits.map(f64::from_bits)
    }
}

/// Every request's TTFT in the order the requests started, coloured by phase; failures
/// sit on the axis in red. The x axis is the request's place in the run (out of `total`),
/// not the clock, so a cold phase's idle minutes do not squeeze the rest into a corner.
/// Network probes are left out: they have no first token (their round trip is in the
/// results).
///
/// Points are keyed: a new sample adds one point and leaves the others alone, so a
/// redraw's cost does not grow with the run (only a new axis maximum moves them all).
#[component]
pub fn Timeline(
    #[prop(into)] samples: Signal<Vec<Sample>>,
    /// How many requests the whole run makes.
    #[prop(into)]
    total: Signal<u32>,
) -> impl IntoView {
    let points = Memo::new(move |_| {
        samples.with(|all| {
            all.iter()
                .filter(|s| s.phase != Phase::Probe)
                .map(TimelinePoint::of)
                .collect::<Vec<_>>()
        })
    });
    let y_max = Memo::new(move |_| {
        points.with(|all| {
            nice_ceiling(
                all.iter()
                    .filter_map(TimelinePoint::ttft)
                    .fold(0.0, f64::max),
            )
        })
    });
    let dot = move |p: TimelinePoint| {
        let x = move || SPAN * (f64::from(p.index) + 0.5) / f64::from(total.get().max(1));
        match p.ttft() {
            Some(ttft) => {
                let y = move || SPAN * (1.0 - (ttft / y_max.get()).min(1.0));
                view! {
                    <line class=format!("dot phase-{}", p.phase.name()) x1=x x2=x y1=y y2=y>
                        <title>{format!("request {} ({}): {}", p.index + 1, phase_title(p.phase), format::ms(Some(ttft)))}</title>
                    </line>
                }
                .into_any()
            }
            None => view! {
                <line class="dot failed" x1=x x2=x y1=SPAN y2=SPAN>
                    <title>{format!("request {} ({}) failed", p.index + 1, phase_title(p.phase))}</title>
                </line>
            }
            .into_any(),
        }
    };
    let legend = move || {
        let (mut phases, failed) = points.with(|all| {
            (
                all.iter().map(|p| p.phase).collect::<Vec<_>>(),
                all.iter().any(|p| p.ttft_bits.is_none()),
            )
        });
        phases.sort();
        phases.dedup();
        phases
            .into_iter()
            .map(|p| {
                view! {
                    <span class="legend"><span class=format!("key phase-key-{}", p.name())></span>{phase_title(p)}</span>
                }
                .into_any()
            })
            .chain(failed.then(|| view! { <span class="legend"><span class="key key-failed"></span>"failed"</span> }.into_any()))
            .collect::<Vec<_>>()
    };
    view! {
        <figure class="live-chart" data-testid="timeline-chart">
            <h3>"Time to first token, request by request"</h3>
            <div class="plot">
                <div class="y-ticks" aria-hidden="true">{move || y_ticks(y_max.get())}</div>
                <svg viewBox=format!("0 0 {SPAN} {SPAN}") preserveAspectRatio="none" role="img"
                    aria-label="Time to first token of each request, in the order they started">
                    {grid()}
                    <For each=move || points.get() key=|p| *p children=dot />
                </svg>
            </div>
            <figcaption>
                <span class="axis-note">{move || format!("requests 1 to {}, in the order they started →", total.get())}</span>
                {legend}
            </figcaption>
        </figure>
    }
}

/// 41 points of a set of times' empirical distribution.
fn cdf_points(values: &[f64]) -> Vec<[f64; 2]> {
    let sorted = firsttoken_crowd::stats::sorted(values);
    if sorted.is_empty() {
        return Vec::new();
    }
    (0..=40)
        .filter_map(|i| {
            let fraction = f64::from(i) / 40.0;
            Some([
                firsttoken_crowd::stats::percentile_sorted(&sorted, fraction * 100.0)?,
                fraction,
            ])
        })
        .collect()
}

/// The TTFT distribution of each phase (the main target's; warm-up and probes left out).
#[component]
pub fn PhaseDistributions(#[prop(into)] samples: Signal<Vec<Sample>>) -> impl IntoView {
    // A derived signal: made a Memo and passed to the chart as its `Signal` prop, the
    // chart's lines stopped redrawing (Leptos 0.8; its legend still did). The work is
    // small: a sort of each phase's values.
    let series = Signal::derive(move || {
        samples.with(|all| {
            [
                Phase::Steady,
                Phase::Fresh,
                Phase::Concurrency,
                Phase::Cold,
                Phase::Compare,
            ]
            .into_iter()
            .filter_map(|phase| {
                let ttft: Vec<f64> = all
                    .iter()
                    .filter(|s| s.phase == phase && s.target == 0 && s.error.is_none())
                    .filter_map(|s| s.ttft_ms)
                    .collect();
                (ttft.len() >= 2).then(|| Series {
                    name: format!("{} ({})", phase_title(phase), ttft.len()),
                    points: cdf_points(&ttft),
                    phase: Some(phase.name()),
                })
            })
            .collect::<Vec<Series>>()
        })
    });
    view! {
        <div class="live-chart" data-testid="phase-distributions">
            <h3>"How the phases compare"</h3>
            <CdfChart series=series label="Share of requests whose first token had come, by time" />
        </div>
    }
}

/// One answered request of the concurrency phase, as the chart draws it (and its key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct LevelPoint {
    index: u32,
    level: u32,
    ttft_bits: u64,
}

/// The chart's scale: the levels in order, the axis maximum, and the level-1 median.
#[derive(Debug, Clone, PartialEq)]
struct LevelScale {
    levels: Vec<u32>,
    y_max: f64,
    base: Option<f64>,
    medians: Vec<Option<f64>>,
}

impl LevelScale {
    /// `levels`: every level sent so far, in order, including one whose requests all
    /// failed (it keeps its column, empty).
    fn of(levels: Vec<u32>, points: &[LevelPoint]) -> Self {
        let ttft_at = |k: u32| -> Vec<f64> {
            points
                .iter()
                .filter(|p| p.level == k)
                .map(|p| f64::from_bits(p.ttft_bits))
                .collect()
        };
        let medians: Vec<Option<f64>> = levels.iter().map(|k| median(&ttft_at(*k))).collect();
        let base = levels.iter().position(|k| *k == 1).and_then(|i| medians[i]);
        let top = points
            .iter()
            .map(|p| f64::from_bits(p.ttft_bits))
            .fold(0.0, f64::max);
        let serial_top = base
            .zip(levels.last())
            .map_or(0.0, |(b, k)| b * f64::from(k + 1) / 2.0);
        Self {
            y_max: nice_ceiling(top.max(serial_top)),
            base,
            medians,
            levels,
        }
    }

    fn slot(&self) -> f64 {
        SPAN / self.levels.len().max(1) as f64
    }

    /// The centre of the `i`th level's column.
    fn x(&self, i: usize) -> f64 {
        self.slot() * (i as f64 + 0.5)
    }

    fn y(&self, ms: f64) -> f64 {
        SPAN * (1.0 - (ms / self.y_max).min(1.0))
    }
}

/// TTFT at each concurrency level: every request, the median, and what a server that
/// handles one request at a time would give: the level-1 median × (k + 1) / 2. The
/// requests' points are keyed, as in [`Timeline`], so a redraw adds only the new ones.
#[component]
pub fn ConcurrencyChart(#[prop(into)] samples: Signal<Vec<Sample>>) -> impl IntoView {
    let points = Memo::new(move |_| {
        samples.with(|all| {
            all.iter()
                .filter(|s| s.phase == Phase::Concurrency && s.error.is_none())
                .filter_map(|s| {
                    Some(LevelPoint {
                        index: s.index,
                        level: s.concurrency,
                        ttft_bits: s.ttft_ms?.to_bits(),
                    })
                })
                .collect::<Vec<_>>()
        })
    });
    let levels = Memo::new(move |_| {
        samples.with(|all| {
            let mut levels: Vec<u32> = all
                .iter()
                .filter(|s| s.phase == Phase::Concurrency)
                .map(|s| s.concurrency)
                .collect();
            levels.sort_unstable();
            levels.dedup();
            levels
        })
    });
    let scale = Memo::new(move |_| points.with(|p| LevelScale::of(levels.get(), p)));
    let any = move || !levels.with(Vec::is_empty);
    let dot = move |p: LevelPoint| {
        let ttft = f64::from_bits(p.ttft_bits);
        // Spread the points of one level a little, so equal times stay visible.
        let x = move || {
            scale.with(|s| {
                let i = s.levels.iter().position(|k| *k == p.level).unwrap_or(0);
                s.x(i) + s.slot() * 0.3 * (f64::from(p.index % 7) / 6.0 - 0.5)
            })
        };
        let y = move || scale.with(|s| s.y(ttft));
        view! {
            <line class="dot phase-concurrency" x1=x x2=x y1=y y2=y>
                <title>{format!("c = {}: {}", p.level, format::ms(Some(ttft)))}</title>
            </line>
        }
    };
    let summary_lines = move || {
        scale.with(|s| {
            let mut shapes = Vec::new();
            for (i, (k, m)) in s.levels.iter().zip(&s.medians).enumerate() {
                if let Some(m) = *m {
                    let half = s.slot() * 0.3;
                    shapes.push(view! {
                        <line class="median" x1=s.x(i) - half x2=s.x(i) + half y1=s.y(m) y2=s.y(m)>
                            <title>{format!("median at c = {k}: {}", format::ms(Some(m)))}</title>
                        </line>
                    }.into_any());
                }
            }
            if let Some(base) = s.base {
                let path: String = s
                    .levels
                    .iter()
                    .enumerate()
                    .map(|(i, k)| {
                        format!(
                            "{}{:.1},{:.1}",
                            if i == 0 { "M" } else { " L" },
                            s.x(i),
                            s.y(base * f64::from(k + 1) / 2.0)
                        )
                    })
                    .collect();
                shapes.push(view! { <path class="serial" d=path></path> }.into_any());
            }
            shapes
        })
    };
    let labels = move || {
        scale.with(|s| {
            s.levels
                .iter()
                .enumerate()
                .map(|(i, k)| view! { <span class="tick" style=format!("left: {}%", s.x(i) / SPAN * 100.0)>{format!("{k} at once")}</span> })
                .collect::<Vec<_>>()
        })
    };
    view! {
        <figure class="live-chart" data-testid="concurrency-chart">
            <h3>"Several requests at once"</h3>
            <Show when=any fallback=|| view! { <p class="status">"No concurrency phase in this run yet."</p> }>
                <div class="plot">
                    <div class="y-ticks" aria-hidden="true">{move || y_ticks(scale.with(|s| s.y_max))}</div>
                    <svg viewBox=format!("0 0 {SPAN} {SPAN}") preserveAspectRatio="none" role="img"
                        aria-label="Time to first token at each concurrency level, with a one-at-a-time server for reference">
                        {grid()}
                        <For each=move || points.get() key=|p| *p children=dot />
                        {summary_lines}
                    </svg>
                    <div class="x-ticks" aria-hidden="true">{labels}</div>
                </div>
            </Show>
            <figcaption>
                <span class="legend"><span class="key key-median"></span>"median"</span>
                <span class="legend"><span class="key key-serial"></span>"a server that handles one request at a time"</span>
            </figcaption>
        </figure>
    }
}
