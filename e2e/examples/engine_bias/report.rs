//! The benchmark's printed tables: each case's median and p99, its differences from the
//! JS readers with bootstrap intervals, its slowest 1% and where they fell, the p99 of
//! each block, and what the machine did during each block.

use anyhow::Context;
use firsttoken_crowd::stats::{BOOTSTRAP_SEED, SplitMix64, mean, percentile};
use serde_json::json;

use super::machine::During;
use super::{BLOCK_REQUESTS, Case, KNOBS, OTHER_BLOCKS, Reader, WARMING};

pub(super) fn report(cases: &[Case]) {
    println!(
        "\nBias on loopback: browser TTFT minus the demo server's own time to write the first token\n\
         (demo {KNOBS}; one run, readers taking turns in blocks per level, of \
         {BLOCK_REQUESTS} requests in Chromium, {OTHER_BLOCKS} blocks in Firefox and WebKit)\n"
    );
    println!(
        "{:<8} {:>7} {:<41} {:>7} {:>9} {:>8} {:>16} {:>16} {:>16} {:>15} {:>5} {:>7}",
        "engine",
        "at once",
        "reader",
        "samples",
        "median ms",
        "p99 ms",
        "vs JS on page ms",
        "vs JS worker ms",
        "vs JS paced ms",
        "timer late p99",
        "conns",
        "browser CPU %"
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
            "{:<8} {:>7} {:<41} {:>7} {:>9.2} {:>8.2} {:>16} {:>16} {:>16} {:>15} {:>5} {:>7.0}",
            case.engine.name(),
            case.level,
            name,
            case.bias.len(),
            median,
            p99,
            against(Reader::JsOnPage).unwrap_or_else(|| "—".into()),
            against(Reader::JsInWorker).unwrap_or_else(|| "—".into()),
            against(Reader::JsPaced).unwrap_or_else(|| "—".into()),
            case.timer_p99
                .iter()
                .copied()
                .reduce(f64::max)
                .map_or("—".to_owned(), |t| format!("{t:.1}")),
            case.connections,
            mean(
                &case
                    .machine
                    .iter()
                    .map(|m| m.browser_pct)
                    .collect::<Vec<_>>()
            )
            .unwrap_or(f64::NAN),
        );
    }
    println!(
        "\nDifferences with 95% bootstrap intervals (whole rounds resampled: a round is one block \
         of each case, in turn). The JS reader in a worker is compared with the one on the \
         page too (what a worker thread costs by itself), and the paced one with both (what \
         the engine's pause after each batch costs by itself)."
    );
    differences(cases, &|_| true);
    println!(
        "\nThe same, from only the rounds in which the host stole less than \
         {STEAL_LIMIT_PCT}% of the machine's CPU during both cases' blocks (\"kept\": the \
         case's blocks under that limit / all):"
    );
    differences(cases, &|m| m.steal_pct < STEAL_LIMIT_PCT);
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
            case.label(),
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
            case.label(),
            per_block.join(" "),
            p99_of(&|_, place| place < WARMING),
            p99_of(&|_, place| place >= WARMING),
        );
    }
    println!(
        "\nThe machine during each block: this process's 1 ms sleeper's latest wake-up ms / \
         this process's CPU % (the benchmark and the demo server) / other programs' CPU % / \
         the host's steal %\n"
    );
    for case in cases {
        let blocks: Vec<String> = case
            .machine
            .iter()
            .map(|m| {
                format!(
                    "{:.0}/{:.0}/{:.0}/{:.0}",
                    m.longest_stall_ms, m.ours_pct, m.others_pct, m.steal_pct
                )
            })
            .collect();
        println!(
            "{:<8} {:>3} {:<41} {}",
            case.engine.name(),
            case.level,
            case.label(),
            blocks.join(" "),
        );
    }
    println!(
        "\n\"vs JS\": median / p99 minus the JS reader's at the same level (busy against busy).\n\
         Level 10: HTTP/2 over TLS (one connection); the others: HTTP/1.1.\n\
         \"timer late p99\": the engine's own 100 ms timer, the worst block's p99.\n\
         \"conns\": TCP connections the server accepted during the case, page loads included.\n\
         \"browser CPU %\": the browser's processes' share of the machine's CPU time (all cores),\n\
         the mean over the case's blocks, page loads included."
    );
}

impl Case {
    /// The reader's name, and whether the page's main thread was kept busy.
    fn label(&self) -> String {
        let mut label = self.reader.name().to_owned();
        if self.busy {
            label.push_str(", main thread busy");
        }
        if self.slowdown > 1 {
            label.push_str(&format!(", CPU {}× slower", self.slowdown));
        }
        label
    }

    /// The values of each block, by round (the readers take turns, so block `k` of every
    /// case of a level ran in round `k`); `None` where `keep` leaves the block out.
    fn rounds(&self, keep: &dyn Fn(&During) -> bool) -> Vec<Option<Vec<f64>>> {
        let mut blocks = vec![Vec::new(); self.machine.len()];
        for (&value, &(block, _)) in self.bias.iter().zip(&self.positions) {
            blocks[block as usize].push(value);
        }
        blocks
            .into_iter()
            .zip(&self.machine)
            .map(|(values, machine)| (!values.is_empty() && keep(machine)).then_some(values))
            .collect()
    }

