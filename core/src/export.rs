//! A run's samples as CSV, one line per request, with the record's field names.

use crate::schema::{Run, Sample};

/// The header line's fields.
pub const CSV_FIELDS: [&str; 36] = [
    "run_id",
    "index",
    "phase",
    "target",
    "target_label",
    "scenario",
    "concurrency",
    "batch",
    "idle_ms",
    "idle_spent_ms",
    "start_ms",
    "status",
    "error",
    "error_message",
    "headers_ms",
    "ttfb_ms",
    "ttft_ms",
    "ttft_any_ms",
    "last_token_ms",
    "e2e_ms",
    "output_chunks",
    "reasoning_chunks",
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "done",
    "conn_reused",
    "conn_new",
    "protocol",
    "dns_ms",
    "connect_ms",
    "tls_ms",
    "hidden",
    "retry_wait_ms",
    "dropped",
    "itl_ms",
];

/// A text CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
///
/// Text that starts like a formula (`=`, `+`, `-`, `@`, a tab or a carriage return) gets a
/// leading `'`, so a spreadsheet shows it instead of running it: uploaders choose the
/// browser, OS, scenario and label strings, and an operator opens the file. Numbers are
/// written elsewhere and never pass through here.
pub fn csv_field(value: &str) -> String {
    let neutral = if value.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{value}")
    } else {
        value.to_owned()
    };
    if neutral.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", neutral.replace('"', "\"\""))
    } else {
        neutral
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

/// The run's samples as CSV, header first. Inter-token gaps are one field, separated by
/// spaces.
pub fn samples_csv(run: &Run) -> String {
    let mut out = CSV_FIELDS.join(",");
    out.push('\n');
    for s in &run.samples {
        let label = run
            .targets
            .get(s.target as usize)
            .map(|t| t.label.as_str())
            .unwrap_or_default();
        out.push_str(&line(&run.run_id, label, s));
        out.push('\n');
    }
    out
}

fn line(run_id: &str, label: &str, s: &Sample) -> String {
    let usage = s.usage.unwrap_or_default();
    let conn = s.conn.as_ref();
    let fields = [
        csv_field(run_id),
        s.index.to_string(),
        s.phase.name().to_owned(),
        s.target.to_string(),
        csv_field(label),
        csv_field(s.scenario.as_deref().unwrap_or_default()),
        s.concurrency.to_string(),
        opt(s.batch),
        opt(s.idle_ms),
        opt(s.idle_spent_ms),
        s.start_ms.to_string(),
        s.status.to_string(),
        opt(s.error.map(|e| e.name())),
        csv_field(s.error_message.as_deref().unwrap_or_default()),
        opt(s.headers_ms),
        opt(s.ttfb_ms),
        opt(s.ttft_ms),
        opt(s.ttft_any_ms),
        opt(s.last_token_ms),
        opt(s.e2e_ms),
        s.output_chunks.to_string(),
        s.reasoning_chunks.to_string(),
        opt(usage.input_tokens),
        opt(usage.output_tokens),
        opt(usage.reasoning_tokens),
        s.done.to_string(),
        opt(conn.and_then(|c| c.reused)),
        opt(conn.and_then(|c| c.new_connection)),
        csv_field(conn.and_then(|c| c.protocol.as_deref()).unwrap_or_default()),
        opt(conn.and_then(|c| c.dns_ms)),
        opt(conn.and_then(|c| c.connect_ms)),
        opt(conn.and_then(|c| c.tls_ms)),
        s.hidden.to_string(),
        opt(s.retry_wait_ms),
        s.dropped.to_string(),
        s.itl_ms
            .iter()
            .map(f64::to_string)
            .collect::<Vec<_>>()
            .join(" "),
    ];
    fields.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_that_a_spreadsheet_would_run_is_neutralised() {
        assert_eq!(csv_field("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(csv_field("+1"), "'+1");
        assert_eq!(csv_field("-cmd"), "'-cmd");
        assert_eq!(csv_field("@SUM(A1)"), "'@SUM(A1)");
        assert_eq!(csv_field("\tx"), "'\tx");
        assert_eq!(csv_field("\rx"), "\"'\rx\"");
        assert_eq!(csv_field("Chrome"), "Chrome");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
    }

    #[test]
    fn a_cut_off_stream_is_a_line_with_its_class_and_its_ttft() {
        let mut run: Run =
            serde_json::from_str(include_str!("../schema/example-run.v1.json")).expect("example");
        run.samples[0].error = Some(crate::ErrorClass::Truncated);
        let csv = samples_csv(&run);
        let line = csv.lines().nth(1).expect("a line");
        let field = |name: &str| {
            let at = CSV_FIELDS.iter().position(|f| *f == name).expect(name);
            line.split(',').nth(at).expect("the field").to_owned()
        };
        assert_eq!(field("error"), "truncated");
        assert_eq!(field("ttft_ms"), "306.2");
    }

    #[test]
    fn every_sample_is_one_line_of_the_headers_width() {
        let mut run: Run =
            serde_json::from_str(include_str!("../schema/example-run.v1.json")).expect("example");
        run.samples[1].error_message = Some("HTTP 500, \"upstream\"".into());
        let csv = samples_csv(&run);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + run.samples.len());
        assert_eq!(lines[0].split(',').count(), CSV_FIELDS.len());
        assert!(lines[1].starts_with("0f8fad5b-d9cb-469f-a165-70867728950e,0,steady,0,demo,default,1,,,,0,200,,,4.1,4.6,306.2,"), "{}", lines[1]);
        assert!(
            lines[1].ends_with(",false,,0,25.3 24.8 25.1"),
            "{}",
            lines[1]
        );
        assert!(
            lines[2].contains(",\"HTTP 500, \"\"upstream\"\"\","),
            "{}",
            lines[2]
        );
    }
}
