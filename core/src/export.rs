//! One definition of a sample row: the flat line per request that every export writes
//! (the page's CSV download, the collector's CSV and NDJSON export). Each column is
//! listed once, in [`COLUMNS`], with what it means and how it is read from a run and one
//! of its samples; the CSV header, the JSON keys and the book's column table (`docs/src/reference/record.md`) all come from
//! that list. The collector keeps no row per sample: it stores each run's record and
//! reads these rows back from it.

use firsttoken_stream::dialect::Usage;
use serde_json::{Map, Number, Value as Json};

use crate::schema::{Connection, Run, Sample, Target};

/// One sample of one run: what a row is made from.
#[derive(Debug, Clone, Copy)]
pub struct Line<'a> {
    pub run: &'a Run,
    pub sample: &'a Sample,
    /// When the collector stored the run (Unix ms); `None` in the page, before any upload.
    pub received_at_ms: Option<i64>,
}

impl<'a> Line<'a> {
    fn target(&self) -> &'a Target {
        self.run.target_of(self.sample)
    }

    fn conn(&self) -> Option<&'a Connection> {
        self.sample.conn.as_ref()
    }

    fn usage(&self) -> Usage {
        self.sample.usage.unwrap_or_default()
    }
}

/// A value in a row; `None` is an empty CSV field and a JSON `null`.
#[derive(Debug, Clone, PartialEq)]
pub enum Value<'a> {
    Text(Option<&'a str>),
    Int(Option<i64>),
    Real(Option<f64>),
    Bool(Option<bool>),
    /// Milliseconds (the gaps between output events): one CSV field of numbers separated
    /// by spaces, a JSON array.
    Reals(&'a [f64]),
}

/// A column of the row.
#[derive(Debug)]
pub struct Column {
    /// Its name: the record's field name where it has one, the CSV header and JSON key.
    pub name: &'static str,
    /// What it holds, in the book's column table.
    pub meaning: &'static str,
    read: for<'a> fn(&Line<'a>) -> Value<'a>,
}

impl Column {
    /// This column's value for `line`.
    pub fn value<'a>(&self, line: &Line<'a>) -> Value<'a> {
        (self.read)(line)
    }
}

fn int(value: impl Into<i64>) -> Value<'static> {
    Value::Int(Some(value.into()))
}

fn count(value: Option<u64>) -> Value<'static> {
    // Token counts are at most MAX_TOKENS in a validated record.
    Value::Int(value.map(|v| i64::try_from(v).unwrap_or(i64::MAX)))
}

