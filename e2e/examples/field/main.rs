//! The figures on emulated real links (`cargo xtask bench field`): for each link profile
//! and protocol, the demo target served over TLS 1.3 by [`FieldTarget`] (a certificate
//! from a test authority that Chromium trusts by its key, a wildcard for the fresh host
//! names) behind the link emulator [`Link`], and headless Chromium in front. In one
//! browser, first a plain JavaScript reader measures (probes, two warm-up requests, warm
//! requests, then requests to fresh host names), then the app runs the same protocol as a
//! beta user would, and its stored record is read as the page reads it
//! ([`RunReport::of`]). Each figure is printed beside the reader's and the emulator's own
//! truth:
//!
//! - warm TTFT and total time (medians): the engine against the reader; the truth is the
//!   demo's own time to its first token (its clock, in the stream) plus one round trip
//!   (the profile's RTT plus its mean jitter);
//! - the warm TTFT's network layer (`firsttoken_core::layers`: the TTFT less the time
//!   before sending and the demo's own time to its first token), against one round trip;
//! - a new host name's cost: the page's figure (median fresh − median warm TTFT, with its
//!   interval, or the reason it gives none) and the time before the request left
//!   (`sent_ms`), against the reader's, and against the link's own truth: on each
//!   connection the run opened, from its accept to the client's third flight (the
//!   ClientHello, the TLS Finished with the preflight, then the request itself), which is
//!   a TCP handshake, a TLS 1.3 handshake and the CORS preflight as they really went (DNS
//!   is not emulated: the browser maps `*.test` to 127.0.0.1);
//! - the connections the fresh requests opened: verified new by the engine, against the
//!   connections the link accepted meanwhile;
//! - the probe round trip: the engine's median of warm probes against the link's own
//!   (from a probe's last bytes reaching the link to the answer's first bytes leaving
//!   it: the round trip with its jitter and the probe handler's time).
//!
//! `FIRSTTOKEN_FIELD_PROFILES` (comma-separated: fiber, cable, 4g, poor-cellular,
//! satellite; default fiber,4g,poor-cellular), `FIRSTTOKEN_FIELD_PROTOCOLS` (h1, h2;
//! default both), `FIRSTTOKEN_FIELD_WARM` (warm requests, default 10) and
//! `FIRSTTOKEN_FIELD_FRESH` (fresh requests, default 5) and `FIRSTTOKEN_FIELD_PROBES`
//! (default 10) choose the cases.
//!
//! On the slowest profile (`FIRSTTOKEN_FIELD_CONCURRENCY=all`: on every one), the
//! concurrency verdict too: 1 and 3 at once against a demo that handles one request at a
//! time (600 ms of blocking work each) and against one that handles them side by side
//! (600 ms each, in parallel); the truth is the server's own model, 2× and 1×.
//!
//! Then the variants ([`variants`]; `FIRSTTOKEN_FIELD_VARIANTS=off` leaves them out): TLS
//! 1.2, `Access-Control-Max-Age` absent, 5 s and 7200 s, a short keep-alive before a cold
//! request, the client port as `0` or absent, and nginx in front (the book's own block)
//! reporting the browser's port or passing on the app's, each against the target's,
//! nginx's and the link's own logs.

use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use firsttoken_core::layers::Layers;
use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::schema::Run;
use firsttoken_core::share::Study;
use firsttoken_crowd::stats::median;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::link::{Link, Profile};
use firsttoken_e2e::target::{FieldTarget, TargetConfig, TlsVersion};
use firsttoken_e2e::{TestServer, bench_setting};
use firsttoken_pages::report::RunReport;
use serde_json::{Value, json};

mod variants;

/// The demo's knobs: a model that answers its first token after 300 ms, then 20 tokens
/// 20 ms apart.
const KNOBS: &str = "first_token_ms=300&itl_ms=20&tokens=20";
const BODY: &str =
    r#"{"model":"demo","stream":true,"messages":[{"role":"user","content":"Hello?"}]}"#;

