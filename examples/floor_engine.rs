//! For `cargo xtask bench page_floor`: the engine's worker half alone (fetch, the stream
//! reader, the recorder, its messages), built as the page is, to measure what any page
//! that runs this engine downloads at least.

fn main() {
    firsttoken::engine::worker::serve();
}
