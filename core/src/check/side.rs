//! The checklist's lines for everything besides the main request: the fresh-connection
//! URL, the probe and each compared target.

use super::*;

/// The fresh URL's, the probe's and the compared targets' lines.
pub(super) fn side_lines(o: &Observed) -> Vec<Line> {
    let mut lines = Vec::new();
    lines.extend(port_line(o));
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
            if ok { Verdict::Pass } else { Verdict::Fail },
            "Round-trip probe".into(),
            if ok {
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
                "add_header X-Firsttoken-Client-Port $remote_port always;\nadd_header Access-Control-Expose-Headers X-Firsttoken-Client-Port always;".into(),
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
