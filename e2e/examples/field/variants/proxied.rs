//! The variants behind nginx: the browser → the link → nginx (ending TLS 1.3, HTTP/1.1,
//! with the book's own `location /firsttoken/` block, [`firsttoken_e2e::nginx`]) → the
//! app, plain HTTP, under `/firsttoken`. Three ways an operator's nginx can stand there,
//! each as the book's Protocols page (`docs/src/guide/protocols.md`) describes it:
//!
//! - nginx reports the browser's port (the book's two `add_header` lines): the port witness
//!   is used, and agrees with the link;
//! - the app reports its own peer's port, nginx opening a new upstream connection for each
//!   request (the book's block as written): a port per request;
//! - the same behind a shared pool of upstream connections (`upstream { keepalive 4; }`):
//!   ports that repeat across browser connections.
//!
//! In each, against the truth of nginx's access log (its `$remote_port` is the link's
//! socket, one per browser connection) and of the link: whether the witness switched
//! itself off and why, how many steady requests were read as on a new connection, the
//! fresh requests verified new, and what a new host name cost before its request left.

use firsttoken_e2e::nginx::{BASE, Nginx, NginxConfig};

use super::*;

/// The three ways nginx can stand in front, and the witness's expected state.
const WAYS: [(&str, Option<u32>, bool, PortHeader); 3] = [
    (
        "nginx sends the browser's port",
        None,
        true,
        PortHeader::Absent,
    ),
    (
        "app's port behind nginx, an upstream connection per request",
        None,
        false,
        PortHeader::Peer,
    ),
    (
        "app's port behind nginx, a shared upstream pool",
        Some(4),
        false,
        PortHeader::Peer,
    ),
];

pub(super) async fn behind_nginx(
    server: &TestServer,
    profile: Profile,
) -> anyhow::Result<Vec<Check>> {
    let mut checks = Vec::new();
    for (variant, pool, client_port, port_header) in WAYS {
        checks.extend(one_way(server, profile, variant, pool, client_port, port_header).await?);
    }
    Ok(checks)
}

async fn one_way(
    server: &TestServer,
    profile: Profile,
    variant: &str,
    pool: Option<u32>,
    client_port: bool,
    port_header: PortHeader,
) -> anyhow::Result<Vec<Check>> {
    let target = FieldTarget::start(
        server.state_under(BASE),
        TargetConfig {
            tls: None,
            http2: false,
            port_header,
            ..TargetConfig::default()
        },
    )
    .await?;
    let nginx = Nginx::start(&NginxConfig {
        pool,
        client_port,
        ..NginxConfig::ending_tls_for(&target)
    })?;
    let link = Link::start(nginx.address(), profile).await?;
    let flags = [target.spki_flag(), FieldTarget::resolver_flag("*.test")];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let browser = Browser::start_with(DESKTOP, &flags).await?;
    let port = link.address().port();
    let mut demo = server.demo_target("first_token_ms=300&itl_ms=20&tokens=20");
    demo.url = format!("https://target.test:{port}{BASE}{PATH}");
    demo.fresh_url = Some(format!("https://{{n}}.fresh.test:{port}{BASE}{PATH}"));
    demo.probe_url = Some(format!("https://target.test:{port}{BASE}/api/v1/ping"));
    let fresh = 3;
    let mut plan = Plan::steady(demo, 1);
    plan.phases = vec![
        PhasePlan::Probe { requests: 2 },
        PhasePlan::Warmup { requests: 2 },
        PhasePlan::Steady { requests: 3 },
        PhasePlan::Fresh { requests: fresh },
    ];
    plan.timeout_ms = 60_000;
    let run = run_in_app(server, &browser, plan).await?;
    browser.quit().await?;

    // nginx's log, in the order it finished the requests (one at a time here): each
    // request's method and the link's port it came from, one port per browser connection.
    let log = std::fs::read_to_string(nginx.access_log())?;
    let mut seen = std::collections::HashSet::new();
    let mut opened_by_post = Vec::new();
    for line in log.lines() {
        let port = line.rsplit_once("port=").map(|(_, p)| p.to_owned());
        let new = seen.insert(port);
        if line.starts_with(&format!("POST {BASE}/v1/chat/completions")) {
            opened_by_post.push(new);
        }
    }
    let (steady_new_truth, steady_read_new) = steady_new(&run, &opened_by_post);
    let served = target.served();
    let link_log = link.log();
    let truth: Vec<f64> = posts(&served)
        .iter()
        .rev()
        .take(fresh as usize)
        .filter_map(|s| before_sent(&link_log, s.received))
        .collect();
    let truth = firsttoken_crowd::stats::median(&truth);
    let report = RunReport::of(&run);
    let connection = report.connection.context("a fresh phase")?;
    let page = connection.extra_sent_ms();
    let off = run.engine.client_port_off;
    let (off_holds, expected) = if client_port {
        (off.is_none(), "None (the port is the browser's)")
    } else {
        (
            matches!(off, Some(PortOff::Changed | PortOff::Contradicted)),
            "Changed or Contradicted",
        )
    };
    let variant = variant.to_owned();
    Ok(vec![
        Check {
            variant: variant.clone(),
            figure: "the port witness switched off, with its reason",
            page: format!("{off:?}"),
            truth: expected.into(),
            holds: off_holds,
        },
        Check {
            variant: variant.clone(),
            figure: "steady requests read as on a new connection",
            page: steady_read_new.to_string(),
            truth: format!("{steady_new_truth} (nginx's log of the link's ports)"),
            holds: steady_read_new == steady_new_truth,
        },
        Check {
            variant: variant.clone(),
            figure: "fresh requests verified new",
            page: format!(
                "{} of {}",
                connection.verified_new, connection.fresh_requests
            ),
            truth: format!("{fresh} new connections"),
            holds: connection.verified_new == fresh as usize,
        },
        // Without the browser's port, no steady request behind a preflight can be shown
        // to reuse its connection: the figure must be absent, with that reason.
        if client_port {
            Check {
                variant,
                figure: "new host name: before the request left (sent_ms over warm)",
                page: ms(page),
                truth: format!("{} (the link: accept to the request)", ms(truth)),
                holds: within_tenth(page, truth, profile),
            }
        } else {
            let why = connection.missing().unwrap_or_default();
            Check {
                variant,
                figure: "new host name: no figure without the browser's port, and why",
                page: format!("{}: {why}", ms(page)),
                truth: format!(
                    "{} (the link), not shown: no steady request verified warm",
                    ms(truth)
                ),
                holds: page.is_none() && why.contains("client port"),
            }
        },
    ])
}
