//! The engine's bias on loopback: the TTFT the browser measured minus the demo server's own
//! time from receiving the request to writing the first token (which the demo reports in
//! its final event), at 1, 3, 5 and 10 requests at once, beside a minimal hand-written
//! JavaScript fetch reader doing the same in the same browser, all in one run; then, in
//! Firefox ESR and WebKitGTK, at 1 and 3 at once, the engine with live charts beside the
//! same JS reader in that engine (`FIRSTTOKEN_BENCH_ENGINES=firefox,webkit` runs only
//! those). Levels 1, 3
//! and 5 go to the demo over HTTP/1.1; 10 at once would queue in the browser there (six
//! connections per host), so level 10 goes to the same server over TLS and HTTP/2
//! ([`firsttoken_e2e::tls`]), in a plan marked multiplexed.
//!
//! At each level five readers take turns, in blocks, so that the machine's drift (this is
//! a shared 2-core machine; a quiet minute and a busy one differ by half a millisecond at
//! the median) falls on all of them alike:
//! - the JS reader on the app's page (the reference the issue names;
//!   [`firsttoken_e2e::READER`]);
//! - the same JS reader in a dedicated worker of its own (what a worker thread costs by
//!   itself);
//! - the same JS reader in a worker, pausing after each batch as the engine does (the page
//!   is told, draws a line of text in its next frame, waits two frames more and 30 ms,
//!   and answers; the worker notices in 2 ms polls): a request sent after a pause starts
//!   colder than one sent straight after another, whoever sends it, so this is the
//!   like-for-like reference for what the engine's own code costs;
//! - the engine in its Web Worker with the page still (`?charts=off`: nothing redraws but
//!   the progress line);
//! - the engine with the live charts redrawing, as a beta user sees them.
//!
//! Each block begins with one warm-up request, not counted, for every reader alike (the
//! first request after a page load pays for the connection and the CORS preflight, and
//! every protocol a beta user runs begins with one; `FIRSTTOKEN_BENCH_WARMUP` asks for
//! more, to tell a slow start after a page load from the rest). The differences are
//! printed with 95% bootstrap intervals that resample whole rounds (a round: one block of
//! each reader, in turn), each case's slowest 1% with where in its block each fell (a p99 is
//! decided by a handful of requests, and at several at once a pause of the browser delays
//! a whole batch), and the p99 of each block. Beside each block, what the machine did
//! meanwhile ([`machine`]): whether a sleeper thread in this process woke late, and the
//! CPU time of other programs and of the host. A slow stretch that came with the
//! machine's is not the reader's.
//!
//! Nothing asks the browser anything while a reader measures: the JS readers are one
//! script each, and the engine's run is waited for by one script that watches the page
//! ([`Browser::wait_for_text_quietly`]). Polling through WebDriver every 50 ms, as the
//! tests do, had put about 170 DevTools messages a second on the engine page's main
//! thread and on the browser's, during the batches: the engine's p99 at 10 at once
//! carried 2–3 ms of the benchmark's own questions.
//!
//! Then, at 1 at once, what the worker is for: the main thread kept busy (30 ms of work
//! every 40 ms, a phone far slower than this machine) under the JS reader on the page, the
//! engine in its worker, and the same engine on the page's thread. Also counted: the TCP
//! connections the server accepted during each case (page loads included), which shows
//! that the worker shares the page's connection pool.
//!
//! Last, a phone's CPU: Chromium's CPU made four times slower through DevTools
//! (`Emulation.setCPUThrottlingRate`, as mobile page tests do), at 1, 3 and 5 at once,
//! the JS reader on the page and paced in a worker beside the engine (page still, and
//! live charts); the question is whether the engine's median and p99 stay within 1 ms of
//! the reader's when every line of JavaScript costs four times as much
//! (`FIRSTTOKEN_BENCH_PHONE=only` runs only these, `off` leaves them out). Run with
//! `cargo xtask bench`.

use std::time::Duration;

use anyhow::{Context, bail};
use firsttoken_core::plan::HTTP1_CONNECTIONS_PER_HOST;
use firsttoken_e2e::browser::{Browser, DESKTOP, Engine};
use firsttoken_e2e::tls::{ACCEPT_SELF_SIGNED, TlsServer};
use firsttoken_e2e::{PAGE_SIDE, READER, TestServer, bench_setting};
use serde_json::{Value, json};
use thirtyfour::prelude::*;

mod app;
mod machine;
mod report;

