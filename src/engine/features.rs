//! What of the web platform the engine reads, and whether this browser has it. Where a
//! browser lacks something, the fields that depend on it are left empty and the record
//! says why ([`Unavailable`]), so an empty field is never read as "the server sent none".

use firsttoken_core::schema::Unavailable;
use js_sys::Reflect;
use wasm_bindgen::JsValue;

/// Whether the global `interface`'s prototype has `property` (`"nextHopProtocol"` on
/// `PerformanceResourceTiming`): a feature test that needs no request.
fn prototype_has(interface: &str, property: &str) -> bool {
    Reflect::get(&js_sys::global(), &interface.into())
        .ok()
        .filter(|i| i.is_function())
        .and_then(|i| Reflect::get(&i, &"prototype".into()).ok())
        .and_then(|p| Reflect::has(&p, &property.into()).ok())
        .unwrap_or(false)
}

/// What the engine reads of Resource Timing and this browser does not give: a property
/// it lacks, or (for the protocol) one it has and left empty on an entry whose details
/// the target allowed (`Timing-Allow-Origin`): `protocol_unnamed`, some sample's
/// connection Resource Timing described (`reused` known) without a protocol.
pub fn resource_timing_unavailable(protocol_unnamed: bool) -> Vec<Unavailable> {
    let mut missing: Vec<Unavailable> = [
        ("nextHopProtocol", Unavailable::NextHopProtocol),
        ("serverTiming", Unavailable::ServerTiming),
    ]
    .into_iter()
    .filter(|(property, _)| !prototype_has("PerformanceResourceTiming", property))
    .map(|(_, missing)| missing)
    .collect();
    if protocol_unnamed {
        merge(&mut missing, [Unavailable::NextHopProtocol]);
    }
    missing
}

/// `crossOriginIsolated`: the page was served with COOP and COEP from a secure origin, so
/// the browser gives its finest clock (measured: 5 µs in Chromium 156, 20 µs in Firefox
/// 153 and WebKitGTK 2.50; otherwise 100 µs and 1 ms). `None` where the browser has no such property.
pub fn cross_origin_isolated() -> Option<bool> {
    Reflect::get(&js_sys::global(), &JsValue::from_str("crossOriginIsolated"))
        .ok()
        .and_then(|v| v.as_bool())
}

/// Adds `more` to `list`, keeping it in the schema's order with each feature once.
pub fn merge(list: &mut Vec<Unavailable>, more: impl IntoIterator<Item = Unavailable>) {
    list.extend(more);
    list.sort_unstable();
    list.dedup();
}
