//! The benchmark's printed tables: each case's median and p99, its differences from the
//! JS readers with bootstrap intervals, its slowest 1% and where they fell, and the p99 of
//! each block.

use firsttoken_core::stats::{BOOTSTRAP_SEED, SplitMix64, percentile};

use super::{BLOCKS, Case, KNOBS, OTHER_BLOCKS, Reader, WARMING};

pub(super) fn report(cases: &[Case]) {
    println!(
        "\nBias on loopback: browser TTFT minus the demo server's own time to write the first token\n\
         (demo {KNOBS}; one run, readers taking turns in blocks per level: {BLOCKS} in Chromium, \
         {OTHER_BLOCKS} in Firefox and WebKit)\n"
    );
    println!(
        "{:<8} {:>7} {:<41} {:>7} {:>9} {:>8} {:>16} {:>16} {:>15} {:>5}",
        "engine",
        "at once",
        "reader",
        "samples",
        "median ms",
        "p99 ms",
        "vs JS on page ms",
        "vs JS worker ms",
        "timer late p99",
        "conns"
    );
    for case in cases {
        let median = percentile(&case.bias, 50.0).unwrap_or(f64::NAN);
        let p99 = percentile(&case.bias, 99.0).unwrap_or(f64::NAN);
        let against = |reference: Reader| {
            let r = case.beside(cases, reference)?;
            (r.reader != case.reader).then(|| {
                format!(
                    "{:+.2} / {:+.2}",
                    median - percentile(&r.bias, 50.0).unwrap_or(f64::NAN),
                    p99 - percentile(&r.bias, 99.0).unwrap_or(f64::NAN)
                )
            })
        };
        let name = case.label();
        println!(
            "{:<8} {:>7} {:<41} {:>7} {:>9.2} {:>8.2} {:>16} {:>16} {:>15} {:>5}",
            case.engine.name(),
            case.level,
            name,
            case.bias.len(),
            median,
            p99,
            against(Reader::JsOnPage).unwrap_or_else(|| "—".into()),
            against(Reader::JsInWorker).unwrap_or_else(|| "—".into()),
            case.timer_p99
                .iter()
                .copied()
                .reduce(f64::max)
                .map_or("—".to_owned(), |t| format!("{t:.1}")),
            case.connections,
        );
    }
    println!(
        "\nDifferences with 95% bootstrap intervals (each case's values resampled on their own):\n"
    );
    println!(
        "{:<8} {:>7} {:<41} {:>26} {:>26} {:>26} {:>26}",
        "engine",
        "at once",
        "reader",
        "median vs JS on page",
        "p99 vs JS on page",
        "median vs JS in worker",
        "p99 vs JS in worker"
    );
    for case in cases
        .iter()
        .filter(|c| matches!(c.reader, Reader::Still | Reader::Charts | Reader::Page))
    {
        let cell = |reference: Reader, p: f64| {
            case.beside(cases, reference).map_or("—".to_owned(), |r| {
                let (value, low, high) = difference_ci(&case.bias, &r.bias, p);
                format!("{value:+.2} [{low:+.2}, {high:+.2}]")
            })
        };
        let name = case.label();
        println!(
            "{:<8} {:>7} {:<41} {:>26} {:>26} {:>26} {:>26}",
            case.engine.name(),
            case.level,
            name,
            cell(Reader::JsOnPage, 50.0),
            cell(Reader::JsOnPage, 99.0),
            cell(Reader::JsInWorker, 50.0),
            cell(Reader::JsInWorker, 99.0),
        );
    }
    println!("\nThe slowest 1% of each case: value ms (block, place in the block)\n");
    for case in cases {
        let mut order: Vec<usize> = (0..case.bias.len()).collect();
        order.sort_by(|&a, &b| case.bias[b].total_cmp(&case.bias[a]));
        let slowest: Vec<String> = order
            .iter()
            .take(case.bias.len().div_ceil(100))
            .map(|&i| {
                let (block, place) = case.positions[i];
                format!("{:.1} ({block}, {place})", case.bias[i])
            })
            .collect();
        println!(
            "{:<8} {:>3} {:<41} {}",
            case.engine.name(),
            case.level,
            case.reader.name(),
            slowest.join("  ")
        );
    }
    // Where a tail comes from: one block (the browser's first page load of the case, say)
    // or the start of every block (the engine's code warming up after each page load).
    println!(
        "\nThe p99 of each block, then the p99 of every block's first {WARMING} requests and of \
         the rest\n"
    );
    for case in cases {
        let blocks = case.positions.last().map_or(0, |&(b, _)| b + 1);
        let p99_of = |keep: &dyn Fn(u32, u32) -> bool| {
            let values: Vec<f64> = case
                .bias
                .iter()
                .zip(&case.positions)
                .filter(|(_, (b, i))| keep(*b, *i))
                .map(|(v, _)| *v)
                .collect();
            percentile(&values, 99.0).map_or("—".to_owned(), |p| format!("{p:.2}"))
        };
        let per_block: Vec<String> = (0..blocks)
            .map(|b| p99_of(&|block, _| block == b))
            .collect();
        println!(
            "{:<8} {:>3} {:<41} blocks {}   first {WARMING} {}   rest {}",
            case.engine.name(),
            case.level,
            case.reader.name(),
            per_block.join(" "),
            p99_of(&|_, place| place < WARMING),
            p99_of(&|_, place| place >= WARMING),
        );
    }
    println!(
        "\n\"vs JS\": median / p99 minus the JS reader's at the same level (busy against busy).\n\
         Level 10: HTTP/2 over TLS (one connection); the others: HTTP/1.1.\n\
         \"timer late p99\": the engine's own 100 ms timer, the worst block's p99.\n\
         \"conns\": TCP connections the server accepted during the case, page loads included."
    );
}

impl Case {
    /// The reader's name, and whether the page's main thread was kept busy.
    fn label(&self) -> String {
        if self.busy {
            format!("{}, main thread busy", self.reader.name())
        } else {
            self.reader.name().to_owned()
        }
    }

    /// The case `reference` stands beside: same engine, level and load.
    fn beside<'a>(&self, cases: &'a [Case], reference: Reader) -> Option<&'a Case> {
        cases.iter().find(|c| {
            c.engine == self.engine
                && c.level == self.level
                && c.busy == self.busy
                && c.reader == reference
        })
    }
}

/// `p`-th percentile of `a` minus that of `b`, with a 95% percentile-bootstrap interval
/// drawn by resampling each of them on its own.
fn difference_ci(a: &[f64], b: &[f64], p: f64) -> (f64, f64, f64) {
    let value = percentile(a, p).unwrap_or(f64::NAN) - percentile(b, p).unwrap_or(f64::NAN);
    let mut rng = SplitMix64::new(BOOTSTRAP_SEED);
    let mut resample = |values: &[f64]| -> f64 {
        let drawn: Vec<f64> = (0..values.len())
            .map(|_| values[rng.below(values.len())])
            .collect();
        percentile(&drawn, p).unwrap_or(f64::NAN)
    };
    let differences: Vec<f64> = (0..2000).map(|_| resample(a) - resample(b)).collect();
    (
        value,
        percentile(&differences, 2.5).unwrap_or(f64::NAN),
        percentile(&differences, 97.5).unwrap_or(f64::NAN),
    )
}