use app::{run_in_app, slow_down};

use machine::Watch;

/// Requests per reader and level in Chromium, in turns of `BLOCK_REQUESTS` (whole
/// batches). A p99 is read off the largest 1% of the values: 1,000 leave ten of them,
/// where 400 left four and one slow request moved the p99 by a millisecond. At 10 at
/// once ten is one batch, so one pause still decides it: `FIRSTTOKEN_BENCH_REQUESTS`
/// asks for more.
const REQUESTS: u32 = 1000;
/// Requests per block in Chromium. At 10 at once a block lasts about 2 s, no longer than
/// the slow stretches this shared machine has now and then: one falls across the readers'
/// turns, not all of it on one reader's block (as it did with five blocks of 1,000).
const BLOCK_REQUESTS: u32 = 200;
const KNOBS: &str = "first_token_ms=50&itl_ms=5&tokens=10";
/// The concurrency levels. Above six at once they go over HTTP/2: over HTTP/1.1 the
/// browser would queue the seventh request, and that would measure the queue.
const LEVELS: [u32; 4] = [1, 3, 5, 10];
/// The first requests of each block, looked at apart: they run on code that has just
/// been loaded.
const WARMING: u32 = 100;
/// Requests per case of the busy-main-thread comparison.
const BUSY_REQUESTS: u32 = 100;
/// A phone's CPU: Chromium's DevTools slows the page's CPU this many times
/// (`Emulation.setCPUThrottlingRate`, what mobile page tests use), and the readers take
/// turns at [`PHONE_LEVELS`], [`PHONE_REQUESTS`] requests each (`FIRSTTOKEN_BENCH_PHONE_REQUESTS`
/// asks for another number) in turns of [`BLOCK_REQUESTS`]. 300 in 3 turns left a p99 to
/// three values and an interval over three turns: it moved by 2–3 ms between runs.
const PHONE_SLOWDOWN: u32 = 4;
const PHONE_LEVELS: [u32; 3] = [1, 3, 5];
const PHONE_REQUESTS: u32 = 1000;

/// Keeps the page's main thread busy 30 ms out of every 40.
const BUSY: &str = "window.__busy = setInterval(() => { const end = performance.now() + 30; \
                    while (performance.now() < end) {} }, 40);";

/// [`READER`] on the page's own thread; WebDriver's callback is the last argument.
const ON_PAGE: &str = r#"
const [url, n, k, w, done] = [arguments[0], arguments[1], arguments[2], arguments[3], arguments[arguments.length - 1]];
run(url, n, k, w).then(done, (e) => done({error: String(e)}));
"#;

/// [`READER`] in a dedicated worker of its own; with `paced`, after each batch the
/// engine's pause (the page draws a line of text and answers, [`PAGE_SIDE`]).
const IN_WORKER: &str = r#"
const [url, n, k, w, paced, reader, done] = [arguments[0], arguments[1], arguments[2], arguments[3], arguments[4], arguments[5], arguments[arguments.length - 1]];
const source = reader + `
onmessage = async (e) => {
  if (answered(e.data)) return;
  const {url, n, k, w, paced} = e.data;
  postMessage(await run(url, n, k, w, paced ? pause : null));
};`;
const worker = new Worker(URL.createObjectURL(new Blob([source], {type: 'text/javascript'})));
worker.onmessage = (e) => {
  if (e.data === 'frame') return answerAfterDrawing(worker, drawLine);
  worker.terminate();
  done(e.data);
};
worker.onerror = (e) => { worker.terminate(); done({error: e.message || String(e)}); };
worker.postMessage({url, n, k, w, paced});
"#;

/// Who measures, and what the page does meanwhile.
#[derive(Clone, Copy, PartialEq)]
enum Reader {
    /// The hand-written JS reader on the app's page.
    JsOnPage,
    /// The same JS reader in a dedicated worker of its own.
    JsInWorker,
    /// The same, pausing after each batch as the engine does: the page is told, draws,
    /// waits, and answers; the worker notices in 2 ms polls.
    JsPaced,
    /// The engine in its worker, the page still (`?charts=off`).
    Still,
    /// The engine in its worker, the live charts redrawing.
    Charts,
    /// The same engine on the page's own thread (`?engine=page`), live charts.
    Page,
}