/// Every column, in the order of the CSV header.
pub const COLUMNS: &[Column] = &[
    Column {
        name: "run_id",
        meaning: "the run's id (a random UUID made in the browser)",
        read: |l| Value::Text(Some(&l.run.run_id)),
    },
    Column {
        name: "index",
        meaning: "the request's position in the run, from 0",
        read: |l| int(l.sample.index),
    },
    Column {
        name: "received_at_ms",
        meaning: "the hour the collector stored the run in (Unix ms, whole hours); empty in the page's own CSV",
        read: |l| Value::Int(l.received_at_ms),
    },
    Column {
        name: "study",
        meaning: "the share link's study id",
        read: |l| Value::Text(l.run.study_id.as_deref()),
    },
    Column {
        name: "phase",
        meaning: "the protocol phase: probe, warmup, steady, fresh, concurrency, cold, compare",
        read: |l| Value::Text(Some(l.sample.phase.name())),
    },
    Column {
        name: "target",
        meaning: "which of the run's targets the request went to (0: the main one)",
        read: |l| int(l.sample.target),
    },
    Column {
        name: "target_label",
        meaning: "that target's label",
        read: |l| Value::Text(Some(&l.target().label)),
    },
    Column {
        name: "target_version",
        meaning: "the version of the operator's app the link named (before/after a fix)",
        read: |l| Value::Text(l.target().version.as_deref()),
    },
    Column {
        name: "target_demo",
        meaning: "whether the target is the built-in demo (simulated numbers)",
        read: |l| Value::Bool(Some(l.target().demo)),
    },
    Column {
        name: "scenario",
        meaning: "the request body's scenario name",
        read: |l| Value::Text(l.sample.scenario.as_deref()),
    },
    Column {
        name: "concurrency",
        meaning: "requests in flight together (1 when sequential)",
        read: |l| int(l.sample.concurrency),
    },
    Column {
        name: "batch",
        meaning: "the batch of simultaneous requests, from 0 within the phase",
        read: |l| Value::Int(l.sample.batch.map(i64::from)),
    },
    Column {
        name: "idle_ms",
        meaning: "cold requests: the idle time the plan asked for",
        read: |l| Value::Int(l.sample.idle_ms.map(i64::from)),
    },
    Column {
        name: "idle_spent_ms",
        meaning: "cold requests: the idle time actually spent before it",
        read: |l| Value::Real(l.sample.idle_spent_ms),
    },
    Column {
        name: "idle_timer_late_ms",
        meaning: "cold requests: how late the wait's timer came back at worst (seconds: a frozen tab)",
        read: |l| Value::Real(l.sample.idle_timer_late_ms),
    },
    Column {
        name: "start_ms",
        meaning: "when the request started, from the run's start",
        read: |l| Value::Real(Some(l.sample.start_ms)),
    },
    Column {
        name: "status",
        meaning: "HTTP status; 0 when no response came",
        read: |l| int(l.sample.status),
    },
    Column {
        name: "error",
        meaning: "the failure's class (network, http, timeout, aborted, protocol, stream, parse, truncated, stalled); empty when none",
        read: |l| Value::Text(l.sample.error.map(|e| e.name())),
    },
    Column {
        name: "error_message",
        meaning: "what went wrong, in words (never the response body)",
        read: |l| Value::Text(l.sample.error_message.as_deref()),
    },
    Column {
        name: "headers_ms",
        meaning: "status and headers known (fetch resolved)",
        read: |l| Value::Real(l.sample.headers_ms),
    },
    Column {
        name: "ttfb_ms",
        meaning: "the first body chunk read",
        read: |l| Value::Real(l.sample.ttfb_ms),
    },
    Column {
        name: "ttft_ms",
        meaning: "the first event with answer text read: the time to first token",
        read: |l| Value::Real(l.sample.ttft_ms),
    },
    Column {
        name: "ttft_any_ms",
        meaning: "the first event with any output (reasoning, tool call or text)",
        read: |l| Value::Real(l.sample.ttft_any_ms),
    },
    Column {
        name: "last_token_ms",
        meaning: "the last event with output",
        read: |l| Value::Real(l.sample.last_token_ms),
    },
    Column {
        name: "e2e_ms",
        meaning: "the stream ended",
        read: |l| Value::Real(l.sample.e2e_ms),
    },
    Column {
        name: "output_chunks",
        meaning: "events with output (not tokens)",
        read: |l| int(l.sample.output_chunks),
    },
    Column {
        name: "reasoning_chunks",
        meaning: "of those, events with reasoning",
        read: |l| int(l.sample.reasoning_chunks),
    },
    Column {
        name: "input_tokens",
        meaning: "prompt tokens, when the stream reported them",
        read: |l| count(l.usage().input_tokens),
    },
    Column {
        name: "output_tokens",
        meaning: "generated tokens, reasoning included, when reported",
        read: |l| count(l.usage().output_tokens),
    },
    Column {
        name: "reasoning_tokens",
        meaning: "of those, reasoning tokens, when reported",
        read: |l| count(l.usage().reasoning_tokens),
    },
    Column {
        name: "done",
        meaning: "the stream's own end marker arrived",
        read: |l| Value::Bool(Some(l.sample.done)),
    },
    Column {
        name: "conn_reused",
        meaning: "Resource Timing saw no connection set up for the request; empty when it gave no detail",
        read: |l| Value::Bool(l.conn().and_then(|c| c.reused)),
    },
    Column {
        name: "conn_new",
        meaning: "verified on a connection no earlier request of the run used (client port, connect interval); empty when it cannot be told",
        read: |l| Value::Bool(l.conn().and_then(|c| c.new_connection)),
    },
    Column {
        name: "protocol",
        meaning: "the HTTP version (h2, http/1.1, h3)",
        read: |l| Value::Text(l.conn().and_then(|c| c.protocol.as_deref())),
    },
    Column {
        name: "dns_ms",
        meaning: "Resource Timing: DNS lookup",
        read: |l| Value::Real(l.conn().and_then(|c| c.dns_ms)),
    },
    Column {
        name: "connect_ms",
        meaning: "Resource Timing: TCP connect, TLS included",
        read: |l| Value::Real(l.conn().and_then(|c| c.connect_ms)),
    },
    Column {
        name: "tls_ms",
        meaning: "Resource Timing: TLS handshake",
        read: |l| Value::Real(l.conn().and_then(|c| c.tls_ms)),
    },
    Column {
        name: "sent_ms",
        meaning: "Resource Timing: from fetch() to the request sent (DNS, connection, TLS, CORS preflight: whichever went first)",
        read: |l| Value::Real(l.conn().and_then(|c| c.sent_ms)),
    },
    Column {
        name: "wait_ms",
        meaning: "Resource Timing: from the request sent to the answer's first byte (a round trip and the server's time to its head)",
        read: |l| Value::Real(l.conn().and_then(|c| c.wait_ms)),
    },
    Column {
        name: "hidden",
        meaning: "the page was hidden during the request (or a cold request's wait)",
        read: |l| Value::Bool(Some(l.sample.hidden)),
    },
    Column {
        name: "retry_wait_ms",
        meaning: "after a 429: the wait its Retry-After asked for (never in a latency)",
        read: |l| Value::Real(l.sample.retry_wait_ms),
    },
    Column {
        name: "redirected",
        meaning: "the response came after a redirect (its round trips are in the times)",
        read: |l| Value::Bool(Some(l.sample.redirected)),
    },
    Column {
        name: "dropped",
        meaning: "values the browser saw that could not be kept",
        read: |l| int(l.sample.dropped),
    },
    Column {
        name: "network",
        meaning: "the network the user chose: cellular, fiber, cable-dsl, wifi, satellite, other, unknown",
        read: |l| Value::Text(Some(l.run.client.network.name())),
    },
    Column {
        name: "effective_type",
        meaning: "the browser's Network Information guess (4g, 3g, …), where it has one",
        read: |l| Value::Text(l.run.client.effective_type.as_deref()),
    },
    Column {
        name: "browser",
        meaning: "the browser's family (Chrome, Firefox, Safari, …)",
        read: |l| Value::Text(l.run.client.browser.as_deref()),
    },
    Column {
        name: "os",
        meaning: "the operating system's family",
        read: |l| Value::Text(l.run.client.os.as_deref()),
    },
    Column {
        name: "mobile",
        meaning: "the browser says it is on a phone",
        read: |l| Value::Bool(l.run.client.mobile),
    },
    Column {
        name: "itl_ms",
        meaning: "the gaps between successive output events, separated by spaces",
        read: |l| Value::Reals(&l.sample.itl_ms),
    },
];

