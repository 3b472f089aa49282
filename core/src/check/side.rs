//! The checklist's lines for everything besides the main request: the fresh-connection
//! URL, the probe and each compared target.

use super::*;

/// The fresh URL's, the probe's and the compared targets' lines.
pub(super) fn side_lines(o: &Observed) -> Vec<Line> {
    let mut lines = Vec::new();
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
            let mut log = ConnectionLog::default();
            let witness = |r: &Reply| Witness {
                target: 0,
                port: r.client_port,
                timing_reused: r.conn.as_ref().and_then(|c| c.reused),
                preflighted: r.preflighted,
            };
            log.new_connection(witness(&o.main));
            let how = if fresh.reply.client_port.is_some() {
                "from the client port the server reported"
            } else {
                "from Resource Timing"
            };
            match log.new_connection(witness(&fresh.reply)) {
                Some(true) => line(
                    "fresh".into(),
                    Verdict::Pass,
                    "Fresh connections".into(),
                    format!("{url} answered on a new connection ({how})."),
                ),
                Some(false) => line(
                    "fresh".into(),
                    Verdict::Fail,
                    "Fresh connections".into(),
                    format!(
                        "{url} answered on the connection already in use ({how}): the browser shares one connection between these host names (HTTP/2 does on a wildcard certificate), so runs cannot measure a new connection. Use a host name on another certificate."
                    ),
                ),
                None => Line {
                    fix: Some(format!("Timing-Allow-Origin: {}", o.page_origin)),
                    ..line(
                        "fresh".into(),
                        Verdict::Warn,
                        "Fresh connections".into(),
                        format!(
                            "{url} answered, but whether on a new connection cannot be seen: the CORS preflight hides it from Resource Timing and the server does not report the client port. Runs will give no figure for what a new connection costs."
                        ),
                    )
                },
            }
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
