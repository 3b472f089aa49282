//! The checklist's lines for everything besides the main request: the fresh-connection
//! URL, the probe and each compared target.

use firsttoken_core::connections::{ConnectionLog, Witness};

use crate::check::{Fresh, Line, Observed, PREFLIGHT_WAIT_MS, Reply, Verdict, opt_ms};

/// The fresh URL's, the probe's and the compared targets' lines.
pub(super) fn side_lines(o: &Observed) -> Vec<Line> {
    let mut lines = Vec::new();
    if o.main.redirected {
        lines.push(Line {
            key: "redirect".into(),
            verdict: Verdict::Warn,
            title: "Redirect".into(),
            detail: "The target URL answered through a redirect (a missing or extra trailing slash, say): every request of a run pays a round trip more, and another origin's a preflight more, before it reaches the endpoint. Use the URL it ends on.".into(),
            fix: None,
        });
    }
    lines.extend(port_line(o));
    lines.extend(preflight_cache_line(o));
    let line = |key: String, verdict: Verdict, title: String, detail: String| Line {
        key,
        verdict,
        title,
        detail,
        fix: None,
    };
    if let Some(fresh) = &o.fresh {
        let url = &fresh.url;
        lines.push(if !o.main.answered() {
            line(
                "fresh".into(),
                Verdict::Skip,
                "Fresh connections".into(),
                "Not known: the target itself gave no answer.".into(),
            )
        } else if !fresh.reply.answered() {
            line(
                "fresh".into(),
                Verdict::Fail,
                "Fresh connections".into(),
                format!(
                    "{url} did not answer ({}): check that the wildcard host name resolves, has a certificate and allows CORS from {}.",
                    fresh.reply.outcome(),
                    o.page_origin
                ),
            )
        } else {
            fresh_line(o, fresh)
        });
    }
    if let Some(probe) = &o.probe {
        // A probe answers with anything but a stream: its status is all that counts.
        let ok = (200..400).contains(&probe.status);
        lines.push(line(
            "probe".into(),
            match (ok, probe.redirected) {
                (false, _) => Verdict::Fail,
                (true, true) => Verdict::Warn,
                (true, false) => Verdict::Pass,
            },
            "Round-trip probe".into(),
            if ok && probe.redirected {
                format!(
                    "Answered {} after {}, through a redirect: a redirect costs a round trip of its own, so runs leave redirected probes out and have no round trip. Point the probe at the URL it ends on.",
                    probe.status,
                    opt_ms(probe.headers_ms)
                )
            } else if ok {
                format!("Answered {} after {}.", probe.status, opt_ms(probe.headers_ms))
            } else {
                format!(
                    "The probe URL did not answer ({}): runs will have no network round trip to compare with.",
                    probe.outcome()
                )
            },
        ));
    }
    for (i, (label, reply)) in o.compared.iter().enumerate() {
        lines.push(line(
            format!("compare_{i}"),
            if reply.answered() {
                Verdict::Pass
            } else {
                Verdict::Fail
            },
            format!("Compared: {label}"),
            if reply.answered() {
                format!("{}.", reply.outcome())
            } else {
                format!(
                    "{}: comparison rounds will have no numbers for it.",
                    reply.outcome()
                )
            },
        ));
    }
    lines
}

/// The connection log of the check's requests, in the order sent: the main request, the
/// same again straight after it, then the fresh host names.
fn replay(o: &Observed) -> (ConnectionLog, Vec<Option<bool>>) {
    let mut log = ConnectionLog::default();
    let witness = |r: &Reply, new_origin: bool, back_to_back: bool| Witness {
        target: 0,
        port: r.client_port,
        timing_reused: r.conn.as_ref().and_then(|c| c.reused),
        preflighted: r.preflighted,
        new_origin,
        http1: r.conn.as_ref().and_then(|c| c.protocol.as_deref()) == Some("http/1.1"),
        back_to_back,
    };
    log.new_connection(witness(&o.main, true, false));
    if let Some(again) = &o.main_again {
        log.new_connection(witness(again, false, true));
    }
    let mut fresh = Vec::new();
    if let Some(f) = &o.fresh {
        fresh.push(log.new_connection(witness(&f.reply, true, false)));
        if let Some((_, second)) = &f.second {
            fresh.push(log.new_connection(witness(second, true, false)));
        }
    }
    (log, fresh)
}

