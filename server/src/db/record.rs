//! How a run's record is kept: its JSON, compressed with LZ4 by the collector before it
//! reaches the database, in `runs.record_lz4`. A record is about 870 bytes of JSON per
//! sample, most of it field names the samples repeat, and LZ4 takes it to a tenth or a
//! fifth (a 100-sample run: 87 KB to 9 KB with the benchmark's three inter-token gaps
//! per sample, 106 KB to 19 KB with fifty) in tens of microseconds, on the upload's own
//! task rather than in SQLite's one writer or PostgreSQL's backend.
//!
//! A run stored since then (migrations `0007_record_lz4.sql`) has `record = ''` and its
//! record in `record_lz4`: the empty string is never a record, as it is not JSON. A run
//! stored before keeps its JSON in `record`, with `record_lz4` NULL, and reads as it did.

use anyhow::Context;

/// The stored form of a record's JSON.
pub(super) fn compress(json: &str) -> Vec<u8> {
    lz4_flex::compress_prepend_size(json.as_bytes())
}

/// The JSON of a stored record: `record` as stored (empty when compressed) and
/// `record_lz4` (absent for runs stored before records were compressed).
pub(super) fn json_of(record: String, record_lz4: Option<Vec<u8>>) -> anyhow::Result<String> {
    match record_lz4 {
        Some(bytes) if record.is_empty() => {
            let json = lz4_flex::decompress_size_prepended(&bytes)
                .context("a stored record whose LZ4 does not decompress")?;
            String::from_utf8(json).context("a stored record that is not UTF-8 once decompressed")
        }
        _ => Ok(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compressed_record_reads_back_as_its_json() -> anyhow::Result<()> {
        let json = r#"{"run_id":"a","samples":[{"index":0},{"index":1},{"index":2}]}"#;
        let stored = compress(json);
        assert_ne!(stored, json.as_bytes());
        assert_eq!(json_of(String::new(), Some(stored))?, json);
        Ok(())
    }

    #[test]
    fn a_record_stored_before_compression_reads_as_it_was() -> anyhow::Result<()> {
        assert_eq!(
            json_of("{\"run_id\":\"a\"}".into(), None)?,
            "{\"run_id\":\"a\"}"
        );
        Ok(())
    }

    #[test]
    fn damaged_bytes_are_named() {
        let error = json_of(String::new(), Some(vec![200, 0, 0, 0, 1, 2, 3]))
            .err()
            .map(|e| format!("{e:#}"));
        assert!(
            error
                .as_deref()
                .is_some_and(|e| e.contains("does not decompress")),
            "{error:?}"
        );
    }
}
