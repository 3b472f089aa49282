//! firsttoken, the browser app: a Leptos client-side app compiled to WebAssembly.
//!
//! [`engine`] measures (fetch, stream reader, timestamps), [`components`] and [`pages`]
//! draw what it measured, [`collector`] uploads it; [`platform`] is the browser's global
//! scope (page or worker) they all get clocks, timers and `fetch` from. The parsing, metrics, schema and
//! statistics live in `firsttoken-core`, shared with the server.

pub mod app;
pub mod browser;
pub mod collector;
pub mod components;
pub mod engine;
pub mod format;
pub mod pages;
pub mod platform;
pub mod session;
pub mod summaries;
pub mod target_check;
pub mod uploads;

// The unit tests in this crate's modules run in headless Chromium, as wasm32 (CI builds
// nothing of the app natively); `cargo test -p firsttoken --lib` still runs them natively.
#[cfg(all(test, target_family = "wasm"))]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

pub use app::{App, RunApp};

/// What each bundle's `main` does. On a page: mount `app`, in place of the landing that
/// `run.html`'s small painter (the `paint/` crate) may have drawn while this module was
/// loading; both happen in one task, so the page is never drawn with neither or both.
/// In the engine's Web Worker, which is handed the page's own compiled module (so it
/// downloads and compiles nothing; [`engine::client`]): serve the engine.
pub fn start<V: leptos::IntoView + 'static>(app: fn() -> V) {
    console_error_panic_hook::set_once();
    if let Some(window) = web_sys::window() {
        if let Some(painted) = window
            .document()
            .and_then(|d| d.get_element_by_id("painted"))
        {
            painted.remove();
        }
        leptos::mount::mount_to_body(app);
    } else {
        engine::worker::serve();
    }
}
