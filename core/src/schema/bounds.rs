//! The rules of single values that both cleaning (which drops what breaks them and counts
//! it) and validation (which refuses it and names the field) apply.

use super::MAX_MS;

/// Whether `value` is a time a record can hold.
pub(super) fn storable_time(value: f64) -> bool {
    value.is_finite() && (0.0..MAX_MS).contains(&value)
}

/// What the Network Information API calls its effective connection types.
pub(super) const EFFECTIVE_TYPES: [&str; 4] = ["slow-2g", "2g", "3g", "4g"];
pub(super) const MAX_DOWNLINK_MBPS: f64 = 100_000.0;

/// `h2`, `http/1.1`, `h3`: what `nextHopProtocol` says.
pub(super) fn is_protocol(protocol: &str) -> bool {
    !protocol.is_empty()
        && protocol.len() <= 16
        && protocol
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/.-".contains(&b))
}
