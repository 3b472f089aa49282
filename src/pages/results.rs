//! The operator's results page: the crowd's numbers from the collector, grouped and
//! filtered, each percentile with its 95% interval and the counts behind it, a
//! distribution curve per group, and a before/after view of two versions of a target.
//!
//! A collector started with `--results-token` answers only those who send it: the page
//! then asks for it once and keeps it in `sessionStorage`, so it is gone when the browser
//! session ends and never reaches another site.

use firsttoken_core::plan::Phase;
use firsttoken_core::schema::NetworkLabel;
use firsttoken_crowd::stats::min_values_for;
use firsttoken_crowd::summary::{Dimension, Group, Interval, MIN_RUNS_FOR_INTERVAL, Summary};
use firsttoken_pages::compare;
use leptos::prelude::*;

use crate::components::cdf_chart::{CdfChart, Series};
use crate::format;
use crate::summaries::{
    Answer, Asked, answers, ask_again, keep_results_token, query, results_token,
};

/// The value of `key` in the page address's query (`/results?study=…`).
fn in_address(key: &str) -> Option<String> {
    let search = web_sys::window()?.location().search().ok()?;
    web_sys::UrlSearchParams::new_with_str(&search)
        .ok()?
        .get(key)
        .filter(|v| !v.is_empty())
}

/// A group's name: its values joined, "(none)" where a sample had no value.
fn group_name(group: &Group) -> String {
    if group.key.is_empty() {
        return "all runs".to_owned();
    }
    group
        .key
        .values()
        .map(|v| v.clone().unwrap_or_else(|| "(none)".to_owned()))
        .collect::<Vec<_>>()
        .join(" · ")
}

/// `305 ms` with its interval `296–327 ms` beneath; a group with too few runs for an
/// interval says so instead.
fn interval(i: &Interval) -> AnyView {
    let beneath = match (i.low, i.high) {
        (Some(low), Some(high)) => format!(
            "{}–{}",
            format::ms(Some(low)).trim_end_matches(" ms"),
            format::ms(Some(high))
        ),
        _ => "no interval: too few runs".to_owned(),
    };
    view! {
        <span class="estimate">
            {format::ms(Some(i.value))}
            <small class="ci">{beneath}</small>
        </span>
    }
    .into_any()
}

/// A percentile the count may not support (p90 needs 10 values, p99 100).
fn maybe_interval(i: Option<&Interval>, needs: usize, has: usize) -> AnyView {
    match i {
        Some(i) => interval(i),
        None => {
            view! { <span class="note">{format!("needs {needs} (has {has})")}</span> }.into_any()
        }
    }
}

fn percent(rate: f64) -> String {
    format!("{:.1}%", rate * 100.0)
}

fn count(n: Option<usize>) -> String {
    n.map_or("–".to_owned(), |n| n.to_string())
}