    /// The case `reference` stands beside: same engine, level and load.
    fn beside<'a>(&self, cases: &'a [Case], reference: Reader) -> Option<&'a Case> {
        cases.iter().find(|c| {
            c.engine == self.engine
                && c.level == self.level
                && c.busy == self.busy
                && c.slowdown == self.slowdown
                && c.reader == reference
        })
    }
}

/// The blocks in which the host's steal is too much for a block to stand for the
/// readers: a shared machine's host took up to a quarter of its CPU in some blocks, and
/// every reader's p99 in such a block was twice its p99 elsewhere.
const STEAL_LIMIT_PCT: f64 = 5.0;

/// The JS readers, in the order they are compared with: each case is compared with every
/// one listed before it.
const REFERENCES: [Reader; 3] = [Reader::JsOnPage, Reader::JsInWorker, Reader::JsPaced];

/// Each case against the JS readers listed before it in [`REFERENCES`] (every engine case
/// against all three; the JS reader in a worker against the one on the page, what a
/// worker thread costs by itself; the paced one against both, what the engine's pause
/// costs by itself): median and p99 differences with 95% intervals, over the rounds in
/// which `keep` keeps both cases' blocks.
fn differences(cases: &[Case], keep: &dyn Fn(&During) -> bool) {
    println!(
        "\n{:<8} {:>7} {:<41} {:<38} {:>26} {:>26} {:>7}",
        "engine", "at once", "reader", "against", "median difference", "p99 difference", "kept"
    );
    for case in cases {
        let mine = case.rounds(keep);
        let references = REFERENCES
            .iter()
            .take_while(|&&r| r != case.reader)
            .filter_map(|&r| case.beside(cases, r));
        for reference in references {
            let theirs = reference.rounds(keep);
            let cell = |p: f64| match difference_ci(&mine, &theirs, p) {
                Some((value, low, high)) => format!("{value:+.2} [{low:+.2}, {high:+.2}]"),
                None => "no rounds".to_owned(),
            };
            println!(
                "{:<8} {:>7} {:<41} {:<38} {:>26} {:>26} {:>7}",
                case.engine.name(),
                case.level,
                case.label(),
                reference.reader.name(),
                cell(50.0),
                cell(99.0),
                format!("{}/{}", mine.iter().flatten().count(), case.machine.len()),
            );
        }
    }
}

/// Saves every value with its block, and each block's machine, for another look without
/// another run: `target/engine_bias.json`.
pub(super) fn save(cases: &[Case]) -> anyhow::Result<()> {
    let cases: Vec<_> = cases
        .iter()
        .map(|c| {
            json!({
                "engine": c.engine.name(),
                "level": c.level,
                "reader": c.label(),
                "bias_ms": c.bias,
                "block": c.positions.iter().map(|(b, _)| b).collect::<Vec<_>>(),
                "timer_late_p99_ms": c.timer_p99,
                "machine": c.machine.iter().map(|m| json!({
                    "longest_stall_ms": m.longest_stall_ms,
                    "browser_pct": m.browser_pct,
                    "ours_pct": m.ours_pct,
                    "others_pct": m.others_pct,
                    "steal_pct": m.steal_pct,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let dir = firsttoken_e2e::workspace_root().join("target");
    std::fs::create_dir_all(&dir).with_context(|| format!("making {}", dir.display()))?;
    let path = dir.join("engine_bias.json");
    std::fs::write(&path, serde_json::to_vec(&cases)?)
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "\nEvery value, with its block and the machine's: {}",
        path.display()
    );
    Ok(())
}

/// `p`-th percentile of `a`'s values minus that of `b`'s, over the rounds in which both
/// have a block, with a 95% percentile-bootstrap interval that resamples whole rounds:
/// the requests of one block share a page load and a stretch of the machine's time, so
/// they are not independent (resampling them one by one would make the interval too
/// narrow), and the blocks of one round share that stretch of the machine with each
/// other (the same drawn rounds for both cases keep that pairing, so a slow minute of
/// the machine falls on both sides of a difference, as it did in the run). `None`
/// without a round in common.
fn difference_ci(
    a: &[Option<Vec<f64>>],
    b: &[Option<Vec<f64>>],
    p: f64,
) -> Option<(f64, f64, f64)> {
    let paired: Vec<(&Vec<f64>, &Vec<f64>)> = a
        .iter()
        .zip(b)
        .filter_map(|(a, b)| Some((a.as_ref()?, b.as_ref()?)))
        .collect();
    if paired.is_empty() {
        return None;
    }
    let difference = |drawn: &[usize]| {
        let a: Vec<f64> = drawn
            .iter()
            .flat_map(|&i| paired[i].0.iter().copied())
            .collect();
        let b: Vec<f64> = drawn
            .iter()
            .flat_map(|&i| paired[i].1.iter().copied())
            .collect();
        percentile(&a, p).unwrap_or(f64::NAN) - percentile(&b, p).unwrap_or(f64::NAN)
    };
    let all: Vec<usize> = (0..paired.len()).collect();
    let value = difference(&all);
    let mut rng = SplitMix64::new(BOOTSTRAP_SEED);
    let differences: Vec<f64> = (0..2000)
        .map(|_| {
            let drawn: Vec<usize> = (0..paired.len()).map(|_| rng.below(paired.len())).collect();
            difference(&drawn)
        })
        .collect();
    Some((
        value,
        percentile(&differences, 2.5).unwrap_or(f64::NAN),
        percentile(&differences, 97.5).unwrap_or(f64::NAN),
    ))
}
