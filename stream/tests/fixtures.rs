//! Every SSE fixture in `tests/fixtures/sse` (copied from the project's shared fixtures)
//! must give exactly its expected values, whatever way its bytes are split into chunks.

use std::path::{Path, PathBuf};

use firsttoken_stream::dialect::{CustomDialect, Dialect, Timings, Usage, timings_from};
use firsttoken_stream::recorder::StreamRecorder;
use firsttoken_stream::sse::SseParser;
use proptest::prelude::*;
use serde_json::Value;

/// What a fixture's `.expect.json` promises, computed from a stream.
#[derive(Debug, PartialEq)]
struct Outcome {
    events: usize,
    content: String,
    content_chunks: usize,
    first_content_event: Option<usize>,
    reasoning_chunks: usize,
    first_output_event: Option<usize>,
    usage: Option<Usage>,
    error: Option<String>,
    done: bool,
    server_timings: Option<Timings>,
}

struct Fixture {
    name: String,
    bytes: Vec<u8>,
    dialect: Dialect,
    expected: Outcome,
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sse")
}

/// Every fixture, with its dialect and what it must give.
fn load_fixtures() -> Vec<Fixture> {
    let mut fixtures = Vec::new();
    let mut paths: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .expect("fixture directory exists")
        .map(|e| e.expect("readable entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "sse"))
        .collect();
    paths.sort();
    for path in paths {
        let name = path
            .file_stem()
            .expect("file name")
            .to_string_lossy()
            .into_owned();
        let bytes = std::fs::read(&path).expect("fixture readable");
        let expect: Value = serde_json::from_slice(
            &std::fs::read(path.with_extension("expect.json")).expect("expect.json exists"),
        )
        .expect("expect.json is JSON");
        let dialect = match expect["dialect"].as_str().expect("dialect named") {
            "custom" => Dialect::Custom(
                serde_json::from_value::<CustomDialect>(expect["custom"].clone())
                    .expect("a custom description"),
            ),
            other => Dialect::from_name(other)
                .unwrap_or_else(|| panic!("{name}: unknown dialect {other}")),
        };
        let count = |key: &str| expect[key].as_u64().expect(key) as usize;
        let expected = Outcome {
            events: count("events"),
            content: expect["content"].as_str().expect("content").to_owned(),
            content_chunks: count("content_chunks"),
            first_content_event: expect["first_content_event"].as_u64().map(|v| v as usize),
            reasoning_chunks: count("reasoning_chunks"),
            first_output_event: expect["first_output_event"].as_u64().map(|v| v as usize),
            usage: match &expect["usage"] {
                Value::Null => None,
                usage => Some(Usage {
                    input_tokens: usage["input_tokens"].as_u64(),
                    output_tokens: usage["output_tokens"].as_u64(),
                    reasoning_tokens: usage["reasoning_tokens"].as_u64(),
                }),
            },
            error: expect["error"].as_str().map(str::to_owned),
            done: expect["done"].as_bool().expect("done"),
            server_timings: timings_from(&expect["server_timings"]),
        };
        fixtures.push(Fixture {
            name,
            bytes,
            dialect,
            expected,
        });
    }
    fixtures
}

/// The byte offset at which each event of `bytes` is complete: fed one byte at a time, an
/// incremental parser dispatches each event on the byte that completes it.
fn completing_bytes(bytes: &[u8]) -> Vec<usize> {
    let mut parser = SseParser::new();
    let mut at = Vec::new();
    for (offset, byte) in bytes.iter().enumerate() {
        parser.feed(std::slice::from_ref(byte), |_| at.push(offset));
    }
    at
}

/// Parses and decodes `chunks` as one stream, and checks that the timed recorder (which
/// the engine uses) agrees with the plain parse on every count, and that its TTFT and
/// first-output times are the stamps of the chunks holding the bytes that completed the
/// first answer event and the first output event. Chunk `i` is stamped `i` ms.
fn outcome<'a>(f: &Fixture, chunks: impl IntoIterator<Item = &'a [u8]>) -> Outcome {
    let dialect = &f.dialect;
    let completing = completing_bytes(&f.bytes);
    let mut chunk_of_byte = Vec::with_capacity(f.bytes.len());
    let mut parser = SseParser::new();
    let mut recorder = StreamRecorder::new(dialect.clone());
    let mut out = Outcome {
        events: 0,
        content: String::new(),
        content_chunks: 0,
        first_content_event: None,
        reasoning_chunks: 0,
        first_output_event: None,
        usage: None,
        error: None,
        done: false,
        server_timings: None,
    };
    for (t, chunk) in chunks.into_iter().enumerate() {
        chunk_of_byte.extend(std::iter::repeat_n(t as f64, chunk.len()));
        recorder.on_chunk(t as f64, chunk);
        parser.feed(chunk, |event| {
            let index = out.events;
            out.events += 1;
            let decoded = dialect
                .decode(&event)
                .expect("fixture events are well-formed");
            if decoded.has_answer() {
                out.content.push_str(&decoded.content);
                out.content_chunks += 1;
                out.first_content_event.get_or_insert(index);
            }
            if !decoded.reasoning.is_empty() {
                out.reasoning_chunks += 1;
            }
            if decoded.has_output() {
                out.first_output_event.get_or_insert(index);
            }
            if let Some(usage) = decoded.usage {
                out.usage = Some(Usage::merge(out.usage, usage));
            }
            if decoded.timings.is_some() {
                out.server_timings = decoded.timings;
            }
            if out.error.is_none() {
                out.error = decoded.error;
            }
            out.done |= decoded.done;
        });
    }
    parser.finish();
    let m = recorder.finish();
    assert_eq!(m.events as usize, out.events);
    assert_eq!(m.content_chunks as usize, out.content_chunks);
    assert_eq!(m.reasoning_chunks as usize, out.reasoning_chunks);
    assert_eq!(m.content_chars, out.content.chars().count() as u64);
    assert_eq!(m.usage, out.usage);
    assert_eq!(m.stream_error, out.error);
    assert_eq!(m.done, out.done);
    assert_eq!(m.timings, out.server_timings);
    assert_eq!(m.parse_error, None);
    let stamp = |event: Option<usize>| event.map(|e| chunk_of_byte[completing[e]]);
    assert_eq!(
        m.ttft_ms,
        stamp(out.first_content_event),
        "{}: ttft_ms",
        f.name
    );
    assert_eq!(
        m.ttft_any_ms,
        stamp(out.first_output_event),
        "{}: ttft_any_ms",
        f.name
    );
    out
}

#[test]
fn every_fixture_is_checked() {
    let names: Vec<String> = load_fixtures().into_iter().map(|f| f.name).collect();
    // A missing file would otherwise shrink the suite silently.
    for name in [
        "anthropic_messages",
        "custom_app_done_timings",
        "error_midstream_http200",
        "generic_fields_multiline",
        "openai_chat_basic",
        "openai_chat_bom_cr",
        "openai_chat_crlf",
        "openai_responses",
        "openrouter_keepalive_comments",
        "reasoning_then_content",
        "trailing_event_unterminated",
        "unicode_multibyte",
    ] {
        assert!(
            names.iter().any(|n| n == name),
            "fixture {name} missing; have {names:?}"
        );
    }
}

#[test]
fn fixtures_fed_whole() {
    for f in load_fixtures() {
        assert_eq!(outcome(&f, [f.bytes.as_slice()]), f.expected, "{}", f.name);
    }
}

#[test]
fn fixtures_split_at_every_byte_boundary() {
    for f in load_fixtures() {
        for cut in 0..=f.bytes.len() {
            let (a, b) = f.bytes.split_at(cut);
            assert_eq!(outcome(&f, [a, b]), f.expected, "{} cut at {cut}", f.name);
        }
    }
}

#[test]
fn fixtures_fed_one_byte_at_a_time() {
    for f in load_fixtures() {
        assert_eq!(outcome(&f, f.bytes.chunks(1)), f.expected, "{}", f.name);
    }
}

#[test]
fn unterminated_final_event_is_flagged() {
    let fixtures = load_fixtures();
    for f in &fixtures {
        let mut recorder = StreamRecorder::new(f.dialect.clone());
        recorder.on_chunk(0.0, &f.bytes);
        let unterminated = recorder.finish().unterminated;
        assert_eq!(
            unterminated,
            f.name == "trailing_event_unterminated",
            "{}",
            f.name
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fixtures_in_random_splits(cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..24)) {
        for f in load_fixtures() {
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(f.bytes.len() + 1)).collect();
            points.push(0);
            points.push(f.bytes.len());
            points.sort_unstable();
            let chunks = points.windows(2).map(|w| &f.bytes[w[0]..w[1]]);
            prop_assert_eq!(outcome(&f, chunks), f.expected, "{}", f.name);
        }
    }
}
