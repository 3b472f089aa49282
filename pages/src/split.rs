//! A run's wait for its first token in layers (`firsttoken_core::layers`), over its
//! steady requests: each layer's median with its interval, and its share of the mean TTFT.
//!
//! Only requests whose wait split whole count (the time before sending known, and the
//! server's whole time to its first token), so every request's layers add up to its TTFT,
//! the layers' means add up to the mean TTFT of the same requests, and a share is a
//! share of something real. Medians do not add up; the page says so beside them. A server
//! step a request did not report counts as 0 ms for it, so the sums stay whole.

use firsttoken_core::layers::{Absent, Layers};
use firsttoken_core::plan::Phase;
use firsttoken_core::schema::Run;
use firsttoken_crowd::stats::{self, BOOTSTRAP_SEED, Distribution};

/// One layer of the run's split.
#[derive(Debug, Clone, PartialEq)]
pub struct LayerFigure {
    /// "before sending", "server: *step*" (the target's name), "server: after its head",
    /// "the rest".
    pub name: String,
    /// Its times over the requests split whole, in the order they ran.
    pub times: Distribution,
    /// Its mean over the mean TTFT of the same requests.
    pub share: f64,
}

/// The run's split, or why there is none.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSplit {
    /// Steady requests that answered with a first token.
    pub answered: usize,
    /// Of those, how many split whole, and so count here.
    pub whole: usize,
    /// The layers, in the order a request meets them; empty when none split whole.
    pub layers: Vec<LayerFigure>,
    /// The mean TTFT of the requests counted.
    pub mean_ttft_ms: Option<f64>,
    /// Why the other requests did not split whole: the commonest reason.
    pub why_not: Option<String>,
}