/// Whether the client port the target reports is the browser's: it must stay the same
/// across two back-to-back requests, and not be 0. No line when no port is reported.
fn port_line(o: &Observed) -> Option<Line> {
    let again = o.main_again.as_ref().filter(|_| o.main.answered())?;
    o.main.client_port.or(again.client_port)?;
    let (log, _) = replay(o);
    let title = "Client port".to_owned();
    Some(if let Some(off) = log.port_off(0) {
        Line {
            key: "client_port".into(),
            verdict: Verdict::Warn,
            title,
            detail: format!(
                "X-Firsttoken-Client-Port is not used to tell new connections from reused ones: {}.",
                off.reason()
            ),
            fix: Some(
                "proxy_hide_header X-Firsttoken-Client-Port;\nadd_header X-Firsttoken-Client-Port $remote_port always;\nadd_header Access-Control-Expose-Headers X-Firsttoken-Client-Port always;".into(),
            ),
        }
    } else if log.port_trusted(0) {
        Line {
            key: "client_port".into(),
            verdict: Verdict::Pass,
            title,
            detail: format!(
                "Two requests in a row came from port {}: the port the target reports is the browser's connection.",
                again.client_port.unwrap_or_default()
            ),
            fix: None,
        }
    } else {
        Line {
            key: "client_port".into(),
            verdict: Verdict::Warn,
            title,
            detail: "The second of two requests in a row reported no port, or ran on a new connection: the port cannot be checked, and runs will not use it.".into(),
            fix: None,
        }
    })
}

/// The fresh host names' line, once they answered: each must reach a new connection.
fn fresh_line(o: &Observed, fresh: &Fresh) -> Line {
    let url = &fresh.url;
    let line = |verdict: Verdict, detail: String| Line {
        key: "fresh".into(),
        verdict,
        title: "Fresh connections".into(),
        detail,
        fix: None,
    };
    let (_, verdicts) = replay(o);
    let how = if fresh.reply.client_port.is_some() {
        "from the client port the server reported"
    } else {
        "from Resource Timing"
    };
    let second_answered = fresh.second.as_ref().is_none_or(|(_, r)| r.answered());
    match verdicts.as_slice() {
        [Some(false), ..] => line(
            Verdict::Fail,
            format!(
                "{url} answered on the connection already in use ({how}): the browser shares one connection between these host names (HTTP/2 does on a wildcard certificate), so runs cannot measure a new connection. Use a host name on another certificate."
            ),
        ),
        [_, Some(false)] if second_answered => Line {
            fix: Some("keepalive_requests 2;".into()),
            ..line(
                Verdict::Fail,
                format!(
                    "A second fresh host name, {}, answered on the first one's connection ({how}): the browser coalesces the fresh host names onto one HTTP/2 connection (one address, one wildcard certificate), so a run would measure one new connection, not one per request. Close each connection on the fresh host names after its preflight and request (nginx: keepalive_requests 2 in their server block), or give each name an address of its own.",
                    fresh.second.as_ref().map_or("", |(u, _)| u.as_str())
                ),
            )
        },
        [Some(true)] | [Some(true), Some(true)] => line(
            Verdict::Pass,
            format!("{url} answered on a new connection ({how})."),
        ),
        [Some(true), None] => line(
            Verdict::Warn,
            format!(
                "{url} answered on a new connection ({how}), but whether a second fresh host name gets one too cannot be seen: HTTP/2 may coalesce them, and runs would then count fewer new connections."
            ),
        ),
        _ => Line {
            fix: Some(format!("Timing-Allow-Origin: {}", o.page_origin)),
            ..line(
                Verdict::Warn,
                format!(
                    "{url} answered, but whether on a new connection cannot be seen: the CORS preflight hides it from Resource Timing and the server does not report the client port (or reports one that is not the browser's). Runs will give no figure for what a new host name costs."
                ),
            )
        },
    }
}