/// A text CSV field (RFC 4180): quoted when it holds a comma, a semicolon, a quote or a
/// line break. The semicolon: a spreadsheet in a German or French locale splits fields on
/// it, and `x;=HYPERLINK(…)` unquoted would be two cells, the second a formula.
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
    if neutral.contains([',', ';', '"', '\n', '\r']) {
        format!("\"{}\"", neutral.replace('"', "\"\""))
    } else {
        neutral
    }
}

fn opt<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(String::new, |v| v.to_string())
}

/// The CSV header line, with its line break.
pub fn csv_header() -> String {
    let mut header = COLUMNS.iter().map(|c| c.name).collect::<Vec<_>>().join(",");
    header.push('\n');
    header
}

/// One sample as a CSV line, with its line break.
pub fn csv_line(line: &Line) -> String {
    let mut out = COLUMNS
        .iter()
        .map(|column| match column.value(line) {
            Value::Text(text) => text.map(csv_field).unwrap_or_default(),
            Value::Int(n) => opt(n),
            Value::Real(x) => opt(x),
            Value::Bool(b) => opt(b),
            Value::Reals(xs) => xs.iter().map(f64::to_string).collect::<Vec<_>>().join(" "),
        })
        .collect::<Vec<_>>()
        .join(",");
    out.push('\n');
    out
}

/// One sample as a JSON object keyed by column name (the collector's NDJSON export).
pub fn json_object(line: &Line) -> Map<String, Json> {
    // A validated record holds no NaN or infinity, so `Number::from_f64` never says no.
    let real = |x: f64| Number::from_f64(x).map_or(Json::Null, Json::Number);
    COLUMNS
        .iter()
        .map(|column| {
            let value = match column.value(line) {
                Value::Text(text) => text.map_or(Json::Null, |t| Json::String(t.to_owned())),
                Value::Int(n) => n.map_or(Json::Null, |n| Json::Number(n.into())),
                Value::Real(x) => x.map_or(Json::Null, real),
                Value::Bool(b) => b.map_or(Json::Null, Json::Bool),
                Value::Reals(xs) => Json::Array(xs.iter().map(|x| real(*x)).collect()),
            };
            (column.name.to_owned(), value)
        })
        .collect()
}

