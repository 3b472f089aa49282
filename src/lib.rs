//! firsttoken, the browser app: a Leptos client-side app compiled to WebAssembly.
//!
//! [`engine`] measures (fetch, stream reader, timestamps), [`components`] and [`pages`]
//! draw what it measured, [`collector`] uploads it. The parsing, metrics, schema and
//! statistics live in `firsttoken-core`, shared with the server.

pub mod app;
pub mod browser;
pub mod collector;
pub mod components;
pub mod engine;
pub mod format;
pub mod pages;
pub mod session;
pub mod target_check;
pub mod uploads;

pub use app::App;
