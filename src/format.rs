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

/// A wait someone chose, in the unit they would say it in: `500 ms`, `15 s`,
/// `2 min`, `1 min 30 s`.
pub fn wait(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    let seconds = ms as f64 / 1000.0;
    if ms < 60_000 {
        return if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{seconds:.1} s")
        };
    }
    let whole = (seconds.round()) as u64;
    let (minutes, rest) = (whole / 60, whole % 60);
    if rest == 0 {
        format!("{minutes} min")
    } else {
        format!("{minutes} min {rest} s")
    }
}

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

    #[test]
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
        assert_eq!(wait(500), "500 ms");
        assert_eq!(wait(15_000), "15 s");
        assert_eq!(wait(2_500), "2.5 s");
        assert_eq!(wait(120_000), "2 min");
        assert_eq!(wait(90_000), "1 min 30 s");
    }
}