impl Reader {
    fn name(self) -> &'static str {
        match self {
            Reader::JsOnPage => "JS reader on the page",
            Reader::JsInWorker => "JS reader in a worker",
            Reader::JsPaced => "JS reader in a worker, engine's pause",
            Reader::Still => "engine in its worker, page still",
            Reader::Charts => "engine in its worker, live charts",
            Reader::Page => "engine on the page's thread, live charts",
        }
    }
}

/// What one case measured, over all its blocks.
struct Case {
    engine: Engine,
    level: u32,
    reader: Reader,
    busy: bool,
    /// How many times slower the browser's CPU was made (1: as it is).
    slowdown: u32,
    bias: Vec<f64>,
    /// Each value's block and its place in the block, to see where the slowest fall.
    positions: Vec<(u32, u32)>,
    /// The engine's own timer lateness (p99) in each block.
    timer_p99: Vec<f64>,
    /// What the machine did during each block.
    machine: Vec<machine::During>,
    connections: u64,
}

/// Requests per reader and level in Firefox and WebKit, in `OTHER_BLOCKS` turns: their
/// table is sequential and 3 at once.
const OTHER_REQUESTS: u32 = 300;
const OTHER_BLOCKS: u32 = 3;
const OTHER_LEVELS: [u32; 2] = [1, 3];

/// The engines to measure: all three, unless `FIRSTTOKEN_BENCH_ENGINES` names some
/// (`FIRSTTOKEN_BENCH_ENGINES=firefox,webkit`), for a quicker rerun of part of the table.
fn engines() -> anyhow::Result<Vec<Engine>> {
    bench_setting("FIRSTTOKEN_BENCH_ENGINES", Engine::ALL.to_vec(), |names| {
        let engine = |name: &str| Engine::ALL.into_iter().find(|e| e.name() == name.trim());
        let known = |n: &str| format!("no engine {n:?} (chromium, firefox, webkit)");
        names
            .split(',')
            .map(|n| engine(n).with_context(|| known(n)))
            .collect()
    })
}

/// Chromium's levels: all of [`LEVELS`], unless `FIRSTTOKEN_BENCH_LEVELS` names some
/// (`FIRSTTOKEN_BENCH_LEVELS=3`); with it set, the busy-main-thread cases are left out.
fn levels() -> anyhow::Result<Vec<u32>> {
    bench_setting("FIRSTTOKEN_BENCH_LEVELS", LEVELS.to_vec(), |list| {
        let level = |l: &str| l.trim().parse().ok().filter(|l| LEVELS.contains(l));
        let known = |l: &str| format!("{l:?} is not one of the levels {LEVELS:?}");
        list.split(',')
            .map(|l| level(l).with_context(|| known(l)))
            .collect()
    })
}

/// Chromium's requests per reader and level: [`REQUESTS`], unless
/// `FIRSTTOKEN_BENCH_REQUESTS` says how many (at least 100).
fn requests() -> anyhow::Result<u32> {
    at_least_100("FIRSTTOKEN_BENCH_REQUESTS", REQUESTS)
}

/// The setting `name` (a whole number of at least 100), or `default`.
fn at_least_100(name: &str, default: u32) -> anyhow::Result<u32> {
    bench_setting(name, default, |text| {
        let n = text.trim().parse().ok().filter(|n| *n >= 100);
        n.context("a whole number of at least 100")
    })
}

/// Whether the phone's cases run: after the rest when every level does (`with`, the
/// default), alone in Chromium (`FIRSTTOKEN_BENCH_PHONE=only`), or not (`off`).
#[derive(Clone, Copy, PartialEq)]
enum Phone {
    With,
    Only,
    Off,
}

