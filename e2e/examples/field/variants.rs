//! The field bench's variants: on one link (4G unless `FIRSTTOKEN_FIELD_VARIANT_PROFILE`
//! names another) and HTTP/1.1, the knobs a real deployment turns, each a short run of the
//! app against a [`FieldTarget`] set that way, each figure beside the truth of the target's
//! and the link's own logs, and whether it holds:
//!
//! - TLS 1.2 instead of 1.3: a new host name's cost before its request left, against the
//!   link's accept → the request's arrival (a TLS 1.2 handshake takes a round trip more);
//! - `Access-Control-Max-Age` absent, 5 s and 7200 s, with steady requests spread over
//!   about 10 s: how many steady requests the page says waited for a preflight, against
//!   the preflights the target answered meanwhile (Chromium keeps an answer without a
//!   max-age for 5 s);
//! - a keep-alive of 2 s before a request after 4 s idle: the cold request says it ran on a
//!   new connection, against the target's own connection numbers, and what it spent before
//!   it left against the link;
//! - the client port reported as `0`, or not at all: the port witness switches itself off
//!   (or is never used), no steady request is read as new, and the fresh requests are
//!   still told new from Resource Timing, against the link's connections;
//! - compare rounds between two targets with the same server time, one of them closing
//!   idle connections after 0.9 s (about as long as it waits for the other's request):
//!   rounds where it reconnected are left out (against the target's connection numbers),
//!   and the overhead's interval holds zero, or says that setup could not be left out;
//! - nginx in front, with the book's own block ([`proxied`]): reporting the browser's port
//!   itself, or passing on the app's port of a new upstream connection per request or of a
//!   shared pool: the witness used or switched off with its reason, against nginx's log.

use std::time::Instant;

use anyhow::Context;
use firsttoken_core::connections::PortOff;
use firsttoken_core::plan::{Phase, PhasePlan, Plan};
use firsttoken_core::schema::{Run, Sample};
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::link::{ConnectionLog, Link, Profile};
use firsttoken_e2e::target::{FieldTarget, MaxAge, PortHeader, Served, TargetConfig, TlsVersion};
use firsttoken_e2e::{TestServer, bench_setting};
use firsttoken_pages::report::RunReport;

use super::{BODY, ms, run_in_app};

mod proxied;

/// One figure of a variant: the page's, the truth, and whether the page's holds.
pub(super) struct Check {
    variant: String,
    figure: &'static str,
    page: String,
    truth: String,
    holds: bool,
}

/// The demo's path: a first token after 300 ms, 20 tokens 20 ms apart.
const PATH: &str = "/v1/chat/completions?first_token_ms=300&itl_ms=20&tokens=20";

/// Runs every variant on the variant profile; the profile's label and the checks, in
/// order.
pub(super) async fn variants(server: &TestServer) -> anyhow::Result<(String, Vec<Check>)> {
    let profile = bench_setting("FIRSTTOKEN_FIELD_VARIANT_PROFILE", "4g".to_owned(), |t| {
        Ok(t.trim().to_owned())
    })?;
    let profile = Profile::by_name(&profile).with_context(|| format!("no profile {profile:?}"))?;
    let mut checks = Vec::new();
    println!("  variants over {} …", profile.label());
    checks.extend(tls12(server, profile).await?);
    for max_age in [MaxAge::Absent, MaxAge::Seconds(5), MaxAge::Seconds(7200)] {
        checks.extend(preflight_cache(server, profile, max_age).await?);
    }
    checks.extend(keep_alive(server, profile).await?);
    for port in [PortHeader::Zero, PortHeader::Absent] {
        checks.extend(client_port(server, profile, port).await?);
    }
    checks.extend(compare_keep_alive(server, profile).await?);
    checks.extend(proxied::behind_nginx(server, profile).await?);
    Ok((profile.label(), checks))
}

/// A target set up by `config` behind a link of `profile`, with Chromium trusting it.
struct Setup {
    target: FieldTarget,
    link: Link,
    browser: Browser,
}

impl Setup {
    async fn start(
        server: &TestServer,
        profile: Profile,
        config: TargetConfig,
    ) -> anyhow::Result<Self> {
        let target = FieldTarget::start(server.state(), config).await?;
        let link = Link::start(target.address(), profile).await?;
        let flags = [target.spki_flag(), FieldTarget::resolver_flag("*.test")];
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let browser = Browser::start_with(DESKTOP, &flags).await?;
        Ok(Self {
            target,
            link,
            browser,
        })
    }

