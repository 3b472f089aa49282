//! For `cargo xtask bench page_floor`: the smallest page Leptos makes that does something
//! (a signal, a button, a list and a conditional view), built as the page is.

use leptos::prelude::*;

fn main() {
    leptos::mount::mount_to_body(page);
}

/// Shared with `floor_page_engine`.
pub fn page() -> impl IntoView {
    let (count, set_count) = signal(0u32);
    view! {
        <button on:click=move |_| set_count.update(|n| *n += 1)>"Start"</button>
        <ul>{move || (0..count.get()).map(|i| view! { <li>{i}</li> }).collect_view()}</ul>
        <Show when=move || { count.get() > 2 } fallback=|| "few">"many"</Show>
    }
}
