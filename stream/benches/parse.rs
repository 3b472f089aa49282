//! How fast the stream is read, beside `eventsource-stream` (the parser under
//! `reqwest-eventsource`): the same bytes, cut as a network cuts them, parsed into events.
//! Run by `cargo xtask bench stream`; the figures are in the book's benchmarks/stream.md.
//!
//! Three streams: an OpenAI chat answer of 2,000 tokens (one small event per token, the
//! common case), the same answer with each event's JSON padded to about 1 KiB (providers
//! that repeat ids and metadata in every chunk), and one 256 KiB event (a long tool call
//! sent at once). Each is cut two ways: one chunk per event (a stream that flushes each
//! token) and 16 KiB chunks (a proxy that buffers). What is timed for each parser is the
//! same work: every event's data, owned, counted.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use eventsource_stream::Eventsource;
use firsttoken_stream::dialect::Dialect;
use firsttoken_stream::recorder::StreamRecorder;
use firsttoken_stream::sse::SseParser;
use futures::StreamExt;

/// One `data:` event of an OpenAI chat stream carrying `word`, with `padding` bytes of
/// metadata.
fn chat_event(index: usize, padding: usize) -> String {
    format!(
        "data: {{\"id\":\"chatcmpl-{index}\",\"object\":\"chat.completion.chunk\",\"meta\":\"{}\",\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"word{index} \"}}}}]}}\n\n",
        "x".repeat(padding)
    )
}

/// A stream, as the chunks a reader is given.
struct Case {
    name: &'static str,
    chunks: Vec<Vec<u8>>,
    events: usize,
}

impl Case {
    fn bytes(&self) -> u64 {
        self.chunks.iter().map(|c| c.len() as u64).sum()
    }
}

fn cases() -> Vec<Case> {
    let answer = |padding: usize| -> Vec<String> {
        let mut events: Vec<String> = (0..2000).map(|i| chat_event(i, padding)).collect();
        events.push("data: [DONE]\n\n".to_owned());
        events
    };
    let per_event = |events: &[String]| -> Vec<Vec<u8>> {
        events.iter().map(|e| e.as_bytes().to_vec()).collect()
    };
    let in_16k = |events: &[String]| -> Vec<Vec<u8>> {
        events
            .concat()
            .into_bytes()
            .chunks(16 * 1024)
            .map(<[u8]>::to_vec)
            .collect()
    };
    let small = answer(0);
    let padded = answer(900);
    let big = vec![format!("data: {}\n\n", "y".repeat(256 * 1024))];
    vec![
        Case {
            name: "2000 tokens, a chunk per event",
            chunks: per_event(&small),
            events: 2001,
        },
        Case {
            name: "2000 tokens, 16 KiB chunks",
            chunks: in_16k(&small),
            events: 2001,
        },
        Case {
            name: "2000 x 1 KiB events, a chunk per event",
            chunks: per_event(&padded),
            events: 2001,
        },
        Case {
            name: "2000 x 1 KiB events, 16 KiB chunks",
            chunks: in_16k(&padded),
            events: 2001,
        },
        Case {
            name: "one 256 KiB event, 16 KiB chunks",
            chunks: in_16k(&big),
            events: 1,
        },
    ]
}

/// firsttoken's parser: bytes in, each event handed over as it completes.
fn firsttoken(chunks: &[Vec<u8>]) -> usize {
    let mut parser = SseParser::new();
    let mut data_bytes = 0;
    for chunk in chunks {
        parser.feed(chunk, |event| data_bytes += black_box(event.data).len());
    }
    parser.finish();
    data_bytes
}

/// eventsource-stream's, over the same chunks as an already-ready byte stream.
fn eventsource_stream(chunks: &[Vec<u8>]) -> usize {
    let bytes = futures::stream::iter(chunks.iter().map(Ok::<_, std::convert::Infallible>));
    let mut events = bytes.eventsource();
    futures::executor::block_on(async {
        let mut data_bytes = 0;
        while let Some(event) = events.next().await {
            data_bytes += black_box(event.expect("a well-formed stream").data).len();
        }
        data_bytes
    })
}

/// What the engine does with each chunk: the parser, the dialect's JSON and the timing.
fn recorder(chunks: &[Vec<u8>]) -> usize {
    let mut recorder = StreamRecorder::new(Dialect::OpenaiChat);
    for (at, chunk) in chunks.iter().enumerate() {
        recorder.on_chunk(at as f64, chunk);
    }
    recorder.finish().output_chunks as usize
}

fn parse(c: &mut Criterion) {
    for case in cases() {
        // Both parsers must read the same events before their times mean anything.
        assert_eq!(
            firsttoken(&case.chunks),
            eventsource_stream(&case.chunks),
            "{}",
            case.name
        );
        let mut group = c.benchmark_group(case.name);
        group.throughput(Throughput::Bytes(case.bytes()));
        group.bench_with_input(
            BenchmarkId::new("firsttoken-stream", case.events),
            &case.chunks,
            |b, chunks| b.iter(|| firsttoken(chunks)),
        );
        group.bench_with_input(
            BenchmarkId::new("eventsource-stream", case.events),
            &case.chunks,
            |b, chunks| b.iter(|| eventsource_stream(chunks)),
        );
        if case.events > 1 {
            group.bench_with_input(
                BenchmarkId::new(
                    "firsttoken-stream recorder (SSE, JSON, timing)",
                    case.events,
                ),
                &case.chunks,
                |b, chunks| b.iter(|| recorder(chunks)),
            );
        }
        group.finish();
    }
}

criterion_group!(benches, parse);
criterion_main!(benches);