    /// Runs `phases` against the target through the link, as a beta user would.
    async fn run(&self, server: &TestServer, phases: Vec<PhasePlan>) -> anyhow::Result<Run> {
        let port = self.link.address().port();
        let mut demo = server.demo_target("first_token_ms=300&itl_ms=20&tokens=20");
        demo.url = format!("https://target.test:{port}{PATH}");
        demo.fresh_url = Some(format!("https://{{n}}.fresh.test:{port}{PATH}"));
        demo.probe_url = Some(format!("https://target.test:{port}/api/v1/ping"));
        let mut plan = Plan::steady(demo, 1);
        plan.phases = phases;
        plan.timeout_ms = 60_000;
        run_in_app(server, &self.browser, plan).await
    }

    async fn quit(self) -> anyhow::Result<()> {
        self.browser.quit().await
    }
}

/// The streamed requests the target served, in order (preflights and probes left out).
fn posts(served: &[Served]) -> Vec<&Served> {
    served
        .iter()
        .filter(|s| s.method == "POST" && s.path.ends_with("/chat/completions"))
        .collect()
}

/// The link's truth for a request the target received at `received`: the connection
/// whose client bytes arrived last before it (requests go one at a time), and the time
/// from that connection's accept to those bytes' arrival: what the client spent before
/// the request left, counted from the moment it had a TCP connection to start on.
fn before_sent(log: &[ConnectionLog], received: Instant) -> Option<f64> {
    let (connection, arrival) = log
        .iter()
        .filter_map(|c| {
            let last = c
                .arrivals_up
                .iter()
                .map(|(at, _)| *at)
                .filter(|at| *at < received)
                .max()?;
            Some((c, last))
        })
        .max_by_key(|(_, at)| *at)?;
    Some(arrival.duration_since(connection.accepted).as_secs_f64() * 1000.0)
}

/// Whether `page` is within a tenth of the round trip of `truth` (at least 2 ms).
fn within_tenth(page: Option<f64>, truth: Option<f64>, profile: Profile) -> bool {
    match (page, truth) {
        (Some(p), Some(t)) => (p - t).abs() <= (profile.rtt_ms / 10.0).max(2.0),
        _ => false,
    }
}

/// Steady requests on a new connection: by the truth, and as the page read them.
/// `opened_by_post` says, for each streamed request the server saw, in order, whether it
/// came on a connection no earlier request had: the warm-up's two first, then the steady
/// and fresh ones in the order the run sent them (by index; one at a time).
fn steady_new(run: &Run, opened_by_post: &[bool]) -> (usize, usize) {
    let steady = samples(run, Phase::Steady);
    let mut order: Vec<(u32, Phase)> = steady
        .iter()
        .chain(&samples(run, Phase::Fresh))
        .map(|s| (s.index, s.phase))
        .collect();
    order.sort_unstable();
    let truth = order
        .iter()
        .zip(opened_by_post.iter().skip(2))
        .filter(|((_, phase), new)| *phase == Phase::Steady && **new)
        .count();
    let read = steady
        .iter()
        .filter(|s| s.conn.as_ref().and_then(|c| c.new_connection) == Some(true))
        .count();
    (truth, read)
}

fn samples(run: &Run, phase: Phase) -> Vec<&Sample> {
    run.samples.iter().filter(|s| s.phase == phase).collect()
}

