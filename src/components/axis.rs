//! What the charts share: round axis ends, and phase names and colours.

use firsttoken_core::plan::Phase;

/// A round axis maximum at or above `value`: 1, 2, 2.5 or 5 times a power of ten.
pub fn nice_ceiling(value: f64) -> f64 {
    if value <= 0.0 || !value.is_finite() {
        return 100.0;
    }
    let power = 10f64.powf(value.log10().floor());
    [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .map(|m| m * power)
        .find(|v| *v >= value)
        .unwrap_or(10.0 * power)
}

/// A phase as a person reads it.
pub fn phase_title(phase: Phase) -> &'static str {
    match phase {
        Phase::Probe => "network probes",
        Phase::Warmup => "warm-up",
        Phase::Steady => "one after another",
        Phase::Fresh => "new connections",
        Phase::Concurrency => "at the same time",
        Phase::Cold => "after idle time",
        Phase::Compare => "comparison",
    }
}

#[cfg(test)]
mod tests {
    use super::nice_ceiling;
    use wasm_bindgen_test::wasm_bindgen_test;

    #[wasm_bindgen_test(unsupported = test)]
    fn axis_maximum_is_round() {
        assert_eq!(nice_ceiling(0.0), 100.0);
        assert_eq!(nice_ceiling(306.0), 500.0);
        assert_eq!(nice_ceiling(1285.0), 2000.0);
        assert_eq!(nice_ceiling(2100.0), 2500.0);
        assert_eq!(nice_ceiling(1000.0), 1000.0);
        assert_eq!(nice_ceiling(7.0), 10.0);
    }
}
