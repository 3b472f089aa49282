//! A mergeable histogram of times with a bounded relative error: what the collector keeps
//! per run and group of samples so a summary reads thousands of small histograms instead
//! of a million values (ARCHITECTURE.md, "The statistics").
//!
//! The buckets grow geometrically, as in DDSketch (Masson, Rim & Lee, 2019): bucket `i`
//! holds the values in `(γ^(i−1), γ^i]` with `γ = (1 + α)/(1 − α)`, and stands for them by
//! `2γ^i/(γ + 1)`, which is within `α` of every one of them, relatively. Values at or below
//! [`SMALLEST`] share one bucket that stands for 0.
//!
//! When each value is replaced by one within `α` of it, every order statistic moves by at
//! most `α` too, so every percentile (an interpolation between two order statistics) is
//! within `α` of the exact one. The same holds for a bootstrap over the replacements (each
//! resample's percentile is within `α` of the resample's exact one) and so for its
//! interval. Count, sum, minimum and maximum are kept exactly: a
//! sketch stands for its minimum, its maximum, and every other value as its bucket's
//! representative clamped to them. Each of those is within `α` of the value it stands
//! for, and that alone bounds every order statistic of them (and of sketches merged or
//! listed together) within `α` of the true one.

/// The largest relative error of a value read back from a sketch.
pub const RELATIVE_ERROR: f64 = 0.0025;
/// Values at or below this many milliseconds count as 0 (one microsecond: below what a
/// browser's clock resolves).
pub const SMALLEST: f64 = 0.001;

/// The bucket of values at or below [`SMALLEST`].
const ZERO: i32 = i32::MIN;
/// The encoding's first byte, so a change of format is detected rather than misread.
const FORMAT: u8 = 1;

/// `ln γ` and `2/(γ + 1)`, worked out once.
static CONSTANTS: std::sync::LazyLock<(f64, f64)> = std::sync::LazyLock::new(|| {
    let gamma = (1.0 + RELATIVE_ERROR) / (1.0 - RELATIVE_ERROR);
    (gamma.ln(), 2.0 / (gamma + 1.0))
});

fn ln_gamma() -> f64 {
    CONSTANTS.0
}

/// The bucket `value` falls in.
pub fn bucket(value: f64) -> i32 {
    if value <= SMALLEST || value.is_nan() {
        return ZERO;
    }
    // Clamped well inside i32: times past 10^300 ms are not times.
    (value.ln() / ln_gamma()).ceil().clamp(-1e6, 1e6) as i32
}

/// The value bucket `index` stands for.
pub fn representative(index: i32) -> f64 {
    if index == ZERO {
        return 0.0;
    }
    (f64::from(index) * ln_gamma()).exp() * CONSTANTS.1
}

/// A value to count values at or below by their buckets (`crate::fold`), with the last
/// bucket whose representative is at or below it, worked out once for every run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Threshold {
    /// The largest bucket index whose [`representative`] is at or below `value`
    /// (representatives grow with the index, so every smaller index's is too).
    last: i32,
}

impl Threshold {
    pub fn new(value: f64) -> Self {
        let last = if value.is_nan() || value <= 0.0 {
            ZERO
        } else if value.is_infinite() {
            i32::MAX
        } else {
            // The bucket `value` falls in, or the one below: its representative lies
            // inside the bucket, on either side of `value`. Stepped until exact.
            let mut index = (value.ln() / ln_gamma()).ceil().clamp(-1e6, 1e6) as i32;
            while index > -1_000_000 && representative(index) > value {
                index -= 1;
            }
            while index < 1_000_000 && representative(index + 1) <= value {
                index += 1;
            }
            index
        };
        Self { last }
    }

    /// The last bucket counted at or below the threshold.
    pub(crate) fn last(&self) -> i32 {
        self.last
    }
}

/// Why bytes are not a sketch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SketchError {
    #[error("a sketch's encoding starts with format {FORMAT}, this one with {0}")]
    Format(u8),
    #[error("a sketch's encoding ends early")]
    Truncated,
    #[error("a sketch's encoding has a bucket index out of range")]
    Index,
    #[error("bytes follow the sketches of a cell's layers")]
    Trailing,
}