/// TLS 1.2: a new host name's cost before the request left.
async fn tls12(server: &TestServer, profile: Profile) -> anyhow::Result<Vec<Check>> {
    let setup = Setup::start(
        server,
        profile,
        TargetConfig {
            tls: Some(TlsVersion::Tls12),
            http2: false,
            ..TargetConfig::default()
        },
    )
    .await?;
    let fresh = 5;
    let run = setup
        .run(
            server,
            vec![
                PhasePlan::Probe { requests: 3 },
                PhasePlan::Warmup { requests: 2 },
                PhasePlan::Steady { requests: 5 },
                PhasePlan::Fresh { requests: fresh },
            ],
        )
        .await?;
    let log = setup.link.log();
    let served = setup.target.served();
    let truth: Vec<f64> = posts(&served)
        .iter()
        .rev()
        .take(fresh as usize)
        .filter_map(|s| before_sent(&log, s.received))
        .collect();
    let truth = firsttoken_crowd::stats::median(&truth);
    let report = RunReport::of(&run);
    let connection = report.connection.context("a fresh phase")?;
    let page = connection.extra_sent_ms();
    setup.quit().await?;
    let variant = "TLS 1.2".to_owned();
    Ok(vec![
        Check {
            variant: variant.clone(),
            figure: "new host name: before the request left (sent_ms over warm)",
            page: ms(page),
            truth: format!("{} (the link: accept to the request)", ms(truth)),
            holds: within_tenth(page, truth, profile),
        },
        Check {
            variant,
            figure: "fresh requests verified new",
            page: format!(
                "{} of {}",
                connection.verified_new, connection.fresh_requests
            ),
            truth: format!("{fresh} new connections (HTTP/1.1, one per host name)"),
            holds: connection.verified_new == fresh as usize,
        },
    ])
}

/// `Access-Control-Max-Age`: steady requests that waited for a preflight.
async fn preflight_cache(
    server: &TestServer,
    profile: Profile,
    max_age: MaxAge,
) -> anyhow::Result<Vec<Check>> {
    let setup = Setup::start(
        server,
        profile,
        TargetConfig {
            http2: false,
            max_age,
            ..TargetConfig::default()
        },
    )
    .await?;
    // About 0.8 s each at 80 ms: twelve make ten seconds, twice Chromium's default.
    let run = setup
        .run(
            server,
            vec![
                PhasePlan::Probe { requests: 3 },
                PhasePlan::Warmup { requests: 2 },
                PhasePlan::Steady { requests: 12 },
            ],
        )
        .await?;
    let served = setup.target.served();
    // The preflights the target answered after the warm-up's second request.
    let warmed = posts(&served)
        .get(1)
        .map(|s| s.received)
        .context("the warm-up")?;
    let truth = served
        .iter()
        .filter(|s| s.method == "OPTIONS" && s.received > warmed)
        .count();
    let report = RunReport::of(&run);
    let page = report
        .phases
        .iter()
        .find(|p| p.phase == Phase::Steady)
        .and_then(|p| p.preflighted);
    setup.quit().await?;
    Ok(vec![Check {
        variant: match max_age {
            MaxAge::Absent => "Access-Control-Max-Age absent".to_owned(),
            MaxAge::Seconds(s) => format!("Access-Control-Max-Age: {s}"),
        },
        figure: "steady requests that waited for a preflight",
        page: page.map_or("cannot be told".into(), |n| format!("{n} of 12")),
        truth: format!("{truth} preflights answered during the steady phase"),
        holds: page == Some(truth),
    }])
}

/// The JS reader's cold request: two requests to `url`, `idle` ms without one, then one
/// more; its Resource Timing `requestStart − startTime` and whether it connected.
const READER_COLD: &str = r#"
const [url, body, idle, done] = arguments;
const post = () => fetch(url, {method: 'POST', headers: {'content-type': 'application/json'}, body})
  .then((r) => r.arrayBuffer());
(async () => {
  await post();
  await post();
  await new Promise((resolve) => setTimeout(resolve, idle));
  await post();
  await new Promise((resolve) => setTimeout(resolve, 100));
  const e = performance.getEntriesByName(url).pop();
  done({sent: e.requestStart - e.startTime, connected: e.connectEnd > e.connectStart || e.secureConnectionStart > 0});
})().catch((e) => done({error: String(e)}));
"#;

