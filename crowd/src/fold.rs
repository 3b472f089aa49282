//! A group's runs folded together: everything a crowd summary reports about them, in a
//! form that adds up. The collector keeps each day's runs of each combination of
//! dimensions folded ahead, so a summary over a year reads a few thousand folds rather
//! than a million runs, and gives the numbers reading the runs one by one gives.
//!
//! Counts, errors and the pooled sketch add up as they are. The intervals do not look as
//! if they could: they resample whole runs. Past [`stats::RESAMPLE_LIMIT`] values a
//! summary's interval is the cluster bootstrap's large-sample one (Woodruff; see
//! [`stats::cluster_large_sample_ci`]), whose variance is `Σ_r (y_r − q·n_r)² / N²` with
//! `n_r` run r's values and `y_r` those at or below the percentile. Expanded, that is
//! `Σ y_r² − 2q·Σ y_r·n_r + q²·Σ n_r²`, and each sum adds up over runs: `Σ n_r²` as it
//! is, and the other two through their increments at each bucket `b`, `Σ_r h·(2c − h)`
//! and `Σ_r h·n_r` (with `h` run r's count in `b` and `c` its count up to and including
//! `b`), whose sums up to a threshold's bucket are the two sums at that threshold. With
//! `q` in basis points the whole is worked out in integers, so a fold's interval is
//! exactly the one its runs give one by one. Here a run's values at or below a threshold
//! are those in the buckets whose representative is (each value standing for its bucket,
//! within [`crate::sketch::RELATIVE_ERROR`] of it).
//!
//! Two folds add up only when no run is in both: a run's `n_r²` is not the sum of its
//! halves'. The median of run medians keeps each run's median, as a count of runs per
//! value. Below [`stats::RESAMPLE_LIMIT`] values a summary's interval is a bootstrap over
//! the runs themselves, so a fold with that few TTFTs or total times keeps its runs'
//! sketches too, by run id.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::sketch::{Sketch, SketchError, Threshold, put_varint, take_varint};
use crate::stats::{self, Estimate};
use crate::summary::Layer;

/// One distribution (TTFT, total time, or a layer of the TTFT) of a fold's runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Spread {
    /// Every run's values counted together.
    all: Sketch,
    /// For each bucket of `all`, ascending: its index, `Σ_r h·(2c − h)` and `Σ_r h·n_r`.
    squares: Vec<(i32, u64, u64)>,
    /// `Σ_r n_r²`.
    sizes_squared: u64,
    /// Runs with at least one value.
    runs: u64,
}

impl Spread {
    /// Every run's values counted together.
    pub fn all(&self) -> &Sketch {
        &self.all
    }

    /// Runs with at least one value.
    pub fn runs(&self) -> u64 {
        self.runs
    }

    /// Counts one more run's values.
    pub fn add_run(&mut self, run: &Sketch) {
        let n = run.count();
        if n == 0 {
            return;
        }
        let mut up_to = 0;
        let squares: Vec<(i32, u64, u64)> = run
            .buckets()
            .iter()
            .map(|&(index, h)| {
                up_to += h;
                (index, h * (2 * up_to - h), h * n)
            })
            .collect();
        self.all.merge(run);
        add_squares(&mut self.squares, &squares);
        self.sizes_squared += n * n;
        self.runs += 1;
    }

    /// Counts another fold's runs (none of them counted here).
    pub fn merge(&mut self, other: &Spread) {
        self.all.merge(&other.all);
        add_squares(&mut self.squares, &other.squares);
        self.sizes_squared += other.sizes_squared;
        self.runs += other.runs;
    }

    /// `Σ_r (y_r − q·n_r)²`, times 10⁸, for `q` = `basis`/10⁴ and `y_r` run r's values in
    /// the buckets up to `threshold`'s.
    fn deviations(&self, threshold: &Threshold, basis: i128) -> i128 {
        let below = self.squares.partition_point(|s| s.0 <= threshold.last());
        let (a, b) = self.squares[..below]
            .iter()
            .fold((0i128, 0i128), |(a, b), s| {
                (a + i128::from(s.1), b + i128::from(s.2))
            });
        100_000_000 * a - 20_000 * basis * b + basis * basis * i128::from(self.sizes_squared)
    }