#[component]
pub fn ResultsPage() -> impl IntoView {
    // Opened from a link's "where its results appear" (`/results?study=…`): that link's
    // runs alone, until the filter is cleared.
    let study = RwSignal::new(in_address("study").unwrap_or_default());
    let group_by = RwSignal::new(vec![Dimension::Network]);
    let phase = RwSignal::new("steady".to_owned());
    let network = RwSignal::new(String::new());
    let target_label = RwSignal::new(String::new());
    let target_version = RwSignal::new(String::new());
    let from = RwSignal::new(String::new());
    let to = RwSignal::new(String::new());
    let include_demo = RwSignal::new(crate::session::query_has("include_demo=true"));
    let min_samples = RwSignal::new("30".to_owned());
    let asked = RwSignal::new(Asked::default());
    let answer = answers(asked);

    let load = move || {
        let group_by = group_by
            .get_untracked()
            .iter()
            .map(|d| d.name())
            .collect::<Vec<_>>()
            .join(",");
        let pairs = [
            ("group_by", group_by),
            ("phase", phase.get_untracked()),
            ("network", network.get_untracked()),
            (
                "target_label",
                target_label.get_untracked().trim().to_owned(),
            ),
            (
                "target_version",
                target_version.get_untracked().trim().to_owned(),
            ),
            ("study", study.get_untracked().trim().to_owned()),
            ("from", from.get_untracked()),
            ("to", to.get_untracked()),
            (
                "include_demo",
                if include_demo.get_untracked() {
                    "true".to_owned()
                } else {
                    String::new()
                },
            ),
            ("min_samples", min_samples.get_untracked().trim().to_owned()),
        ];
        ask_again(asked, vec![query(&pairs)]);
    };
    load();

    let toggle = move |d: Dimension| {
        group_by.update(|list| {
            if let Some(at) = list.iter().position(|x| *x == d) {
                list.remove(at);
            } else {
                list.push(d);
            }
        });
    };

    view! {
        <section class="card" aria-labelledby="crowd-title">
            <h2 id="crowd-title">"The crowd's numbers"</h2>
            <form class="setup" on:submit=move |ev: leptos::ev::SubmitEvent| { ev.prevent_default(); load(); }>
                <fieldset class="wide group-by">
                    <legend>"Group by"</legend>
                    {Dimension::ALL.into_iter().map(|d| view! {
                        <label class="check">
                            <input type="checkbox" data-testid=format!("group-{}", d.name())
                                prop:checked=move || group_by.with(|g| g.contains(&d))
                                on:change=move |_| toggle(d) />
                            {d.title()}
                        </label>
                    }).collect::<Vec<_>>()}
                </fieldset>
                <label>
                    <span>"Phase"</span>
                    <select data-testid="filter-phase" on:change=move |ev| phase.set(event_target_value(&ev))>
                        {Phase::ALL.into_iter().map(|p| view! {
                            <option value=p.name() selected=move || phase.get() == p.name()>{p.name()}</option>
                        }).collect::<Vec<_>>()}
                        <option value="any" selected=move || phase.get() == "any">"any (pooled)"</option>
                    </select>
                </label>
                <label>
                    <span>"Network"</span>
                    <select data-testid="filter-network" on:change=move |ev| network.set(event_target_value(&ev))>
                        <option value="">"any"</option>
                        {NetworkLabel::ALL.into_iter().map(|n| view! { <option value=n.name()>{n.title()}</option> }).collect::<Vec<_>>()}
                    </select>
                </label>
                <label>
                    <span>"Target"</span>
                    <input type="text" placeholder="any" data-testid="filter-target" bind:value=target_label />
                </label>
                <label>
                    <span>"Version"</span>
                    <input type="text" placeholder="any" data-testid="filter-version" bind:value=target_version />
                </label>
                <label>
                    <span>"Link (study id)"</span>
                    <input type="text" placeholder="any" spellcheck="false" data-testid="filter-study" bind:value=study />
                </label>
                <label>
                    <span>"From"</span>
                    <input type="date" data-testid="filter-from" bind:value=from />
                </label>
                <label>
                    <span>"To (before)"</span>
                    <input type="date" data-testid="filter-to" bind:value=to />
                </label>
                <label>
                    <span>"Fewest requests for percentiles"</span>
                    <input type="number" min="1" inputmode="numeric" bind:value=min_samples />
                </label>
                <label class="check">
                    <input type="checkbox" data-testid="include-demo" bind:checked=include_demo />
                    "Include runs against the built-in demo (simulated numbers)"
                </label>
                <div class="actions wide">
                    <button type="submit" class="primary" data-testid="show-results">"Show"</button>
                </div>
            </form>
        </section>
        <section class="card" aria-live="polite">
            {move || {
                let id = study.get();
                (!id.trim().is_empty()).then(|| view! {
                    <p class="status" data-testid="results-of-link">
                        {format!("Results of one link (study id {}). Clear the Link field and press Show for every link.", id.trim())}
                    </p>
                })
            }}
            {move || match answer(0) {
                Answer::Waiting => view! { <p class="status">"Asking the collector…"</p> }.into_any(),
                Answer::Failed(message) => view! { <p class="error" role="alert" data-testid="results-error">{message}</p> }.into_any(),
                Answer::NeedsToken(message) => view! { <TokenForm message=message on_token=Callback::new(move |()| load()) /> }.into_any(),
                Answer::Loaded(summary) if summary.groups.is_empty() => view! {
                    <p class="status" data-testid="results-empty">
                        {if include_demo.get_untracked() {
                            "No runs match these filters yet."
                        } else {
                            "No runs from real targets match these filters yet. Runs against the built-in demo are left out unless you include them."
                        }}
                    </p>
                }.into_any(),
                Answer::Loaded(summary) => view! { <SummaryView summary=summary /> }.into_any(),
            }}
        </section>
        <CompareVersions />
    }
}