/// A keep-alive shorter than the idle wait: the cold request reconnects.
async fn keep_alive(server: &TestServer, profile: Profile) -> anyhow::Result<Vec<Check>> {
    let setup = Setup::start(
        server,
        profile,
        TargetConfig {
            http2: false,
            idle_timeout: Some(std::time::Duration::from_secs(2)),
            ..TargetConfig::default()
        },
    )
    .await?;
    // The JS reader first, in the same browser: two requests, 4 s idle, one more.
    let driver = &setup.browser.driver;
    driver.goto(server.url("/")).await?;
    let url = format!("https://target.test:{}{PATH}", setup.link.address().port());
    let reader = driver
        .execute_async(READER_COLD, vec![url.into(), BODY.into(), 4000.into()])
        .await?
        .json()
        .clone();
    let reader_sent = reader["sent"].as_f64();
    let run = setup
        .run(
            server,
            vec![
                PhasePlan::Probe { requests: 3 },
                PhasePlan::Warmup { requests: 2 },
                PhasePlan::Steady { requests: 3 },
                PhasePlan::Cold {
                    idle_ms: vec![4000],
                },
            ],
        )
        .await?;
    let log = setup.link.log();
    let served = setup.target.served();
    let posts = posts(&served);
    let (before, cold) = match posts.as_slice() {
        [_, _, reader_cold, .., before, cold] => {
            let truth = before_sent(&log, reader_cold.received);
            println!("    keep-alive: the JS reader's cold request {reader} (the link: {truth:?})");
            (before, cold)
        }
        _ => anyhow::bail!("the target served {} requests", posts.len()),
    };
    let truth_new = cold.connection != before.connection;
    let truth_sent = before_sent(&log, cold.received);
    let report = RunReport::of(&run);
    let page = report.cold.first().context("a cold request")?;
    setup.quit().await?;
    let variant = "keep-alive 2 s, 4 s idle".to_owned();
    Ok(vec![
        Check {
            variant: variant.clone(),
            figure: "the cold request ran on a new connection",
            page: format!("{:?}", page.new_connection),
            truth: format!("{truth_new} (the target's connection numbers)"),
            holds: page.new_connection == Some(truth_new),
        },
        Check {
            variant,
            figure: "the cold request: before it left (sent_ms)",
            page: ms(page.sent_ms),
            truth: format!(
                "{} (the link: accept to the request); the JS reader's: {}",
                ms(truth_sent),
                ms(reader_sent)
            ),
            holds: within_tenth(page.sent_ms, truth_sent, profile),
        },
    ])
}

/// The client port as `0`, or no header: the witness steps aside.
async fn client_port(
    server: &TestServer,
    profile: Profile,
    port: PortHeader,
) -> anyhow::Result<Vec<Check>> {
    let setup = Setup::start(
        server,
        profile,
        TargetConfig {
            http2: false,
            port_header: port,
            ..TargetConfig::default()
        },
    )
    .await?;
    let fresh = 2;
    let run = setup
        .run(
            server,
            vec![
                PhasePlan::Probe { requests: 2 },
                PhasePlan::Warmup { requests: 2 },
                PhasePlan::Steady { requests: 3 },
                PhasePlan::Fresh { requests: fresh },
            ],
        )
        .await?;
    let served = setup.target.served();
    // The steady requests' truth: each on a connection no earlier request (a probe, a
    // preflight, a POST) had come on. The fresh phase's pairs put steady requests
    // between fresh ones: a steady request is one to the main host name, told from the
    // fresh ones by the connections the fresh host names opened (one each, HTTP/1.1).
    let mut seen = std::collections::HashSet::new();
    let mut opened_by_post = Vec::new();
    for s in &served {
        let new = seen.insert(s.connection);
        if s.method == "POST" && s.path.ends_with("/chat/completions") {
            opened_by_post.push(new);
        }
    }
    let (steady_new_truth, steady_read_new) = steady_new(&run, &opened_by_post);
    let report = RunReport::of(&run);
    let connection = report.connection.context("a fresh phase")?;
    let off = run.engine.client_port_off;
    setup.quit().await?;
    let (variant, expected) = match port {
        PortHeader::Zero => ("client port reported as 0", Some(PortOff::Zero)),
        PortHeader::Absent => ("no client port reported", None),
        PortHeader::Peer => ("the peer's client port", None),
    };
    Ok(vec![
        Check {
            variant: variant.to_owned(),
            figure: "the port witness switched off, with its reason",
            page: format!("{off:?}"),
            truth: format!("{expected:?}"),
            holds: off == expected,
        },
        Check {
            variant: variant.to_owned(),
            figure: "steady requests read as on a new connection",
            page: steady_read_new.to_string(),
            truth: format!("{steady_new_truth} (the target's connection numbers)"),
            holds: steady_read_new == steady_new_truth,
        },
        Check {
            variant: variant.to_owned(),
            figure: "fresh requests verified new",
            page: format!(
                "{} of {}",
                connection.verified_new, connection.fresh_requests
            ),
            truth: format!("{fresh} new connections"),
            holds: connection.verified_new == fresh as usize,
        },
    ])
}