    /// The cluster bootstrap's large-sample interval for the `p`-th percentile `value` of
    /// the runs' values (`p` to a hundredth): the fraction's variance from the sums kept,
    /// the ends read from the pooled sketch at ranks `q(N − 1) ± 1.96·N·√variance`.
    pub fn large_sample_interval(&self, p: f64, value: f64) -> Estimate {
        let n = self.all.count() as f64;
        let basis = (p.clamp(0.0, 100.0) * 100.0).round() as i128;
        let q = basis as f64 / 10_000.0;
        let variance = self.deviations(&Threshold::new(value), basis) as f64 / 1e8 / (n * n);
        let spread = stats::Z_975 * n * variance.max(0.0).sqrt();
        let rank = q * (n - 1.0);
        Estimate {
            value,
            low: self.all.at_rank(rank - spread).unwrap_or(value),
            high: self.all.at_rank(rank + spread).unwrap_or(value),
        }
    }
}

/// One run's sketches: what a fold is made of, and what it keeps while it is small enough
/// to resample its runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub run_id: String,
    pub ttft: Sketch,
    pub e2e: Sketch,
    /// The TTFT's layers, of the requests whose wait split whole ([`Layer`]).
    pub layers: crate::summary::Layers,
}

/// Runs of one group folded together (see the module's notes).
#[derive(Debug, Clone, PartialEq)]
pub struct Fold {
    pub samples: u64,
    pub errors: BTreeMap<String, u64>,
    /// Runs with at least one sample.
    pub runs: u64,
    pub ttft: Spread,
    pub e2e: Spread,
    /// Each layer of the TTFT, at [`Layer::index`].
    pub layers: [Spread; 3],
    /// Each run's median TTFT (of runs with one) as (value, how many runs), ascending.
    run_medians: Vec<(f64, u64)>,
    /// The runs' sketches by run id, while the fold has at most [`stats::RESAMPLE_LIMIT`]
    /// TTFTs or total times.
    listed: Option<Vec<Listed>>,
}

impl Default for Fold {
    fn default() -> Self {
        Self {
            samples: 0,
            errors: BTreeMap::new(),
            runs: 0,
            ttft: Spread::default(),
            e2e: Spread::default(),
            layers: Default::default(),
            run_medians: Vec::new(),
            listed: Some(Vec::new()),
        }
    }
}

/// Whether a fold with these counts keeps its runs' sketches.
fn keeps_runs(ttft: &Spread, e2e: &Spread) -> bool {
    ttft.all.count().min(e2e.all.count()) <= stats::RESAMPLE_LIMIT as u64
}

/// Folds of at least this many runs count their TTFTs and total times on two threads
/// (not in a browser, where the page has one): below it a thread costs more than it saves.
pub(crate) const RUNS_SIDE_BY_SIDE: usize = 2_000;

impl Fold {
    /// Runs, each with its answered requests' sketches, ascending by run id, each id once;
    /// their samples and errors are the caller's to add.
    pub fn of_runs(runs: Vec<Listed>) -> Self {
        debug_assert!(
            runs.windows(2).all(|w| w[0].run_id < w[1].run_id),
            "runs by id, once"
        );
        let count = runs.len() as u64;
        let spread = |pick: &dyn Fn(&Listed) -> &Sketch| {
            let mut spread = Spread::default();
            runs.iter().for_each(|run| spread.add_run(pick(run)));
            spread
        };
        let (ttft, e2e) = if runs.len() >= RUNS_SIDE_BY_SIDE && cfg!(not(target_arch = "wasm32")) {
            std::thread::scope(|scope| {
                let e2e = scope.spawn(|| spread(&|r| &r.e2e));
                let ttft = spread(&|r| &r.ttft);
                // A panic there is one here, as it would have been without the thread.
                let e2e = e2e
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                (ttft, e2e)
            })
        } else {
            (spread(&|r| &r.ttft), spread(&|r| &r.e2e))
        };
        let layers = Layer::ALL.map(|layer| spread(&|r| &r.layers[layer.index()]));
        let mut medians: Vec<f64> = runs
            .iter()
            .filter_map(|r| r.ttft.percentile(50.0))
            .collect();
        medians.sort_by(f64::total_cmp);
        let mut run_medians: Vec<(f64, u64)> = Vec::new();
        for m in medians {
            match run_medians.last_mut() {
                Some(last) if last.0.total_cmp(&m) == Ordering::Equal => last.1 += 1,
                _ => run_medians.push((m, 1)),
            }
        }
        let listed = keeps_runs(&ttft, &e2e).then_some(runs);
        Self {
            runs: count,
            ttft,
            e2e,
            layers,
            run_medians,
            listed,
            ..Fold::default()
        }
    }

