//! For `cargo xtask bench page_floor`: the smallest Leptos page (`floor_page`) that is also
//! the engine's worker, one module as the beta user's page is (`firsttoken::start`).

#[path = "floor_page.rs"]
#[allow(dead_code)]
mod floor_page;

fn main() {
    firsttoken::start(floor_page::page);
}
