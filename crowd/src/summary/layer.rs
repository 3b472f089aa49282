//! The layers a crowd summary splits the wait for the first token into: what the browser
//! spent before the request left, the server's own time to its first token, and the rest
//! (the network both ways and the stream's delivery). The collector counts a request in
//! them only when its wait split whole (`firsttoken_core::layers`: every layer a
//! measurement), so each request's layers add up to its TTFT and the layers' means add
//! up to the mean TTFT of the same requests.

use serde::{Deserialize, Serialize};

use crate::sketch::Sketch;

/// A layer of the wait for the first token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// From `fetch()` to the request sent: a DNS lookup, a connection and its TLS
    /// handshake, a CORS preflight, whichever the request waited for.
    BeforeSending,
    /// The target's own time from the request's arrival to its first token written, as
    /// it reported it.
    Server,
    /// The TTFT less the two: the network both ways and the stream's delivery.
    Network,
}

impl Layer {
    /// Every layer, in the order a request meets them; [`Layer::index`] is the position.
    pub const ALL: [Layer; 3] = [Layer::BeforeSending, Layer::Server, Layer::Network];

    /// Its position in [`Layer::ALL`] and in a [`Layers`] array.
    pub fn index(self) -> usize {
        self as usize
    }

    /// What a person reads.
    pub fn title(self) -> &'static str {
        match self {
            Layer::BeforeSending => "before sending",
            Layer::Server => "the server",
            Layer::Network => "network and delivery",
        }
    }
}

/// A sketch of each layer's times, at [`Layer::index`].
pub type Layers = [Sketch; 3];

const _: () = assert!(Layer::ALL.len() == 3 && Layer::Network as usize == 2);

/// One request's layers, in milliseconds at [`Layer::index`], added to `into`.
pub fn add(into: &mut Layers, times: [f64; 3]) {
    for (sketch, ms) in into.iter_mut().zip(times) {
        sketch.add(ms);
    }
}

/// Compact bytes of `layers`: each sketch as [`Sketch::encode`] writes it, with its
/// length; no bytes at all when every sketch is empty (most cells of a target that
/// reports nothing).
pub fn encode(layers: &Layers) -> Vec<u8> {
    if layers.iter().all(Sketch::is_empty) {
        return Vec::new();
    }
    let mut out = Vec::new();
    for sketch in layers {
        let bytes = sketch.encode();
        crate::sketch::put_varint(&mut out, bytes.len() as u64);
        out.extend_from_slice(&bytes);
    }
    out
}

/// Reads what [`encode`] wrote.
pub fn decode(bytes: &[u8]) -> Result<Layers, crate::sketch::SketchError> {
    let mut layers = Layers::default();
    if bytes.is_empty() {
        return Ok(layers);
    }
    let mut rest = bytes;
    for sketch in &mut layers {
        let len = crate::sketch::take_varint(&mut rest)?;
        let len = usize::try_from(len).map_err(|_| crate::sketch::SketchError::Truncated)?;
        let (head, tail) = rest
            .split_at_checked(len)
            .ok_or(crate::sketch::SketchError::Truncated)?;
        *sketch = Sketch::decode(head)?;
        rest = tail;
    }
    if !rest.is_empty() {
        return Err(crate::sketch::SketchError::Trailing);
    }
    Ok(layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_round_trip_through_their_bytes_and_empty_ones_take_none() {
        let mut layers = Layers::default();
        assert!(encode(&layers).is_empty());
        assert_eq!(decode(&[]), Ok(Layers::default()));
        add(&mut layers, [3.5, 420.0, 96.0]);
        add(&mut layers, [0.0, 380.0, 101.0]);
        let bytes = encode(&layers);
        assert_eq!(decode(&bytes), Ok(layers.clone()));
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
    }
}