/// Whether the preflight's answer is kept between requests: the main request sent once
/// more after [`PREFLIGHT_WAIT_MS`] idle, against the one sent straight after the first.
///
/// - It opened a connection of its own (Resource Timing timed a connect for it): the
///   endpoint closed the idle connection, and no preflight went first (a preflight would
///   have opened the connection, leaving the request on a reused one).
/// - On a reused connection, what it spent before it left (`sent_ms`) over the other's is
///   a new preflight when it is at least three quarters of a round trip and 5 ms (as runs
///   read it, [`crate::report::paid_preflight`]). The round trip is bounded from above by
///   the quickest of the probe's and the warm request's times to their response heads
///   (the network stack's `wait_ms` where it gave one), so the threshold is never too
///   low to be crossed by chance.
/// - It passes only when a probe timed the round trip (a light GET: its time to a head
///   is a round trip and a small handler) and that round trip clears the threshold: a
///   new preflight would then have shown. Otherwise what would show is not known.
///
/// No line when no preflight is needed.
fn preflight_cache_line(o: &Observed) -> Option<Line> {
    let again = o.main_again.as_ref().filter(|_| o.main.answered())?;
    let after = o.after_wait.as_ref()?;
    let line = |verdict: Verdict, detail: String, fix: Option<String>| Line {
        key: "preflight_cache".into(),
        verdict,
        title: "Preflight cache".into(),
        detail,
        fix,
    };
    let wait = PREFLIGHT_WAIT_MS / 1000;
    if after.conn.as_ref().and_then(|c| c.reused) == Some(false) {
        return Some(line(
            Verdict::Warn,
            format!(
                "After {wait} s with nothing sent, the request opened a new connection of its own: the endpoint (or a proxy in front of it) closes idle connections within {wait} s (uvicorn's and Node's default is 5 s), so a beta user's request after a pause pays TCP and TLS again, which cold requests will show. The preflight's answer was kept: none went before it."
            ),
            None,
        ));
    }
    let sent = |r: &Reply| r.conn.as_ref().and_then(|c| c.sent_ms);
    // A reply's time to its response head: the network stack's where it gave one.
    let head = |r: &Reply| r.conn.as_ref().and_then(|c| c.wait_ms).or(r.headers_ms);
    let probe = o
        .probe
        .as_ref()
        .filter(|p| (200..400).contains(&p.status) && !p.redirected)
        .and_then(head);
    let bound = probe.into_iter().chain(head(again)).reduce(f64::min);
    let (Some(before), Some(later), Some(bound)) = (sent(again), sent(after), bound) else {
        return Some(line(
            Verdict::Skip,
            "Whether the preflight's answer is kept could not be told: the browser showed no timing detail of the requests (send Timing-Allow-Origin).".into(),
            None,
        ));
    };
    if bound < crate::report::VISIBLE_PREFLIGHT_MS {
        // A round trip (and so a preflight) shorter than a browser's own hiccups.
        return Some(line(
            Verdict::Skip,
            format!(
                "Whether the preflight's answer is kept cannot be told on a round trip this short ({}): a new preflight would cost no more than the browser's own hiccups. From a beta user's network it can.",
                opt_ms(Some(bound))
            ),
            None,
        ));
    }
    let threshold = (0.75 * bound).max(5.0);
    let extra = later - before;
    Some(if extra >= threshold {
        line(
            Verdict::Warn,
            format!(
                "A request {wait} s after the last waited {} more on its connection before it was sent: a new CORS preflight. The preflight's answer has no Access-Control-Max-Age (browsers then keep it 5 s) or a short one, so every request after a pause pays a round trip more, which steady and cold requests will show.",
                opt_ms(Some(extra))
            ),
            Some("Access-Control-Max-Age: 7200".into()),
        )
    } else {
        match probe {
            Some(round_trip) if round_trip >= threshold => line(
                Verdict::Pass,
                format!(
                    "A request {wait} s after the last went without a new preflight ({} before it was sent, {} for the one before; a preflight would have added about the probe's {}): the preflight's answer is kept longer.",
                    opt_ms(Some(later)),
                    opt_ms(Some(before)),
                    opt_ms(Some(round_trip))
                ),
                None,
            ),
            Some(round_trip) => line(
                Verdict::Skip,
                format!(
                    "Whether the preflight's answer is kept cannot be told on a round trip this short ({}): a new preflight would cost too little to see. From a beta user's network it can.",
                    opt_ms(Some(round_trip))
                ),
                None,
            ),
            None => line(
                Verdict::Skip,
                format!(
                    "No new preflight showed, but without a round-trip probe it cannot be told whether one would have: the request's time to its response head ({}) includes the server's own. Runs count steady requests that waited for one.",
                    opt_ms(head(again))
                ),
                None,
            ),
        }
    })
}