/// The plain JavaScript reader: probes (GET, no headers), two warm-up requests, `warm`
/// warm requests, then `fresh` requests each to a new host name, all one at a time, as
/// the engine's plan sends them. Each streamed request gives its TTFT (the first event
/// with answer text) and total time, and for fresh requests Resource Timing's
/// `requestStart − startTime`.
const READER: &str = r#"
const [url, freshTemplate, probeUrl, probes, warm, fresh, body, done] = arguments;
async function one(u) {
  const t0 = performance.now();
  const response = await fetch(u, {method: 'POST', headers: {'content-type': 'application/json'}, body});
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = '', ttft = null;
  for (;;) {
    const {done: end, value} = await reader.read();
    const t = performance.now() - t0;
    if (end) return {ttft, total: t};
    buffer += decoder.decode(value, {stream: true});
    let cut;
    while ((cut = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      if (!event.startsWith('data: ') || event === 'data: [DONE]') continue;
      const data = JSON.parse(event.slice(6));
      const content = data.choices && data.choices[0] && data.choices[0].delta && data.choices[0].delta.content;
      if (ttft === null && content) ttft = t;
    }
  }
}
async function probe() {
  const t0 = performance.now();
  const response = await fetch(probeUrl, {cache: 'no-store'});
  const t = performance.now() - t0;
  await response.arrayBuffer();
  return t;
}
(async () => {
  try {
    performance.setResourceTimingBufferSize(2000);
    const p = [];
    for (let i = 0; i < probes; i++) p.push(await probe());
    for (let i = 0; i < 2; i++) await one(url);
    const w = [];
    for (let i = 0; i < warm; i++) w.push(await one(url));
    const f = [];
    for (let i = 1; i <= fresh; i++) {
      const u = freshTemplate.replace('{n}', String(i));
      const m = await one(u);
      await new Promise((resolve) => setTimeout(resolve, 100));
      const e = performance.getEntriesByName(u).pop();
      m.sent = e && e.requestStart > 0 ? e.requestStart - e.startTime : null;
      f.push(m);
    }
    done({probes: p, warm: w, fresh: f});
  } catch (e) {
    done({error: String(e)});
  }
})();
"#;

/// One case's figures, three ways.
struct Case {
    profile: Profile,
    protocol: &'static str,
    rows: Vec<Row>,
}

/// One figure: the engine's (what the page shows), the reader's, and the truth.
struct Row {
    figure: &'static str,
    engine: String,
    reader: String,
    truth: String,
    difference: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let profiles = bench_setting(
        "FIRSTTOKEN_FIELD_PROFILES",
        vec![Profile::FIBER, Profile::FOURG, Profile::POOR_CELLULAR],
        |text| {
            text.split(',')
                .map(|name| {
                    Profile::by_name(name.trim()).with_context(|| format!("no profile {name:?}"))
                })
                .collect()
        },
    )?;
    let protocols = bench_setting("FIRSTTOKEN_FIELD_PROTOCOLS", vec!["h1", "h2"], |text| {
        text.split(',')
            .map(|p| match p.trim() {
                "h1" => Ok("h1"),
                "h2" => Ok("h2"),
                other => bail!("no protocol {other:?}: h1 or h2"),
            })
            .collect()
    })?;
    let warm = bench_setting("FIRSTTOKEN_FIELD_WARM", 10u32, |t| Ok(t.parse()?))?;
    let fresh = bench_setting("FIRSTTOKEN_FIELD_FRESH", 5u32, |t| Ok(t.parse()?))?;
    let probes = bench_setting("FIRSTTOKEN_FIELD_PROBES", 10u32, |t| Ok(t.parse()?))?;
    // The concurrency verdict's cases take a minute a profile: on the slowest link only
    // (where the network's share of a first token is largest), unless asked for all.
    let concurrency_everywhere =
        bench_setting("FIRSTTOKEN_FIELD_CONCURRENCY", false, |t| Ok(t == "all"))?;
    let slowest = profiles.iter().map(|p| p.rtt_ms).fold(0.0, f64::max);
    let server = TestServer::start().await?;
    let mut cases = Vec::new();
    for profile in &profiles {
        for protocol in &protocols {
            println!("  {} over {protocol} …", profile.label());
            let counts = Counts {
                probes,
                warm,
                fresh,
                concurrency: concurrency_everywhere || profile.rtt_ms == slowest,
            };
            cases.push(one_case(&server, *profile, protocol, counts).await?);
        }
    }
    let variants = if bench_setting("FIRSTTOKEN_FIELD_VARIANTS", true, |t| Ok(t != "off"))? {
        Some(variants::variants(&server).await?)
    } else {
        None
    };
    print_tables(&cases);
    if let Some((profile, checks)) = variants {
        variants::print(&checks, &profile);
    }
    Ok(())
}

/// How many requests of each kind a case sends, from the reader and from the engine alike.
#[derive(Debug, Clone, Copy)]
struct Counts {
    probes: u32,
    warm: u32,
    fresh: u32,
    /// Also run the concurrency verdict's two servers.
    concurrency: bool,
}

async fn one_case(
    server: &TestServer,
    profile: Profile,
    protocol: &'static str,
    Counts {
        probes,
        warm,
        fresh,
        concurrency,
    }: Counts,
) -> anyhow::Result<Case> {
    let target = FieldTarget::start(
        server.state(),
        TargetConfig {
            tls: Some(TlsVersion::Tls13),
            http2: protocol == "h2",
            ..TargetConfig::default()
        },
    )
    .await?;
    let link = Link::start(target.address(), profile).await?;
    let port = link.address().port();
    let path = format!("/v1/chat/completions?{KNOBS}");
    let url = format!("https://target.test:{port}{path}");
    let fresh_url = format!("https://{{n}}.fresh.test:{port}{path}");
    let probe_url = format!("https://target.test:{port}/api/v1/ping");
    let flags = [target.spki_flag(), FieldTarget::resolver_flag("*.test")];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let browser = Browser::start_with(DESKTOP, &flags).await?;
    let driver = &browser.driver;

    // The reader, on the app's origin, so its requests are cross-origin as the engine's.
    driver.goto(server.url("/")).await?;
    let reader = driver
        .execute_async(
            READER,
            vec![
                json!(url),
                json!(fresh_url.replace("{n}", "r{n}")),
                json!(probe_url),
                json!(probes),
                json!(warm),
                json!(fresh),
                json!(BODY),
            ],
        )
        .await?
        .json()
        .clone();
    if let Some(error) = reader.get("error") {
        bail!("the JavaScript reader failed: {error}");
    }
    let times = |list: &str, key: &str| -> Vec<f64> {
        reader[list]
            .as_array()
            .map(|a| a.iter().filter_map(|m| m[key].as_f64()).collect())
            .unwrap_or_default()
    };
    let reader_probes: Vec<f64> = reader["probes"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default();

    // The engine, as a beta user runs it.
    let mut demo = server.demo_target(KNOBS);
    demo.url = url.clone();
    demo.fresh_url = Some(fresh_url.clone());
    demo.probe_url = Some(probe_url.clone());
    let mut plan = Plan::steady(demo, warm);
    plan.phases = vec![
        PhasePlan::Probe { requests: probes },
        PhasePlan::Warmup { requests: 2 },
        PhasePlan::Steady { requests: warm },
        PhasePlan::Fresh { requests: fresh },
    ];
    plan.timeout_ms = 60_000;
    // The page comes from the server itself, not through the link: every connection the
    // link accepts meanwhile is the run's.
    let connections_before = link.connections();
    let run_began = Instant::now();
    let run = run_in_app(server, &browser, plan).await?;
    let probe_truth = probe_truth(&link, &target, run_began);
    let connections_in_run = link.connections() - connections_before;
    // The link's own truth of what a new connection cost before its request left: on each
    // connection the run opened, the client's third flight (after the ClientHello, and
    // the TLS Finished with the preflight) is the request itself.
    let gap = Duration::from_secs_f64((profile.rtt_ms / 4.0).max(2.0) / 1000.0);
    let truth_sent: Vec<f64> = link.log()[connections_before..]
        .iter()
        .filter_map(|c| {
            let third = flights(&c.arrivals_up, gap).get(2).copied()?;
            Some(third.duration_since(c.accepted).as_secs_f64() * 1000.0)
        })
        .collect();
    let report = RunReport::of(&run);
    // The concurrency verdict, for a server that handles one request at a time and for
    // one that handles them side by side, each with the same 600 ms of its own.
    let mut verdicts = Vec::new();
    if concurrency {
        for (what, knobs) in [
            (
                "one at a time",
                "first_token_ms=1&pre_model_ms=600&slots=1&itl_ms=10&tokens=5",
            ),
            ("side by side", "first_token_ms=600&itl_ms=10&tokens=5"),
        ] {
            let pool = format!(
                "&pool=field-{}-{protocol}-{}",
                verdicts.len(),
                profile.rtt_ms
            );
            let url = format!("https://target.test:{port}/v1/chat/completions?{knobs}{pool}");
            let mut demo = server.demo_target(knobs);
            demo.url = url;
            demo.fresh_url = None;
            demo.probe_url = Some(probe_url.clone());
            let mut plan = Plan::steady(demo, 1);
            plan.phases = vec![
                PhasePlan::Probe { requests: probes },
                PhasePlan::Warmup { requests: 2 },
                PhasePlan::Concurrency {
                    levels: vec![1, 3],
                    requests_per_level: 12,
                },
            ];
            plan.multiplexed = protocol == "h2";
            plan.timeout_ms = 60_000;
            let run = run_in_app(server, &browser, plan).await?;
            let report = RunReport::of(&run);
            let level = report.degradation.iter().find(|d| d.level == 3);
            verdicts.push(Row {
                figure: if what == "one at a time" {
                    "concurrency at 3: a one-at-a-time server"
                } else {
                    "concurrency at 3: a side-by-side server"
                },
                engine: level.map_or("—".into(), |d| {
                    let ratio = d.ratio.map_or("—".into(), |r| {
                        format!("{:.2}× [{:.2}, {:.2}]", r.value, r.low, r.high)
                    });
                    format!(
                        "{ratio}, reads {:?} (floor {:.0} ms)",
                        d.reading(),
                        d.network_floor_ms
                    )
                }),
                reader: "—".into(),
                truth: if what == "one at a time" {
                    "2.00× (Serial)".into()
                } else {
                    "1.00× (Parallel)".into()
                },
                difference: "—".into(),
            });
        }
    }
    browser.quit().await?;

    // Each way adds up to the profile's jitter, evenly spread: a round trip on this link
    // takes its RTT plus the jitter on average.
    let rtt = profile.rtt_ms + profile.jitter_ms;
    let steady: Vec<&firsttoken_core::schema::Sample> = run
        .samples
        .iter()
        .filter(|s| s.phase == firsttoken_core::plan::Phase::Steady && s.error.is_none())
        .collect();
    let engine_ttft = median(&steady.iter().filter_map(|s| s.ttft_ms).collect::<Vec<_>>());
    let engine_total = median(&steady.iter().filter_map(|s| s.e2e_ms).collect::<Vec<_>>());
    let server_first = median(
        &steady
            .iter()
            .filter_map(|s| {
                s.stream_timings
                    .as_ref()?
                    .get("first_token_written_ms")
                    .copied()
            })
            .collect::<Vec<_>>(),
    );
    // The split's rest (firsttoken_core::layers): one round trip, plus the delivery.
    let rests = steady.iter().filter_map(|s| Layers::of(s));
    let whole = |l: &Layers| l.server.as_ref().is_ok_and(|s| s.whole());
    let engine_rest = median(&rests.filter(whole).map(|l| l.rest_ms).collect::<Vec<_>>());
    let reader_ttft = median(&times("warm", "ttft"));
    let reader_total = median(&times("warm", "total"));
    let reader_fresh = median(&times("fresh", "ttft"));
    let reader_sent = median(&times("fresh", "sent"));
    let connection = report.connection.context("a fresh phase")?;
    let new_name_truth = median(&truth_sent);
    let mut rows = vec![
        Row {
            figure: "warm TTFT, median",
            engine: ms(engine_ttft),
            reader: ms(reader_ttft),
            truth: server_first.map_or("—".into(), |s| {
                format!("{:.1} (server {s:.1} + RTT)", s + rtt)
            }),
            difference: diff(engine_ttft, reader_ttft),
        },
        Row {
            figure: "warm total time, median",
            engine: ms(engine_total),
            reader: ms(reader_total),
            truth: "—".into(),
            difference: diff(engine_total, reader_total),
        },
        Row {
            figure: "warm TTFT's rest after sending and the server's own time, median",
            engine: ms(engine_rest),
            reader: "—".into(),
            truth: format!("{rtt:.1} (RTT)"),
            difference: diff(engine_rest, Some(rtt)),
        },
    ];
    rows.push(Row {
        figure: "new host name: fresh − warm TTFT",
        engine: match (connection.difference, connection.extra_ms()) {
            (Some(d), Some(v)) => format!("{v:.1} [{:.1}, {:.1}]", d.low, d.high),
            (Some(d), None) => format!("none: [{:.1}, {:.1}] holds 0", d.low, d.high),
            (None, _) => format!(
                "none: {}",
                connection
                    .missing()
                    .unwrap_or_default()
                    .chars()
                    .take(60)
                    .collect::<String>()
            ),
        },
        reader: ms(reader_fresh.zip(reader_ttft).map(|(f, w)| f - w)),
        truth: new_name_truth.map_or_else(
            || {
                format!(
                    "no new connection; {:.1} for TCP + TLS 1.3 + preflight",
                    3.0 * rtt
                )
            },
            |t| {
                format!(
                    "{t:.1} (the link: accept to the request's flight, {} connections)",
                    truth_sent.len()
                )
            },
        ),
        difference: diff(connection.extra_ms(), new_name_truth),
    });
    rows.push(Row {
        figure: "new host name: before the request left (sent_ms)",
        engine: ms(connection.extra_sent_ms()),
        reader: ms(reader_sent),
        truth: ms(new_name_truth),
        difference: diff(connection.extra_sent_ms(), new_name_truth),
    });
    rows.push(Row {
        figure: "fresh requests verified new / connections the link saw",
        engine: format!(
            "{} of {} ({} reused, {} unverified)",
            connection.verified_new,
            connection.fresh_requests,
            connection.reused,
            connection.unverifiable
        ),
        reader: "—".into(),
        truth: format!("{connections_in_run} accepted in the whole run"),
        difference: "—".into(),
    });
    let probe = report
        .probes
        .as_ref()
        .and_then(|p| p.rtt.as_ref())
        .map(|d| d.p50.value);
    // The reader's first probe opened the connection.
    let reader_probe = median(reader_probes.get(1..).unwrap_or_default());
    let truth_probe = median(&probe_truth);
    rows.push(Row {
        figure: "probe round trip, median of warm probes",
        engine: ms(probe),
        reader: ms(reader_probe),
        truth: truth_probe.map_or("—".into(), |t| {
            format!(
                "{t:.1} (the link: request in to response out; profile RTT + mean jitter {rtt:.1})"
            )
        }),
        difference: match (probe, truth_probe) {
            (Some(p), Some(t)) => format!("{:+.1} ({:+.1}%)", p - t, 100.0 * (p - t) / t),
            _ => "—".into(),
        },
    });
    rows.extend(verdicts);
    Ok(Case {
        profile,
        protocol,
        rows,
    })
}

/// The link's own round trip for each of the engine's warm probes (served since
/// `since`, the first left out as the one that may have opened the connection): from the
/// moment the probe's last bytes reached the link to the moment the link handed the
/// client the first bytes of the answer. That is the round trip on the wire, jitter and
/// the probe handler's time included, and nothing of the browser's own. Probes go one at
/// a time and nothing else is in flight meanwhile, so the link's nearest events around
/// the target's receipt of a probe are that probe's, on whichever connection.
fn probe_truth(link: &Link, target: &FieldTarget, since: Instant) -> Vec<f64> {
    let log = link.log();
    let ups: Vec<Instant> = log
        .iter()
        .flat_map(|c| c.arrivals_up.iter().map(|(at, _)| *at))
        .collect();
    let downs: Vec<Instant> = log
        .iter()
        .flat_map(|c| c.deliveries_down.iter().map(|(at, _)| *at))
        .collect();
    target
        .served()
        .iter()
        .filter(|s| s.received > since && s.path.ends_with("/ping"))
        .skip(1)
        .filter_map(|s| {
            let sent = ups.iter().filter(|&&at| at < s.received).max()?;
            let answered = downs.iter().filter(|&&at| at > s.received).min()?;
            Some(answered.duration_since(*sent).as_secs_f64() * 1000.0)
        })
        .collect()
}

/// When each of the client's flights on a connection began: its arrivals grouped where
/// they are less than `gap` apart.
fn flights(arrivals: &[(Instant, usize)], gap: Duration) -> Vec<Instant> {
    let mut starts: Vec<Instant> = Vec::new();
    let mut last: Option<Instant> = None;
    for &(at, _) in arrivals {
        if last.is_none_or(|l| at.duration_since(l) > gap) {
            starts.push(at);
        }
        last = Some(at);
    }
    starts
}

/// Runs `plan` in the app as a beta user would, and reads the stored record.
async fn run_in_app(server: &TestServer, browser: &Browser, plan: Plan) -> anyhow::Result<Run> {
    let study = Study {
        title: "Field".into(),
        plan,
        collector: None,
        carries_token: false,
        study_id: None,
    };
    let driver = &browser.driver;
    driver.goto("about:blank").await?;
    driver.goto(server.link(&study)).await?;
    browser
        .wait_for_count("[data-testid=start-button]", 1, Duration::from_secs(30))
        .await?;
    Ok(serde_json::from_str(
        &server.run_and_read_record(browser).await?,
    )?)
}

fn ms(value: Option<f64>) -> String {
    value.map_or("—".into(), |v| format!("{v:.1}"))
}

fn diff(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) => format!("{:+.1}", a - b),
        _ => "—".into(),
    }
}

fn print_tables(cases: &[Case]) {
    for case in cases {
        println!(
            "\n{} over {} (TLS 1.3), ms:\n",
            case.profile.label(),
            case.protocol
        );
        println!("| figure | firsttoken | JS reader | emulator truth | firsttoken − reference |");
        println!("| --- | --- | --- | --- | --- |");
        for row in &case.rows {
            println!(
                "| {} | {} | {} | {} | {} |",
                row.figure, row.engine, row.reader, row.truth, row.difference
            );
        }
    }
}