/// Compare rounds against a twin whose keep-alive is about one of the other's requests.
async fn compare_keep_alive(server: &TestServer, profile: Profile) -> anyhow::Result<Vec<Check>> {
    let target = FieldTarget::start(
        server.state(),
        TargetConfig {
            http2: false,
            ..TargetConfig::default()
        },
    )
    .await?;
    let twin = FieldTarget::start(
        server.state(),
        TargetConfig {
            http2: false,
            idle_timeout: Some(std::time::Duration::from_millis(900)),
            ..TargetConfig::default()
        },
    )
    .await?;
    let link = Link::start(target.address(), profile).await?;
    let twin_link = Link::start(twin.address(), profile).await?;
    // Each target has an authority of its own: Chromium trusts both by their keys.
    let spki = |t: &FieldTarget| {
        t.spki_flag()
            .split_once('=')
            .map(|(_, key)| key.to_owned())
            .unwrap_or_default()
    };
    let flags = [
        format!(
            "--ignore-certificate-errors-spki-list={},{}",
            spki(&target),
            spki(&twin)
        ),
        FieldTarget::resolver_flag("*.test"),
    ];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let browser = Browser::start_with(DESKTOP, &flags).await?;
    let port = link.address().port();
    let mut demo = server.demo_target("first_token_ms=300&itl_ms=20&tokens=20");
    demo.url = format!("https://target.test:{port}{PATH}");
    demo.fresh_url = None;
    demo.probe_url = Some(format!("https://target.test:{port}/api/v1/ping"));
    let mut other = demo.clone();
    other.label = "twin, keep-alive 0.9 s".into();
    other.url = format!("https://target.test:{}{PATH}", twin_link.address().port());
    other.probe_url = None;
    let rounds = 10;
    let mut plan = Plan::steady(demo, 1);
    plan.targets.push(other);
    plan.phases = vec![
        PhasePlan::Probe { requests: 3 },
        PhasePlan::Warmup { requests: 2 },
        PhasePlan::Compare { rounds },
    ];
    plan.timeout_ms = 60_000;
    let run = run_in_app(server, &browser, plan).await?;
    // The twin's truth: each of its requests after the first on a connection of its own.
    let served = twin.served();
    let twin_posts = posts(&served);
    let reconnected = twin_posts
        .windows(2)
        .filter(|w| w[0].connection != w[1].connection)
        .count();
    let report = RunReport::of(&run);
    let overhead = report.overhead.first().context("an overhead")?;
    browser.quit().await?;
    let variant = "compare, twin's keep-alive 0.9 s".to_owned();
    let interval = overhead.difference_ms.map_or("—".into(), |d| {
        format!("{:+.1} [{:+.1}, {:+.1}]", d.value, d.low, d.high)
    });
    let holds_zero = overhead
        .difference_ms
        .is_some_and(|d| d.low <= 0.0 && d.high >= 0.0);
    Ok(vec![
        Check {
            variant: variant.clone(),
            figure: "compare rounds left out (a reconnect or a preflight)",
            page: format!("{} of {rounds}", overhead.left_out),
            truth: format!(
                "the twin reconnected {reconnected} times after its first request (its connection numbers)"
            ),
            holds: overhead.left_out >= reconnected || overhead.setup_included,
        },
        Check {
            variant,
            figure: "overhead, median of the rounds' differences",
            page: if overhead.setup_included {
                format!("{interval}, said to include set-up")
            } else {
                interval
            },
            truth: "0 (the same demo behind the same link)".into(),
            holds: holds_zero || overhead.setup_included,
        },
    ])
}

/// The variants' table.
pub(super) fn print(checks: &[Check], profile_label: &str) {
    println!("\nVariants over {profile_label}, HTTP/1.1, TLS 1.3 unless named:\n");
    println!("| variant | figure | firsttoken | truth | holds |");
    println!("| --- | --- | --- | --- | --- |");
    for c in checks {
        println!(
            "| {} | {} | {} | {} | {} |",
            c.variant,
            c.figure,
            c.page,
            c.truth,
            if c.holds { "yes" } else { "**no**" }
        );
    }
}