/// Counts of values by bucket, with their exact count, sum, minimum and maximum.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sketch {
    /// (bucket, count), by bucket ascending, no count 0: a run's values fill a few dozen.
    buckets: Vec<(i32, u64)>,
    count: u64,
    sum: f64,
    min: f64,
    max: f64,
}

impl Sketch {
    /// Counts `value` (milliseconds); NaN and infinities are left out, negative values
    /// count as 0.
    pub fn add(&mut self, value: f64) {
        if !value.is_finite() {
            return;
        }
        let value = value.max(0.0);
        let index = bucket(value);
        match self.buckets.binary_search_by_key(&index, |b| b.0) {
            Ok(at) => self.buckets[at].1 += 1,
            Err(at) => self.buckets.insert(at, (index, 1)),
        }
        if self.count == 0 {
            (self.min, self.max) = (value, value);
        } else {
            self.min = self.min.min(value);
            self.max = self.max.max(value);
        }
        self.count += 1;
        self.sum += value;
    }

    /// Adds the values `other` counted.
    pub fn merge(&mut self, other: &Sketch) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            self.clone_from(other);
            return;
        }
        if !add_in_place(&mut self.buckets, &other.buckets) {
            self.buckets = merged(&self.buckets, &other.buckets);
        }
        if self.count == 0 {
            (self.min, self.max) = (other.min, other.max);
        } else {
            self.min = self.min.min(other.min);
            self.max = self.max.max(other.max);
        }
        self.count += other.count;
        self.sum += other.sum;
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// The counts by bucket, ascending, none 0.
    pub(crate) fn buckets(&self) -> &[(i32, u64)] {
        &self.buckets
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The exact mean; `None` when empty.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum / self.count as f64)
    }

    /// The exact minimum; `None` when empty.
    pub fn min(&self) -> Option<f64> {
        (self.count > 0).then_some(self.min)
    }

    /// The exact maximum; `None` when empty.
    pub fn max(&self) -> Option<f64> {
        (self.count > 0).then_some(self.max)
    }

    /// The values the sketch stands for, ascending, as (value, how many): the exact
    /// minimum and maximum once each, every other value as its bucket's representative
    /// clamped to them.
    pub fn values(&self) -> impl Iterator<Item = (f64, u64)> + '_ {
        let (n, last) = (self.count, self.buckets.len().saturating_sub(1));
        // With two values or more the minimum and the maximum stand apart, each taking one
        // count from the first and the last bucket.
        let middle = self
            .buckets
            .iter()
            .enumerate()
            .filter(move |_| n >= 2)
            .filter_map(move |(i, &(index, count))| {
                let count = count - u64::from(i == 0) - u64::from(i == last);
                (count > 0).then(|| (representative(index).clamp(self.min, self.max), count))
            });
        std::iter::once((self.min, 1))
            .filter(move |_| n >= 1)
            .chain(middle)
            .chain(std::iter::once((self.max, 1)).filter(move |_| n >= 2))
    }

    /// The value at fractional rank `rank` (0 to count − 1), interpolated between the two
    /// order statistics around it, as [`crate::stats::percentile_sorted`] does.
    pub fn at_rank(&self, rank: f64) -> Option<f64> {
        let last = self.count.checked_sub(1)?;
        let rank = rank.clamp(0.0, last as f64);
        let (lo, hi) = (rank.floor() as u64, rank.ceil() as u64);
        let (mut a, mut b, mut seen) = (None, None, 0);
        for (value, count) in self.values() {
            seen += count;
            if a.is_none() && seen > lo {
                a = Some(value);
            }
            if seen > hi {
                b = Some(value);
                break;
            }
        }
        let (a, b) = (a?, b?);
        Some(a + (b - a) * (rank - lo as f64))
    }

    /// The `p`-th percentile (0–100), by linear interpolation between closest ranks:
    /// within [`RELATIVE_ERROR`] of the exact percentile of the values counted.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let last = self.count.checked_sub(1)?;
        self.at_rank(p.clamp(0.0, 100.0) / 100.0 * last as f64)
    }

    /// The values it stands for, one by one, ascending.
    pub fn expand(&self) -> Vec<f64> {
        let mut values = Vec::with_capacity(self.count as usize);
        for (value, count) in self.values() {
            values.extend(std::iter::repeat_n(value, count as usize));
        }
        values
    }

    /// Compact bytes: a format byte, the count's sum, minimum and maximum, then each bucket
    /// as the difference from the previous index and its count (variable-length integers).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(25 + 3 * self.buckets.len());
        out.push(FORMAT);
        for x in [self.sum, self.min, self.max] {
            out.extend_from_slice(&x.to_le_bytes());
        }
        let zeros = match self.buckets.first() {
            Some(&(ZERO, count)) => count,
            _ => 0,
        };
        put_varint(&mut out, zeros);
        let mut previous = 0i64;
        for &(index, count) in self.buckets.iter().filter(|b| b.0 != ZERO) {
            let delta = i64::from(index) - previous;
            put_varint(&mut out, ((delta << 1) ^ (delta >> 63)) as u64);
            put_varint(&mut out, count);
            previous = i64::from(index);
        }
        out
    }

    /// Reads what [`Sketch::encode`] wrote.
    pub fn decode(bytes: &[u8]) -> Result<Self, SketchError> {
        let (&format, mut rest) = bytes.split_first().ok_or(SketchError::Truncated)?;
        if format != FORMAT {
            return Err(SketchError::Format(format));
        }
        let mut float = || -> Result<f64, SketchError> {
            let (head, tail) = rest.split_at_checked(8).ok_or(SketchError::Truncated)?;
            rest = tail;
            Ok(f64::from_le_bytes(head.try_into().expect("8 bytes")))
        };
        let (sum, min, max) = (float()?, float()?, float()?);
        let mut sketch = Sketch {
            sum,
            min,
            max,
            ..Sketch::default()
        };
        let zeros = take_varint(&mut rest)?;
        if zeros > 0 {
            sketch.buckets.push((ZERO, zeros));
        }
        let mut previous = 0i64;
        while !rest.is_empty() {
            let zigzag = take_varint(&mut rest)?;
            let delta = (zigzag >> 1) as i64 ^ -((zigzag & 1) as i64);
            let index = previous.checked_add(delta).ok_or(SketchError::Index)?;
            let count = take_varint(&mut rest)?;
            // Ascending, as written: anything else was not written by encode.
            let index32 = i32::try_from(index)
                .ok()
                .filter(|i| *i != ZERO && sketch.buckets.last().is_none_or(|b| b.0 < *i))
                .ok_or(SketchError::Index)?;
            if count > 0 {
                sketch.buckets.push((index32, count));
            }
            previous = index;
        }
        sketch.count = sketch
            .buckets
            .iter()
            .fold(0u64, |total, b| total.saturating_add(b.1));
        Ok(sketch)
    }
}