impl RunSplit {
    /// The split of `run`'s steady requests to its main target; `None` without one that
    /// answered.
    pub fn of(run: &Run) -> Option<RunSplit> {
        let all: Vec<Layers> = run
            .samples
            .iter()
            .filter(|s| s.phase == Phase::Steady && s.target == 0 && s.error.is_none())
            .filter_map(Layers::of)
            .collect();
        if all.is_empty() {
            return None;
        }
        let whole: Vec<&Layers> = all.iter().filter(|l| is_whole(l)).collect();
        let mut names: Vec<String> = Vec::new();
        for layers in &whole {
            for (name, _) in layers
                .server
                .as_ref()
                .map(|s| s.steps.as_slice())
                .unwrap_or_default()
            {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
        }
        let mut columns: Vec<(String, Vec<f64>)> = vec![("before sending".to_owned(), Vec::new())];
        columns.extend(names.iter().map(|n| (format!("server: {n}"), Vec::new())));
        columns.push(("server: after its head".to_owned(), Vec::new()));
        columns.push(("the rest".to_owned(), Vec::new()));
        for layers in &whole {
            let Ok(server) = &layers.server else { continue };
            let mut row = vec![layers.before_send_ms.clone().unwrap_or_default()];
            row.extend(names.iter().map(|n| {
                server
                    .steps
                    .iter()
                    .filter(|(name, _)| name == n)
                    .map(|(_, ms)| ms)
                    .sum::<f64>()
            }));
            row.push(server.after_head_ms.unwrap_or_default());
            row.push(layers.rest_ms);
            for (column, value) in columns.iter_mut().zip(row) {
                column.1.push(value);
            }
        }
        let ttfts: Vec<f64> = whole.iter().map(|l| l.ttft_ms).collect();
        let mean_ttft = stats::mean(&ttfts);
        let layers = match mean_ttft {
            Some(mean) if mean > 0.0 => columns
                .into_iter()
                .filter_map(|(name, values)| {
                    let times = stats::distribution(&values, BOOTSTRAP_SEED)?;
                    let share = times.mean / mean;
                    Some(LayerFigure { name, times, share })
                })
                .collect(),
            _ => Vec::new(),
        };
        Some(RunSplit {
            answered: all.len(),
            whole: whole.len(),
            layers,
            mean_ttft_ms: mean_ttft,
            why_not: commonest(
                all.iter()
                    .filter(|l| !is_whole(l))
                    .filter_map(why_not_whole),
            ),
        })
    }
}

/// Whether `layers` is whole: every layer a measurement.
fn is_whole(layers: &Layers) -> bool {
    layers.before_send_ms.is_ok() && layers.server.as_ref().is_ok_and(|s| s.whole())
}

/// Why `layers` is not whole, in words.
fn why_not_whole(layers: &Layers) -> Option<String> {
    match (&layers.before_send_ms, &layers.server) {
        (Err(Absent(why)), _) => Some(format!("before sending: {why}")),
        (_, Err(Absent(why))) => Some(format!("the server: {why}")),
        (_, Ok(s)) if !s.whole() => Some(format!(
            "the server reported its steps but not its time to the first token ({}_ms)",
            firsttoken_core::layers::FIRST_TOKEN_WRITTEN
        )),
        _ => None,
    }
}

/// The reason given most often (the first of those tied).
fn commonest(reasons: impl Iterator<Item = String>) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for reason in reasons {
        match counts.iter_mut().find(|(r, _)| *r == reason) {
            Some(entry) => entry.1 += 1,
            None => counts.push((reason, 1)),
        }
    }
    let most = counts.iter().map(|c| c.1).max()?;
    counts.into_iter().find(|c| c.1 == most).map(|c| c.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_core::schema::{Connection, Sample, ServerTimingEntry};

    fn sample(ttft: f64, sent: f64, auth: f64, whole: Option<f64>) -> Sample {
        Sample {
            phase: Phase::Steady,
            ttft_ms: Some(ttft),
            headers_ms: Some(ttft - 100.0),
            conn: Some(Connection {
                sent_ms: Some(sent),
                ..Connection::default()
            }),
            server_timing: vec![ServerTimingEntry {
                name: "auth".into(),
                duration_ms: auth,
                description: None,
            }],
            stream_timings: whole.map(|w| [("first_token_written_ms".to_owned(), w)].into()),
            ..Sample::default()
        }
    }

    fn run(samples: Vec<Sample>) -> Run {
        let mut run: Run =
            serde_json::from_str(include_str!("../../core/schema/example-run.v1.json"))
                .expect("example");
        run.samples = samples;
        run
    }

    #[test]
    fn the_layers_means_add_up_to_the_mean_ttft_and_medians_are_numpys() {
        let samples: Vec<Sample> = (0..10)
            .map(|i| {
                let i = f64::from(i);
                sample(500.0 + 10.0 * i, 5.0 + i, 50.0 + i, Some(300.0 + 5.0 * i))
            })
            .collect();
        let split = RunSplit::of(&run(samples)).expect("answered");
        assert_eq!((split.answered, split.whole), (10, 10));
        let names: Vec<&str> = split.layers.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "before sending",
                "server: auth",
                "server: after its head",
                "the rest"
            ]
        );
        let shares: f64 = split.layers.iter().map(|l| l.share).sum();
        assert!((shares - 1.0).abs() < 1e-12, "{shares}");
        let means: f64 = split.layers.iter().map(|l| l.times.mean).sum();
        assert!((means - split.mean_ttft_ms.expect("a mean")).abs() < 1e-9);
        // numpy.median([5..14]) = 9.5; the rest: 500+10i − (5+i) − (300+5i) = 195 + 4i,
        // numpy.median = 213.
        assert_eq!(split.layers[0].times.p50.value, 9.5);
        assert_eq!(split.layers[3].times.p50.value, 213.0);
        assert_eq!(split.why_not, None);
    }

    #[test]
    fn requests_that_do_not_split_whole_are_counted_out_with_the_reason() {
        let mut samples = vec![sample(500.0, 5.0, 50.0, Some(300.0)); 3];
        samples.push(sample(500.0, 5.0, 50.0, None));
        samples.push(sample(500.0, 5.0, 50.0, None));
        let mut no_detail = sample(500.0, 5.0, 50.0, Some(300.0));
        no_detail.conn = None;
        samples.push(no_detail);
        let split = RunSplit::of(&run(samples)).expect("answered");
        assert_eq!((split.answered, split.whole), (6, 3));
        let why = split.why_not.expect("a reason");
        assert!(why.contains("first_token_written_ms"), "{why}");
    }

    #[test]
    fn a_run_where_nothing_splits_whole_has_no_layers_and_says_why() {
        let split = RunSplit::of(&run(vec![sample(500.0, 5.0, 50.0, None); 4])).expect("answered");
        assert_eq!(split.whole, 0);
        assert!(split.layers.is_empty());
        assert_eq!(split.mean_ttft_ms, None);
        assert!(split.why_not.is_some());
        assert_eq!(RunSplit::of(&run(Vec::new())), None);
    }
}
