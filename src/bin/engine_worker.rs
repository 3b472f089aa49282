//! The measurement engine's Web Worker (Trunk builds it with `data-type="worker"`).

fn main() {
    console_error_panic_hook::set_once();
    firsttoken::engine::worker::serve();
}
