//! Adding a summary's samples, cells and folds up by group ([`Accumulator`]), and
//! working out each group's numbers when they are all in.
//!
//! A run's answered requests count in a group's intervals as one cluster, so the
//! accumulator keeps each run's sketches of each group until the run is whole. Cells read
//! in any order keep every run's sketches to the end: memory grows with the runs read
//! (hundreds of megabytes over a few hundred thousand runs). Cells read run by run (every
//! cell of a run before any of the next: [`Accumulator::in_run_order`]) let it fold the
//! whole runs into their groups every [`Accumulator::in_run_order`]'s `fold_at` runs, so a
//! group holds its [`Fold`] (a few kilobytes; its runs' sketches too while it has at most
//! [`crate::stats::RESAMPLE_LIMIT`] values, which its bootstrap resamples) and at most
//! that many runs' sketches. Folding early gives the numbers folding at the end gives
//! (the sums a fold keeps add up, its runs' sketches are merged by run id); only the mean's
//! last bits may differ, as floating-point sums taken in another order do.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use super::Layers;
use super::{
    Cell, Dimension, Group, REQUESTS_PER_RUN_PHASE, Row, Summary, group, withhold_complement,
};
use crate::fold::{Fold, Listed};
use crate::sketch::Sketch;

/// Collects samples ([`Row`]s), cells of them ([`Cell`]s) or folds of whole runs
/// ([`Fold`]s) into groups.
#[derive(Debug, Default)]
pub struct Accumulator {
    groups: HashMap<Vec<String>, GroupAcc>,
    /// Set when cells come run by run.
    in_run_order: Option<RunOrder>,
}

/// What an accumulator fed run by run knows of the runs so far.
#[derive(Debug)]
struct RunOrder {
    /// Fold the runs held whole once there are this many.
    fold_at: usize,
    /// The run of the last cell added: the one that may have more cells to come.
    last_run: String,
    /// Runs' sketches held by groups (a run in two groups counts twice).
    held: usize,
}

#[derive(Debug, Default)]
struct GroupAcc {
    /// The answered requests of each run read as samples or cells, by run id: folded
    /// when the group is finished, or before (in run order), once each run is whole.
    runs: HashMap<String, RunSketches>,
    /// Folds added, runs folded, and the samples and errors of everything.
    fold: Fold,
}

#[derive(Debug, Default)]
struct RunSketches {
    ttft: Sketch,
    e2e: Sketch,
    layers: Layers,
}

impl GroupAcc {
    /// The runs held, folded in by run id (the order a fold keeps them in).
    fn fold_runs(&mut self) {
        if self.runs.is_empty() {
            return;
        }
        let mut runs: Vec<Listed> = self
            .runs
            .drain()
            .map(|(run_id, r)| Listed {
                run_id,
                ttft: r.ttft,
                e2e: r.e2e,
                layers: r.layers,
            })
            .collect();
        runs.sort_by(|a, b| a.run_id.cmp(&b.run_id));
        self.fold.merge(Fold::of_runs(runs));
    }
}

impl Accumulator {
    /// An accumulator for cells that come run by run: every cell of a run before any
    /// cell of the next (the collector reads them ordered by arrival and run id). It
    /// folds the runs it holds into their groups once there are `fold_at`, so its memory
    /// does not grow with the runs read. Cells out of that order would count a run twice.
    pub fn in_run_order(fold_at: usize) -> Self {
        Self {
            groups: HashMap::new(),
            in_run_order: Some(RunOrder {
                fold_at: fold_at.max(1),
                last_run: String::new(),
                held: 0,
            }),
        }
    }

    pub fn add(&mut self, row: Row) {
        let group = self.groups.entry(row.group).or_default();
        group.fold.samples += 1;
        let run = group.runs.entry(row.run_id).or_default();
        match row.error {
            Some(class) => *group.fold.errors.entry(class).or_default() += 1,
            None => {
                row.ttft_ms.into_iter().for_each(|v| run.ttft.add(v));
                row.e2e_ms.into_iter().for_each(|v| run.e2e.add(v));
            }
        }
    }