    /// Adds another fold's runs, none of them in this one.
    pub fn merge(&mut self, other: Fold) {
        self.samples += other.samples;
        for (class, count) in other.errors {
            *self.errors.entry(class).or_default() += count;
        }
        self.runs += other.runs;
        self.ttft.merge(&other.ttft);
        self.e2e.merge(&other.e2e);
        for (mine, theirs) in self.layers.iter_mut().zip(&other.layers) {
            mine.merge(theirs);
        }
        self.run_medians = merge_counts(&self.run_medians, &other.run_medians);
        self.listed = match (self.listed.take(), other.listed) {
            (Some(a), Some(b)) if keeps_runs(&self.ttft, &self.e2e) => Some(merge_listed(a, b)),
            _ => None,
        };
    }

    /// The runs' sketches by run id, when the fold keeps them: always when it has at most
    /// [`stats::RESAMPLE_LIMIT`] TTFTs or total times.
    pub fn listed(&self) -> Option<&[Listed]> {
        self.listed.as_deref()
    }

    /// The median of the runs' median TTFTs, as [`stats::median`] gives it over them.
    pub fn median_of_run_medians(&self) -> Option<f64> {
        let total: u64 = self.run_medians.iter().map(|m| m.1).sum();
        let rank = 0.5 * total.checked_sub(1)? as f64;
        let (lo, hi) = (rank.floor() as u64, rank.ceil() as u64);
        let at = |k: u64| {
            let mut seen = 0;
            self.run_medians.iter().find_map(|&(value, count)| {
                seen += count;
                (seen > k).then_some(value)
            })
        };
        let (a, b) = (at(lo)?, at(hi)?);
        Some(a + (b - a) * (rank - lo as f64))
    }

    /// Compact bytes: a format byte, then every field (sketches as [`Sketch::encode`]
    /// writes them, each with its length; integers as variable-length ones).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = vec![FORMAT];
        for n in [self.samples, self.runs, self.errors.len() as u64] {
            put_varint(&mut out, n);
        }
        for (class, count) in &self.errors {
            put_bytes(&mut out, class.as_bytes());
            put_varint(&mut out, *count);
        }
        for spread in [&self.ttft, &self.e2e].into_iter().chain(&self.layers) {
            put_bytes(&mut out, &spread.all.encode());
            for &(_, a, b) in &spread.squares {
                put_varint(&mut out, a);
                put_varint(&mut out, b);
            }
            put_varint(&mut out, spread.sizes_squared);
            put_varint(&mut out, spread.runs);
        }
        put_varint(&mut out, self.run_medians.len() as u64);
        for &(value, count) in &self.run_medians {
            out.extend_from_slice(&value.to_le_bytes());
            put_varint(&mut out, count);
        }
        match &self.listed {
            None => out.push(0),
            Some(runs) => {
                out.push(1);
                put_varint(&mut out, runs.len() as u64);
                for run in runs {
                    put_bytes(&mut out, run.run_id.as_bytes());
                    put_bytes(&mut out, &run.ttft.encode());
                    put_bytes(&mut out, &run.e2e.encode());
                    put_bytes(&mut out, &crate::summary::layer::encode(&run.layers));
                }
            }
        }
        out
    }

    /// Reads what [`Fold::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, FoldError> {
        let (&format, mut rest) = bytes.split_first().ok_or(FoldError::Truncated)?;
        if format != FORMAT {
            return Err(FoldError::Format(format));
        }
        let rest = &mut rest;
        let mut fold = Fold {
            samples: take_varint(rest)?,
            runs: take_varint(rest)?,
            ..Fold::default()
        };
        for _ in 0..take_varint(rest)? {
            let class = String::from_utf8(take_bytes(rest)?.to_vec())
                .map_err(|_| FoldError::Damaged("an error class is not UTF-8"))?;
            fold.errors.insert(class, take_varint(rest)?);
        }
        let [before, server, network] = &mut fold.layers;
        for spread in [&mut fold.ttft, &mut fold.e2e, before, server, network] {
            spread.all = Sketch::decode(take_bytes(rest)?)?;
            let indexes: Vec<i32> = spread.all.buckets().iter().map(|b| b.0).collect();
            for index in indexes {
                let a = take_varint(rest)?;
                spread.squares.push((index, a, take_varint(rest)?));
            }
            spread.sizes_squared = take_varint(rest)?;
            spread.runs = take_varint(rest)?;
        }
        for _ in 0..take_varint(rest)? {
            let (head, tail) = rest.split_at_checked(8).ok_or(FoldError::Truncated)?;
            *rest = tail;
            let value = f64::from_le_bytes(head.try_into().expect("8 bytes"));
            fold.run_medians.push((value, take_varint(rest)?));
        }
        let (&listed, tail) = rest.split_first().ok_or(FoldError::Truncated)?;
        *rest = tail;
        fold.listed = match listed {
            0 => None,
            1 => {
                let mut runs = Vec::new();
                for _ in 0..take_varint(rest)? {
                    let run_id = String::from_utf8(take_bytes(rest)?.to_vec())
                        .map_err(|_| FoldError::Damaged("a run id is not UTF-8"))?;
                    let ttft = Sketch::decode(take_bytes(rest)?)?;
                    let e2e = Sketch::decode(take_bytes(rest)?)?;
                    runs.push(Listed {
                        run_id,
                        ttft,
                        e2e,
                        layers: crate::summary::layer::decode(take_bytes(rest)?)?,
                    });
                }
                Some(runs)
            }
            _ => {
                return Err(FoldError::Damaged(
                    "the list of runs is neither absent nor there",
                ));
            }
        };
        if !rest.is_empty() {
            return Err(FoldError::Damaged("bytes follow the fold"));
        }
        Ok(fold)
    }
}