/// Adds `b`'s counts to `a` when `a` has every bucket of `b` (a group's total, once it has
/// seen a few runs, has), without a new list; whether it could. Two passes over the
/// lists, looking and then adding, so that a summary's millions of merges allocate
/// nothing.
fn add_in_place(a: &mut [(i32, u64)], b: &[(i32, u64)]) -> bool {
    // Look: every bucket of b is in a.
    let mut i = 0;
    for &(index, _) in b {
        while i < a.len() && a[i].0 < index {
            i += 1;
        }
        if i == a.len() || a[i].0 != index {
            return false;
        }
    }
    // Add: the same walk, now known to find each.
    let mut i = 0;
    for &(index, count) in b {
        while a[i].0 < index {
            i += 1;
        }
        a[i].1 += count;
    }
    true
}

/// Two bucket lists merged, counts of a bucket in both added.
fn merged(a: &[(i32, u64)], b: &[(i32, u64)]) -> Vec<(i32, u64)> {
    let mut out = Vec::with_capacity(a.len().max(b.len()) + 8);
    let (mut i, mut j) = (0, 0);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => {
                out.push(a[i]);
                i += 1;
            }
            std::cmp::Ordering::Greater => {
                out.push(b[j]);
                j += 1;
            }
            std::cmp::Ordering::Equal => {
                out.push((a[i].0, a[i].1 + b[j].1));
                i += 1;
                j += 1;
            }
        }
    }
    out.extend_from_slice(&a[i..]);
    out.extend_from_slice(&b[j..]);
    out
}

pub(crate) fn put_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