    pub fn add_cell(&mut self, cell: Cell) {
        if let Some(order) = &mut self.in_run_order
            && order.last_run != cell.run_id
        {
            // Every run held is whole: the cells of the next one begin.
            if order.held >= order.fold_at {
                order.held = 0;
                self.groups.values_mut().for_each(GroupAcc::fold_runs);
            }
            order.last_run.clone_from(&cell.run_id);
        }
        let group = self.groups.entry(cell.group).or_default();
        group.fold.samples += cell.samples;
        for (class, count) in cell.errors {
            *group.fold.errors.entry(class).or_default() += count;
        }
        let run = match group.runs.entry(cell.run_id) {
            Entry::Occupied(run) => run.into_mut(),
            Entry::Vacant(run) => {
                if let Some(order) = &mut self.in_run_order {
                    order.held += 1;
                }
                run.insert(RunSketches::default())
            }
        };
        // A run's first cell (most runs have one per group) is its sketches as they are.
        let [before, server, network] = &mut run.layers;
        let [cell_before, cell_server, cell_network] = cell.layers;
        let pairs = [
            (&mut run.ttft, cell.ttft),
            (&mut run.e2e, cell.e2e),
            (before, cell_before),
            (server, cell_server),
            (network, cell_network),
        ];
        for (into, from) in pairs {
            if into.is_empty() {
                *into = from;
            } else {
                into.merge(&from);
            }
        }
    }

    /// Adds runs folded ahead: none of them may be in the group otherwise (a run's
    /// samples of a group are all in one fold, or all read as cells).
    pub fn add_fold(&mut self, group: Vec<String>, fold: Fold) {
        self.groups.entry(group).or_default().fold.merge(fold);
    }

    /// Groups begun so far.
    pub fn groups(&self) -> usize {
        self.groups.len()
    }

    /// Runs' sketches held unfolded, summed over the groups.
    #[cfg(test)]
    fn runs_held(&self) -> usize {
        self.groups.values().map(|g| g.runs.len()).sum()
    }

    /// The groups' numbers, sorted by their keys; groups from fewer than `min_runs` runs
    /// withheld, with their complement ([`withhold_complement`]).
    pub fn finish(self, group_by: &[Dimension], min_samples: usize, min_runs: usize) -> Summary {
        self.finish_unless(group_by, min_samples, min_runs, || false)
            .unwrap_or_else(|| unreachable!("never stopped"))
    }