/// The run's samples as CSV, header first: the page's download, before any upload.
pub fn samples_csv(run: &Run) -> String {
    let mut out = csv_header();
    for sample in &run.samples {
        out.push_str(&csv_line(&Line {
            run,
            sample,
            received_at_ms: None,
        }));
    }
    out
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
        // A spreadsheet that splits on `;` sees one cell, not a formula after it.
        assert_eq!(csv_field("x;=1+1"), "\"x;=1+1\"");
        assert_eq!(
            csv_field("a;=cmd|' /C calc'!A0"),
            "\"a;=cmd|' /C calc'!A0\""
        );
    }

    fn example() -> Run {
        serde_json::from_str(include_str!("../schema/example-run.v1.json")).expect("example")
    }

    /// The value of the column `name` in a CSV line (no field of the example holds a comma).
    fn field(line: &str, name: &str) -> String {
        let at = COLUMNS.iter().position(|c| c.name == name).expect(name);
        line.split(',').nth(at).expect("the field").to_owned()
    }

    #[test]
    fn a_cut_off_stream_is_a_line_with_its_class_and_its_ttft() {
        let mut run = example();
        run.samples[0].error = Some(crate::schema::ErrorClass::Truncated);
        let csv = samples_csv(&run);
        let line = csv.lines().nth(1).expect("a line");
        assert_eq!(field(line, "error"), "truncated");
        assert_eq!(field(line, "ttft_ms"), "306.2");
    }

    #[test]
    fn every_sample_is_one_line_of_the_headers_width() {
        let mut run = example();
        run.samples[1].error_message = Some("HTTP 500, \"upstream\"".into());
        let csv = samples_csv(&run);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + run.samples.len());
        assert_eq!(lines[0].split(',').count(), COLUMNS.len());
        assert!(lines[0].starts_with("run_id,index,received_at_ms,study,phase,"));
        assert!(
            lines[1].starts_with("0f8fad5b-d9cb-469f-a165-70867728950e,0,,"),
            "{}",
            lines[1]
        );
        assert!(lines[1].ends_with(",25.3 24.8 25.1"), "{}", lines[1]);
        assert!(
            lines[2].contains(",\"HTTP 500, \"\"upstream\"\"\","),
            "{}",
            lines[2]
        );
    }

    #[test]
    fn names_are_unique() {
        let mut names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COLUMNS.len());
    }

    /// Read independently of the row's code: each column named like a field of the
    /// record's sample (or of its `conn`, `usage` or the run's `client`, under the same
    /// name or with a `conn_` prefix) holds that field's JSON value.
    #[test]
    fn a_column_named_like_a_record_field_holds_that_field() {
        let record: Json =
            serde_json::from_str(include_str!("../schema/example-run.v1.json")).expect("json");
        let run = example();
        let mut compared = 0;
        for (sample, json) in run
            .samples
            .iter()
            .zip(record["samples"].as_array().expect("samples"))
        {
            let row = json_object(&Line {
                run: &run,
                sample,
                received_at_ms: Some(1_700_000_000_000),
            });
            assert_eq!(row["received_at_ms"], 1_700_000_000_000_i64);
            assert_eq!(row["run_id"], record["run_id"]);
            for (name, value) in &row {
                let expected = json
                    .get(name)
                    .or_else(|| json["conn"].get(name.strip_prefix("conn_").unwrap_or(name)))
                    .or_else(|| json["usage"].get(name))
                    .or_else(|| record["client"].get(name));
                let Some(expected) = expected else { continue };
                // A record may write a whole number of milliseconds as `0`, the row as `0.0`.
                let same = match (value.as_f64(), expected.as_f64()) {
                    (Some(a), Some(b)) => a == b,
                    _ => value == expected,
                };
                assert!(same, "{name}: row {value}, record {expected}");
                compared += 1;
            }
        }
        assert!(
            compared > 20 * run.samples.len(),
            "only {compared} compared"
        );
    }

    #[test]
    fn the_csv_and_the_json_carry_the_same_values() {
        let run = example();
        let line = Line {
            run: &run,
            sample: &run.samples[0],
            received_at_ms: None,
        };
        let csv = csv_line(&line);
        let json = json_object(&line);
        for column in COLUMNS {
            let text = field(csv.trim_end(), column.name);
            let number = |t: &str| t.parse::<f64>().expect("a number");
            match &json[column.name] {
                Json::Null => assert_eq!(text, "", "{}", column.name),
                Json::String(s) => assert_eq!(&text, s, "{}", column.name),
                Json::Bool(b) => assert_eq!(text, b.to_string(), "{}", column.name),
                Json::Number(n) => assert_eq!(Some(number(&text)), n.as_f64(), "{}", column.name),
                Json::Array(xs) => {
                    let read: Vec<f64> = text.split(' ').map(number).collect();
                    let expected: Vec<f64> = xs.iter().filter_map(Json::as_f64).collect();
                    assert_eq!(read, expected, "{}", column.name);
                }
                Json::Object(_) => panic!("{} is an object", column.name),
            }
        }
    }

    /// The book's table of columns is this list: documented once, and kept in step.
    #[test]
    fn the_book_lists_every_column_in_order() {
        let readme = include_str!("../../docs/src/reference/record.md");
        let documented: Vec<&str> = readme
            .lines()
            .skip_while(|l| *l != "| column | meaning |")
            .skip(2)
            .map_while(|l| l.strip_prefix("| `")?.split('`').next())
            .collect();
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        assert_eq!(
            documented, names,
            "docs/src/reference/record.md's column table"
        );
        for column in COLUMNS {
            let row = format!("| `{}` | {} |", column.name, column.meaning);
            assert!(
                readme.contains(&row),
                "docs/src/reference/record.md lacks the row: {row}"
            );
        }
    }
}