fn phone() -> anyhow::Result<Phone> {
    bench_setting("FIRSTTOKEN_BENCH_PHONE", Phone::With, |text| {
        Ok(match text.trim() {
            "only" => Phone::Only,
            "off" => Phone::Off,
            "with" => Phone::With,
            other => bail!("{other:?}: only, off or with"),
        })
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let watch = Watch::start();
    let mut cases = Vec::new();
    let engines = if phone()? == Phone::Only {
        vec![Engine::Chromium]
    } else {
        engines()?
    };
    for engine in engines {
        if engine == Engine::Chromium {
            cases.extend(chromium(&server, &watch).await?);
        } else {
            cases.extend(other_engine(&server, &watch, engine).await?);
        }
    }
    report::report(&cases);
    report::save(&cases)?;
    Ok(())
}

/// Warm-up requests at the start of each block, one at a time and not counted, for every
/// reader alike: one unless `FIRSTTOKEN_BENCH_WARMUP` says otherwise (more tells a slow
/// start after a page load from the rest).
fn warmup_requests() -> anyhow::Result<u32> {
    bench_setting("FIRSTTOKEN_BENCH_WARMUP", 1, |text| {
        text.trim()
            .parse()
            .ok()
            .filter(|n| (1..=1000).contains(n))
            .context("a number of requests from 1 to 1000")
    })
}

/// No script the benchmark runs may be cut short by WebDriver's default 30 s.
async fn long_scripts(browser: &Browser) -> anyhow::Result<()> {
    browser
        .driver
        .update_timeouts(TimeoutConfiguration::new(
            Some(Duration::from_secs(600)),
            Some(Duration::from_secs(60)),
            Some(Duration::from_secs(0)),
        ))
        .await?;
    Ok(())
}

/// Chromium's table: 1, 3, 5 and 10 at once (10 over HTTP/2), four readers, and the busy
/// main thread.
async fn chromium(server: &TestServer, watch: &Watch) -> anyhow::Result<Vec<Case>> {
    let h2 = TlsServer::start(server.state()).await?;
    // More Chromium flags for a diagnosis, space-separated
    // (`FIRSTTOKEN_BENCH_CHROMIUM_FLAGS="--js-flags=--no-liftoff"`).
    let extra = bench_setting("FIRSTTOKEN_BENCH_CHROMIUM_FLAGS", String::new(), |text| {
        Ok(text.to_owned())
    })?;
    let mut flags = vec![ACCEPT_SELF_SIGNED];
    flags.extend(extra.split_whitespace());
    let browser = Browser::start_with(DESKTOP, &flags).await?;
    long_scripts(&browser).await?;
    let readers = [
        Reader::JsOnPage,
        Reader::JsInWorker,
        Reader::JsPaced,
        Reader::Still,
        Reader::Charts,
    ];
    let at = At {
        server,
        browser: &browser,
        watch,
    };
    let mut cases = Vec::new();
    let phone = phone()?;
    let levels = if phone == Phone::Only {
        Vec::new()
    } else {
        levels()?
    };
    let requests = requests()?;
    for &level in &levels {
        // The target: the demo, over HTTP/2 above six at once.
        let target = if level > HTTP1_CONNECTIONS_PER_HOST {
            h2.url(&format!("/v1/chat/completions?{KNOBS}"))
        } else {
            server.url(&format!("/v1/chat/completions?{KNOBS}"))
        };
        let turns = Turns {
            level,
            requests,
            blocks: (requests / BLOCK_REQUESTS).max(1),
            slowdown: 1,
        };
        cases.extend(take_turns(at, &target, &readers, turns).await?);
    }
    let everything = levels.len() == LEVELS.len();
    let busy = if everything && phone != Phone::Only {
        [Reader::JsOnPage, Reader::Charts, Reader::Page].as_slice()
    } else {
        &[]
    };
    for &reader in busy {
        let mut case = Case::new(Engine::Chromium, 1, reader, true);
        let target = server.url(&format!("/v1/chat/completions?{KNOBS}"));
        measure(at, &target, &mut case, BUSY_REQUESTS, true).await?;
        cases.push(case);
    }
    // A phone's CPU: the JS reader on the page and in a worker with the engine's pause,
    // beside the engine, with everything four times slower.
    if (everything && phone == Phone::With) || phone == Phone::Only {
        let target = server.url(&format!("/v1/chat/completions?{KNOBS}"));
        let readers = [
            Reader::JsOnPage,
            Reader::JsPaced,
            Reader::Still,
            Reader::Charts,
        ];
        let requests = at_least_100("FIRSTTOKEN_BENCH_PHONE_REQUESTS", PHONE_REQUESTS)?;
        for level in PHONE_LEVELS {
            let turns = Turns {
                level,
                requests,
                blocks: (requests / BLOCK_REQUESTS).max(1),
                slowdown: PHONE_SLOWDOWN,
            };
            cases.extend(take_turns(at, &target, &readers, turns).await?);
        }
    }
    browser.quit().await?;
    Ok(cases)
}

/// Firefox's or WebKit's table: 1 and 3 at once over HTTP/1.1, the JS reader on the page
/// beside the engine in its worker (page still, and live charts) and on the page's thread.
async fn other_engine(
    server: &TestServer,
    watch: &Watch,
    engine: Engine,
) -> anyhow::Result<Vec<Case>> {
    let browser = Browser::start_engine(engine, DESKTOP).await?;
    long_scripts(&browser).await?;
    let target = server.url(&format!("/v1/chat/completions?{KNOBS}"));
    let at = At {
        server,
        browser: &browser,
        watch,
    };
    let mut cases = Vec::new();
    for level in OTHER_LEVELS {
        let turns = Turns {
            level,
            requests: OTHER_REQUESTS,
            blocks: OTHER_BLOCKS,
            slowdown: 1,
        };
        // Where a worker's fetch is carried by the page's thread (WebKit), the engine on
        // the page's thread can be the better place: measured, not assumed.
        let readers = [
            Reader::JsOnPage,
            Reader::Still,
            Reader::Charts,
            Reader::Page,
        ];
        cases.extend(take_turns(at, &target, &readers, turns).await?);
    }
    browser.quit().await?;
    Ok(cases)
}

/// How many requests at a level, at how many at once, in how many turns, on a CPU how
/// many times slower.
#[derive(Clone, Copy)]
struct Turns {
    level: u32,
    requests: u32,
    blocks: u32,
    slowdown: u32,
}

/// Where a case is measured: the demo server, the browser, and the machine's watch.
#[derive(Clone, Copy)]
struct At<'a> {
    server: &'a TestServer,
    browser: &'a Browser,
    watch: &'a Watch,
}

/// The readers take turns at one level, block by block.
async fn take_turns(
    at: At<'_>,
    target: &str,
    readers: &[Reader],
    turns: Turns,
) -> anyhow::Result<Vec<Case>> {
    let Turns {
        level,
        requests,
        blocks,
        slowdown,
    } = turns;
    let mut cases: Vec<Case> = readers
        .iter()
        .map(|&reader| Case {
            slowdown,
            ..Case::new(at.browser.engine, level, reader, false)
        })
        .collect();
    // Whole batches per block.
    let per_block = (requests / blocks).div_ceil(level) * level;
    for block in 0..blocks {
        for case in &mut cases {
            measure(at, target, case, per_block, false).await?;
        }
        eprintln!(
            "{}, level {level}: block {} of {blocks} done",
            at.browser.engine.name(),
            block + 1
        );
    }
    Ok(cases)
}
impl Case {
    fn new(engine: Engine, level: u32, reader: Reader, busy: bool) -> Self {
        Self {
            engine,
            level,
            reader,
            busy,
            slowdown: 1,
            bias: Vec::new(),
            positions: Vec::new(),
            timer_p99: Vec::new(),
            machine: Vec::new(),
            connections: 0,
        }
    }
}

/// Measures one block of `requests` to `target` for `case` and adds it to the case.
async fn measure(
    At {
        server,
        browser,
        watch,
    }: At<'_>,
    target: &str,
    case: &mut Case,
    requests: u32,
    busy: bool,
) -> anyhow::Result<()> {
    let driver = &browser.driver;
    let before = server.connections_accepted();
    let mark = machine::Mark::take();
    let (bias, timer_p99) = match case.reader {
        Reader::JsOnPage | Reader::JsInWorker | Reader::JsPaced => {
            driver.goto("about:blank").await?;
            driver.goto(server.url("/")).await?;
            driver
                .query(By::Css("[data-testid=make-link]"))
                .first()
                .await?;
            slow_down(browser, case.slowdown).await?;
            if busy {
                driver.execute(BUSY, Vec::new()).await?;
            }
            let script = if case.reader == Reader::JsOnPage {
                format!("{READER}\n{ON_PAGE}")
            } else {
                format!("{PAGE_SIDE}\n{IN_WORKER}")
            };
            let result = driver
                .execute_async(
                    &script,
                    vec![
                        json!(target),
                        json!(requests),
                        json!(case.level),
                        json!(warmup_requests()?),
                        json!(case.reader == Reader::JsPaced),
                        json!(READER),
                    ],
                )
                .await?;
            let bias = result
                .json()
                .as_array()
                .with_context(|| format!("biases, not {}", result.json()))?
                .iter()
                .filter_map(Value::as_f64)
                .collect();
            (bias, None)
        }
        _ => run_in_app(server, browser, target, case, requests, busy).await?,
    };
    let block = case.machine.len() as u32;
    case.machine.push(watch.since(&mark, browser.driver_pid()));
    case.positions
        .extend((0..bias.len() as u32).map(|i| (block, i)));
    case.bias.extend(bias);
    case.timer_p99.extend(timer_p99);
    case.connections += server.connections_accepted() - before;
    Ok(())
}