/// The encoding's first byte, so a change of format is detected rather than misread. 2:
/// with the TTFT's layers (the collector's migration that added them dropped the folds
/// of format 1, which it makes again from the cells).
const FORMAT: u8 = 2;

/// Why bytes are not a fold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FoldError {
    #[error("a fold's encoding starts with format {FORMAT}, this one with {0}")]
    Format(u8),
    #[error("a fold's encoding ends early")]
    Truncated,
    #[error("a fold's encoding is damaged: {0}")]
    Damaged(&'static str),
    #[error("a fold's sketch: {0}")]
    Sketch(#[from] SketchError),
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn take_bytes<'a>(rest: &mut &'a [u8]) -> Result<&'a [u8], FoldError> {
    let len = usize::try_from(take_varint(rest)?).map_err(|_| FoldError::Truncated)?;
    let (head, tail) = rest.split_at_checked(len).ok_or(FoldError::Truncated)?;
    *rest = tail;
    Ok(head)
}

/// Adds `b`'s sums to `a`'s, bucket by bucket: in place when `a` has every bucket of `b`
/// (a fold of many runs has), else into a new list.
fn add_squares(a: &mut Vec<(i32, u64, u64)>, b: &[(i32, u64, u64)]) {
    let mut i = 0;
    let mut in_place = true;
    for &(index, ..) in b {
        while i < a.len() && a[i].0 < index {
            i += 1;
        }
        if i == a.len() || a[i].0 != index {
            in_place = false;
            break;
        }
    }
    if in_place {
        let mut i = 0;
        for &(index, x, y) in b {
            while a[i].0 < index {
                i += 1;
            }
            a[i].1 += x;
            a[i].2 += y;
        }
        return;
    }
    *a = merged(
        a,
        b,
        |x, y| x.0.cmp(&y.0),
        |x, y| (x.0, x.1 + y.1, x.2 + y.2),
    );
}

/// Two ascending (value, count) lists merged, counts of a value in both added.
fn merge_counts(a: &[(f64, u64)], b: &[(f64, u64)]) -> Vec<(f64, u64)> {
    merged(a, b, |x, y| x.0.total_cmp(&y.0), |x, y| (x.0, x.1 + y.1))
}

/// Two lists ascending by `order` merged into one, an entry in both `join`ed.
fn merged<T: Copy>(
    a: &[T],
    b: &[T],
    order: impl Fn(&T, &T) -> Ordering,
    join: impl Fn(&T, &T) -> T,
) -> Vec<T> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut i, mut j) = (0, 0);
    while i < a.len() || j < b.len() {
        let next = match (a.get(i), b.get(j)) {
            (Some(x), Some(y)) => order(x, y),
            (Some(_), None) => Ordering::Less,
            _ => Ordering::Greater,
        };
        match next {
            Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            Ordering::Equal => {
                out.push(join(&a[i], &b[j]));
                i += 1;
                j += 1;
            }
        }
    }
    out
}

/// Two lists of runs by id merged, still by id.
fn merge_listed(a: Vec<Listed>, b: Vec<Listed>) -> Vec<Listed> {
    if b.is_empty() {
        return a;
    }
    if a.is_empty() {
        return b;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
    while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
        let next = if x.run_id <= y.run_id {
            a.next()
        } else {
            b.next()
        };
        out.extend(next);
    }
    out.extend(a);
    out.extend(b);
    out
}