/// Asks for the results token; `on_token` runs once it is kept.
#[component]
fn TokenForm(message: String, on_token: Callback<()>) -> impl IntoView {
    let token = RwSignal::new(String::new());
    let had_one = results_token().is_some();
    view! {
        <form class="setup" data-testid="results-token-form" on:submit=move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            keep_results_token(token.get_untracked().trim());
            on_token.run(());
        }>
            <p class="status wide">
                {if had_one {
                    format!("The collector did not accept that token ({message}).")
                } else {
                    "This collector shows its results only to those who have its results token. Ask its operator for it; this page keeps it until you close the browser.".to_owned()
                }}
            </p>
            <label class="wide">
                <span>"Results token"</span>
                <input type="password" autocomplete="off" data-testid="results-token" bind:value=token />
            </label>
            <div class="actions wide">
                <button type="submit" class="primary" data-testid="results-token-submit">"Show the results"</button>
            </div>
        </form>
    }
}

/// The percentile table and the distribution curves of a summary.
#[component]
fn SummaryView(summary: Summary) -> impl IntoView {
    let dimensions = summary.group_by.clone();
    let series: Vec<Series> = summary
        .groups
        .iter()
        .filter(|g| g.ttft_ms.is_some())
        .take(8)
        .map(|g| Series {
            name: group_name(g),
            points: g.ttft_cdf.clone(),
            phase: None,
        })
        .collect();
    let headers = dimensions
        .iter()
        .map(|d| view! { <th scope="col">{d.title()}</th> })
        .collect::<Vec<_>>();
    let rows = summary
        .groups
        .iter()
        .map(|g| {
            let keys = dimensions
                .iter()
                .map(|d| view! { <td class="group-key">{g.key.get(d).cloned().flatten().unwrap_or_else(|| "(none)".to_owned())}</td> })
                .collect::<Vec<_>>();
            let numbers = match (&g.ttft_ms, &g.e2e_ms) {
                (Some(ttft), e2e) => view! {
                    <td>{interval(&ttft.p50)}</td>
                    <td>{maybe_interval(ttft.p90.as_ref(), min_values_for(90.0), ttft.count)}</td>
                    <td class="wide-only">{maybe_interval(ttft.p95.as_ref(), min_values_for(95.0), ttft.count)}</td>
                    <td class="wide-only">{maybe_interval(ttft.p99.as_ref(), min_values_for(99.0), ttft.count)}</td>
                    <td class="wide-only">{format::ms(g.median_of_run_medians_ttft_ms)}</td>
                    <td>{e2e.as_ref().map(|e| interval(&e.p50))}</td>
                }
                .into_any(),
                (None, _) => view! { <td colspan="6" class="note">{g.note.clone()}</td> }.into_any(),
            };
            let errors = g
                .errors
                .iter()
                .map(|(class, e)| format!("{class} {}", percent(e.rate)))
                .collect::<Vec<_>>()
                .join(", ");
            view! {
                <tr data-testid="results-row">
                    {keys}
                    // A withheld group's counts are not published: a dash, its note says why.
                    <td class="wide-only">{count(g.runs)}</td>
                    <td>{count(g.samples)}</td>
                    {numbers}
                    <td title=errors>{g.error_rate.map_or("–".to_owned(), percent)}</td>
                </tr>
            }
        })
        .collect::<Vec<_>>();
    let named: Vec<(String, &Group)> = summary.groups.iter().map(|g| (group_name(g), g)).collect();
    let split = crate::components::layers::crowd_split(&named);
    let series = Signal::derive(move || series.clone());
    view! {
        <p class="status">
            {format!(
                "Time to first token, {}. Each percentile has its 95% interval beneath it, from resampling whole runs (a run's requests share a browser, a network and a minute), once a group has {MIN_RUNS_FOR_INTERVAL} runs; groups with fewer than {} answered requests show counts only. The collector keeps each run's times as histograms, so percentiles and intervals are within {:.2}% of the exact figures; counts, minimum and maximum are exact.",
                if dimensions.is_empty() { "all runs together".to_owned() } else { format!("by {}", dimensions.iter().map(|d| d.title().to_lowercase()).collect::<Vec<_>>().join(" and ")) },
                summary.min_samples,
                firsttoken_crowd::sketch::RELATIVE_ERROR * 100.0
            )}
        </p>
        <p class="status" data-testid="results-weighting">
            {format!(
                "Each run counts at most {} requests of each phase, spread evenly over it, so one upload of thousands of requests weighs no more than one full session; the export keeps every request. A group from fewer than {} runs is withheld.",
                summary.requests_per_run_phase,
                summary.min_runs,
            )}
        </p>
        <div class="table-scroll" tabindex="0" role="region" aria-label="Percentiles by group">
            <table class="samples results" data-testid="results-table">
                <thead>
                    <tr>
                        {headers}
                        <th scope="col" class="wide-only">"Runs"</th>
                        <th scope="col">"Requests"</th>
                        <th scope="col">"TTFT p50"</th>
                        <th scope="col">"TTFT p90"</th>
                        <th scope="col" class="wide-only">"TTFT p95"</th>
                        <th scope="col" class="wide-only">"TTFT p99"</th>
                        <th scope="col" class="wide-only" title="The median of each run's median: networks drift between sessions">"Typical run"</th>
                        <th scope="col">"Total p50"</th>
                        <th scope="col">"Failed"</th>
                    </tr>
                </thead>
                <tbody>{rows}</tbody>
            </table>
        </div>
        {split}
        <CdfChart series=series label="Share of requests whose first token had come, by time" />
    }
}