pub(crate) fn take_varint(bytes: &mut &[u8]) -> Result<u64, SketchError> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes.split_first().ok_or(SketchError::Truncated)?;
        *bytes = rest;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(SketchError::Truncated)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{self, SplitMix64};

    /// Times spread over five decades, as TTFTs of a slow crowd are.
    fn times(n: usize, seed: u64) -> Vec<f64> {
        let mut rng = SplitMix64::new(seed);
        (0..n)
            .map(|_| {
                let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
                0.5 * 10f64.powf(5.0 * u)
            })
            .collect()
    }

    #[test]
    fn every_percentile_is_within_the_relative_error() {
        let values = times(20_000, 7);
        let mut sketch = Sketch::default();
        values.iter().for_each(|&v| sketch.add(v));
        let sorted = stats::sorted(&values);
        for p in (0..=1000).map(|i| f64::from(i) / 10.0) {
            let exact = stats::percentile_sorted(&sorted, p).expect("values");
            let read = sketch.percentile(p).expect("values");
            assert!(
                (read - exact).abs() <= RELATIVE_ERROR * exact,
                "p{p}: {read} against {exact}"
            );
        }
        assert_eq!(sketch.min(), sorted.first().copied());
        assert_eq!(sketch.max(), sorted.last().copied());
        assert_eq!(sketch.percentile(0.0), sorted.first().copied());
        assert_eq!(sketch.percentile(100.0), sorted.last().copied());
        let mean = stats::mean(&values).expect("values");
        assert!((sketch.mean().expect("values") - mean).abs() < 1e-9 * mean);
    }

    #[test]
    fn merging_equals_counting_together_and_encoding_round_trips() {
        let (a, b) = (times(500, 1), times(700, 2));
        let (mut sa, mut sb, mut both) = (Sketch::default(), Sketch::default(), Sketch::default());
        a.iter().for_each(|&v| sa.add(v));
        b.iter().for_each(|&v| sb.add(v));
        a.iter().chain(&b).for_each(|&v| both.add(v));
        sa.add(0.0);
        both.add(0.0);
        let mut copy = Sketch::default();
        copy.merge(&sb);
        assert_eq!(copy, sb, "merged into an empty sketch");
        sa.merge(&sb);
        assert_eq!(sa.buckets, both.buckets);
        assert_eq!((sa.count, sa.min, sa.max), (both.count, both.min, both.max));
        let decoded = Sketch::decode(&sa.encode()).expect("its own encoding");
        assert_eq!(decoded, sa);
        assert!(sa.encode().len() < 4 * sa.buckets.len() + 40);
    }

    #[test]
    fn bad_bytes_are_named() {
        assert_eq!(Sketch::decode(&[]), Err(SketchError::Truncated));
        assert_eq!(Sketch::decode(&[9]), Err(SketchError::Format(9)));
        let mut bytes = Sketch::default().encode();
        bytes.push(0x80);
        assert_eq!(Sketch::decode(&bytes), Err(SketchError::Truncated));
    }

    /// A threshold's bucket is the last whose representative is at or below its value,
    /// and merging in place adds exactly what merging into a new list does.
    #[test]
    fn a_thresholds_bucket_and_merging_in_place_are_their_definitions() {
        for value in times(2_000, 12).into_iter().chain([SMALLEST, 0.0011, 7.0]) {
            let last = Threshold::new(value).last;
            assert!(representative(last) <= value, "{value}: {last}");
            assert!(representative(last + 1) > value, "{value}: {last}");
        }
        for (a, b) in [(300, 30), (30, 300), (1, 1), (0, 5)] {
            let (mut sa, mut sb) = (Sketch::default(), Sketch::default());
            times(a, 11).iter().for_each(|&v| sa.add(v));
            times(b, 11).iter().for_each(|&v| sb.add(v));
            let expected = merged(&sa.buckets, &sb.buckets);
            let mut buckets = sa.buckets.clone();
            if add_in_place(&mut buckets, &sb.buckets) {
                assert_eq!(buckets, expected, "{a} and {b}");
            } else {
                assert_eq!(buckets, sa.buckets, "{a} and {b}: untouched when it cannot");
            }
        }
    }

    #[test]
    fn nothing_counted_reads_as_nothing() {
        let sketch = Sketch::default();
        assert_eq!(sketch.percentile(50.0), None);
        assert_eq!(sketch.mean(), None);
        assert_eq!(Sketch::decode(&sketch.encode()), Ok(sketch));
    }
}
