//! How numbers are shown.

/// Milliseconds as a person reads them: `305 ms`, `1.29 s`, `—` for nothing.
pub fn ms(value: Option<f64>) -> String {
    match value {
        None => "—".to_owned(),
        Some(v) if v < 10.0 => format!("{v:.1} ms"),
        Some(v) if v < 1000.0 => format!("{v:.0} ms"),
        Some(v) if v < 100_000.0 => format!("{:.2} s", v / 1000.0),
        Some(v) => format!("{:.0} s", v / 1000.0),
    }
}

pub use firsttoken_pages::landing::wait;

/// An error message (lower-case, no full stop, as Rust errors are) as a sentence.
pub fn sentence(message: &str) -> String {
    let mut chars = message.trim_end_matches('.').chars();
    match chars.next() {
        Some(first) => format!("{}{}.", first.to_uppercase(), chars.as_str()),
        None => String::new(),
    }
}

/// A count, or `—`.
pub fn count(value: Option<u64>) -> String {
    value.map_or_else(|| "—".to_owned(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen_test(unsupported = test)]
    fn formats() {
        assert_eq!(ms(None), "—");
        assert_eq!(ms(Some(4.26)), "4.3 ms");
        assert_eq!(ms(Some(305.4)), "305 ms");
        assert_eq!(ms(Some(1286.0)), "1.29 s");
        assert_eq!(ms(Some(250_000.0)), "250 s");
        assert_eq!(count(Some(7)), "7");
        assert_eq!(sentence("the link is damaged"), "The link is damaged.");
        assert_eq!(sentence("ends."), "Ends.");
        assert_eq!(sentence(""), "");
    }
}