/// A median's change in words: `−200 ms (−33%): faster`.
fn change_words(c: compare::Change) -> String {
    format!(
        "{}{}{}: {}",
        if c.ms >= 0.0 { "+" } else { "−" },
        format::ms(Some(c.ms.abs())),
        c.percent.map_or(String::new(), |p| format!(" ({p:+.0}%)")),
        c.reading.words()
    )
}

/// Two versions of one target side by side, split by a dimension: before and after a fix.
#[component]
fn CompareVersions() -> impl IntoView {
    let target = RwSignal::new(String::new());
    let before = RwSignal::new(String::new());
    let after = RwSignal::new(String::new());
    let split = RwSignal::new(Dimension::Network);
    let include_demo = RwSignal::new(false);
    let asked = RwSignal::new(false);
    // What the answers are about: the inputs may change before the next comparison.
    let compared = RwSignal::new((String::new(), String::new(), Dimension::Network));
    // The table: groups by version and the split. The curves: by version alone, so each
    // is the version's whole distribution.
    let comparison = RwSignal::new(Asked::default());
    let answer = answers(comparison);
    let split_answer = move || answer(0);
    let pooled_answer = move || answer(1);
    let error = RwSignal::new(None::<String>);

    let compare = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let (b, a) = (
            before.get_untracked().trim().to_owned(),
            after.get_untracked().trim().to_owned(),
        );
        if b.is_empty() || a.is_empty() || b == a {
            error.set(Some("Name two different versions to compare.".into()));
            return;
        }
        error.set(None);
        let filters = |group_by: String| {
            query(&[
                ("group_by", group_by),
                ("target_label", target.get_untracked().trim().to_owned()),
                (
                    "include_demo",
                    if include_demo.get_untracked() {
                        "true".to_owned()
                    } else {
                        String::new()
                    },
                ),
            ])
        };
        asked.set(true);
        compared.set((b, a, split.get_untracked()));
        ask_again(
            comparison,
            vec![
                filters(format!("target_version,{}", split.get_untracked().name())),
                filters("target_version".to_owned()),
            ],
        );
    };

    let table = move || {
        if !asked.get() {
            return ().into_any();
        }
        let summary = match split_answer() {
            Answer::Loaded(summary) => summary,
            Answer::Failed(message) | Answer::NeedsToken(message) => {
                return view! { <p class="error" role="alert">{message}</p> }.into_any();
            }
            Answer::Waiting => {
                return view! { <p class="status">"Asking the collector…"</p> }.into_any();
            }
        };
        let (b, a, d) = compared.get();
        let compared_rows = compare::rows(&summary, &b, &a, d);
        // Each value's layers, a line each under the table: they wrap on a phone.
        let layer_lines = compared_rows
            .iter()
            .filter(|row| !row.layers.is_empty())
            .map(|row| {
                let changes = row
                    .layers
                    .iter()
                    .map(|(layer, c)| format!("{}: {}", layer.title(), change_words(*c)))
                    .collect::<Vec<_>>()
                    .join("; ");
                let value = row.value.clone().unwrap_or_else(|| "(none)".to_owned());
                view! { <li data-testid="compare-layers"><strong>{value}</strong>{format!(" — {changes}")}</li> }
            })
            .collect::<Vec<_>>();
        let rows = compared_rows
            .into_iter()
            .map(|row| {
                let cell = |g: Option<&Group>| match g.and_then(|g| g.ttft_ms.as_ref()) {
                    Some(p) => interval(&p.p50),
                    None => g
                        .map_or("no runs".to_owned(), |g| match g.answered {
                            Some(answered) => format!("{answered} requests: too few"),
                            None => format!("fewer than {} runs: withheld", summary.min_runs),
                        })
                        .into_any(),
                };
                let change = row.change.map_or("—".to_owned(), change_words);
                view! {
                    <tr data-testid="compare-row">
                        <td class="group-key">{row.value.clone().unwrap_or_else(|| "(none)".to_owned())}</td>
                        <td>{cell(row.before)}</td>
                        <td>{cell(row.after)}</td>
                        <td>{change}</td>
                    </tr>
                }
            })
            .collect::<Vec<_>>();
        let series: Vec<Series> = match pooled_answer() {
            Answer::Loaded(pooled) => [(&b, "before"), (&a, "after")]
                .into_iter()
                .filter_map(|(version, which)| {
                    let group = compare::version_group(&pooled, version)?;
                    Some(Series {
                        name: format!("{which}: {version}"),
                        points: group.ttft_cdf.clone(),
                        phase: None,
                    })
                })
                .collect(),
            _ => Vec::new(),
        };
        let series = Signal::derive(move || series.clone());
        view! {
            <div class="table-scroll" tabindex="0" role="region" aria-label="Before and after">
                <table class="samples results" data-testid="compare-table">
                    <thead>
                        <tr>
                            <th scope="col">{d.title()}</th>
                            <th scope="col">{format!("TTFT p50, {b}")}</th>
                            <th scope="col">{format!("TTFT p50, {a}")}</th>
                            <th scope="col">"Change"</th>
                        </tr>
                    </thead>
                    <tbody>{rows}</tbody>
                </table>
            </div>
            {(!layer_lines.is_empty()).then(|| view! {
                <p class="reading">"Layer by layer (each layer's median: the layer a fix moved is the one that changed):"</p>
                <ul class="reading">{layer_lines}</ul>
            })}
            <p class="status">"“Faster” and “slower” mean the two intervals do not overlap; otherwise the difference may be noise."</p>
            <CdfChart series=series label="Each version's requests, all groups together" />
        }
        .into_any()
    };

    view! {
        <section class="card" aria-labelledby="compare-title">
            <h2 id="compare-title">"Before and after"</h2>
            <form class="setup" on:submit=compare>
                <label>
                    <span>"Target"</span>
                    <input type="text" placeholder="any" data-testid="compare-target" bind:value=target />
                </label>
                <label>
                    <span>"Before (version)"</span>
                    <input type="text" data-testid="compare-before" bind:value=before />
                </label>
                <label>
                    <span>"After (version)"</span>
                    <input type="text" data-testid="compare-after" bind:value=after />
                </label>
                <label>
                    <span>"Split by"</span>
                    <select data-testid="compare-split" on:change=move |ev| {
                        if let Some(d) = Dimension::from_name(&event_target_value(&ev)) { split.set(d) }
                    }>
                        {Dimension::ALL.into_iter().filter(|d| *d != Dimension::TargetVersion).map(|d| view! {
                            <option value=d.name() selected=move || split.get() == d>{d.title()}</option>
                        }).collect::<Vec<_>>()}
                    </select>
                </label>
                <label class="check">
                    <input type="checkbox" bind:checked=include_demo />
                    "Include demo runs"
                </label>
                <div class="actions wide">
                    <button type="submit" class="primary" data-testid="compare-button">"Compare"</button>
                </div>
                <Show when=move || error.with(Option::is_some)>
                    <p class="error wide" role="alert">{move || error.get()}</p>
                </Show>
            </form>
            {table}
        </section>
    }
}