    /// [`Accumulator::finish`], asking `stop` before each group (each one's intervals take
    /// real CPU on large groups): `None` as soon as it says to stop, so work whose answer
    /// nobody waits for any more ends with the wait.
    pub fn finish_unless(
        self,
        group_by: &[Dimension],
        min_samples: usize,
        min_runs: usize,
        stop: impl Fn() -> bool,
    ) -> Option<Summary> {
        let mut groups: Vec<Group> = self
            .groups
            .into_iter()
            .map_while(|(values, mut acc)| {
                if stop() {
                    return None;
                }
                let key = group_by
                    .iter()
                    .zip(values)
                    .map(|(d, v)| (*d, (!v.is_empty()).then_some(v)))
                    .collect();
                // Runs in a fixed order (by id), so the same rows always give the same
                // intervals.
                acc.fold_runs();
                Some(group(key, &acc.fold, min_samples, min_runs))
            })
            .collect();
        if stop() {
            return None;
        }
        groups.sort_by(|a, b| a.key.cmp(&b.key));
        withhold_complement(&mut groups, min_runs);
        Some(Summary {
            group_by: group_by.to_vec(),
            min_samples,
            min_runs,
            requests_per_run_phase: REQUESTS_PER_RUN_PHASE,
            from_ms: None,
            to_ms: None,
            groups,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::summary::Percentiles;

    /// Cells of `runs` runs, in run order: each run has two cells in the group "big" (100
    /// values in all, so the group passes the resampling limit) and, every third run, two
    /// in "small" (a group that stays under it), with a failure now and then.
    fn cells(runs: usize) -> Vec<Cell> {
        let mut seed = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            50.0 + (seed % 100_000) as f64 / 37.0
        };
        let mut cells = Vec::new();
        for run in 0..runs {
            let groups: &[(&str, usize)] = if run % 3 == 0 {
                &[("big", 50), ("small", 4)]
            } else {
                &[("big", 50)]
            };
            for half in 0..2 {
                for &(group, values) in groups {
                    let (mut ttft, mut e2e) = (Sketch::default(), Sketch::default());
                    let mut layers = Layers::default();
                    for i in 0..values {
                        let v = next();
                        ttft.add(v);
                        e2e.add(v * 3.0 + next());
                        if i % 2 == 0 {
                            super::super::layer::add(&mut layers, [0.1 * v, 0.5 * v, 0.4 * v]);
                        }
                    }
                    let errors = if (run + half) % 17 == 0 {
                        BTreeMap::from([("http_5xx".to_owned(), 1)])
                    } else {
                        BTreeMap::new()
                    };
                    cells.push(Cell {
                        group: vec![group.to_owned()],
                        // Not in id order: the order cells come in is the run's arrival.
                        run_id: format!("run {:04}", (run * 7919) % 10_007),
                        samples: values as u64 + errors.len() as u64,
                        errors,
                        ttft,
                        e2e,
                        layers,
                    });
                }
            }
        }
        cells
    }

    /// The numbers without the mean, which floating-point sums taken in another order may
    /// change in its last bits; the mean compared to 1e-12 relatively.
    fn without_mean(
        a: Option<Percentiles>,
        b: Option<Percentiles>,
    ) -> (Option<Percentiles>, Option<Percentiles>) {
        match (a, b) {
            (Some(mut a), Some(mut b)) => {
                assert!(
                    (a.mean - b.mean).abs() <= 1e-12 * a.mean.abs(),
                    "{} {}",
                    a.mean,
                    b.mean
                );
                (a.mean, b.mean) = (0.0, 0.0);
                (Some(a), Some(b))
            }
            other => other,
        }
    }

    /// Folding whole runs as they come gives the numbers folding at the end gives, in a
    /// group past the resampling limit and in one under it, and holds at most `fold_at`
    /// runs' sketches (and the cells of the run being read) at any time.
    #[test]
    fn folding_runs_as_they_come_gives_the_same_numbers_in_bounded_memory() {
        let (runs, fold_at) = (240, 7);
        let mut at_end = Accumulator::default();
        let mut as_they_come = Accumulator::in_run_order(fold_at);
        let mut most_held = 0;
        for cell in cells(runs) {
            at_end.add_cell(cell.clone());
            as_they_come.add_cell(cell);
            most_held = most_held.max(as_they_come.runs_held());
        }
        assert_eq!(at_end.runs_held(), runs + runs / 3);
        assert!(most_held <= fold_at + 2, "held {most_held}");
        let (a, b) = (
            at_end.finish(&[Dimension::Network], 30, 5),
            as_they_come.finish(&[Dimension::Network], 30, 5),
        );
        assert_eq!(a.groups.len(), 2);
        for (mut a, mut b) in a.groups.into_iter().zip(b.groups) {
            (a.ttft_ms, b.ttft_ms) = without_mean(a.ttft_ms, b.ttft_ms);
            (a.e2e_ms, b.e2e_ms) = without_mean(a.e2e_ms, b.e2e_ms);
            for (x, y) in a.layers.iter_mut().zip(&mut b.layers) {
                (x.share, y.share) = (0.0, 0.0);
                let (p, q) = without_mean(Some(x.ms), Some(y.ms));
                (x.ms, y.ms) = (p.expect("a layer"), q.expect("a layer"));
            }
            assert!(!a.layers.is_empty(), "layers from half the values");
            assert!(
                a.ttft_ms.and_then(|p| p.p50.low).is_some(),
                "with intervals"
            );
            assert_eq!(a, b);
        }
    }
}
