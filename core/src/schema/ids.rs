//! Identifiers and origins: run ids, the origin of a URL, and a finished run's parts put
//! together as its record.

use crate::schema::{Client, EngineReport, Run, SCHEMA_VERSION, Sample, Target};
use crate::url::origin_of;

/// What a finished run knows, put together as its record. `demo[i]` says whether target
/// `i` answered as the built-in demo.
#[derive(Debug)]
pub struct RecordParts<'a> {
    pub run_id: String,
    pub started_at_ms: u64,
    pub app_version: &'a str,
    pub study_id: Option<String>,
    pub plan: &'a crate::plan::Plan,
    pub client: Client,
    pub engine: EngineReport,
    pub demo: &'a [bool],
    pub samples: Vec<Sample>,
}

impl RecordParts<'_> {
    /// The record, with each target reduced to what may be kept: label, origin, version,
    /// dialect, scenario names. Validate it before offering an upload.
    pub fn into_run(self) -> Run {
        let targets = self
            .plan
            .targets
            .iter()
            .enumerate()
            .map(|(i, t)| Target {
                label: t.label.clone(),
                origin: origin_of(&t.url).unwrap_or_else(|| t.url.clone()),
                version: t.version.clone(),
                dialect: t.dialect.clone(),
                demo: t.demo || self.demo.get(i).copied().unwrap_or(false),
                scenarios: t.scenarios.iter().map(|s| s.name.clone()).collect(),
            })
            .collect();
        Run {
            schema_version: SCHEMA_VERSION,
            run_id: self.run_id,
            started_at_ms: self.started_at_ms,
            app_version: self.app_version.to_owned(),
            study_id: self.study_id,
            targets,
            client: self.client,
            plan: self.plan.recorded(),
            engine: self.engine,
            samples: self.samples,
        }
    }
}

/// A run id (UUID version 4) from 16 random bytes. Browsers give random bytes everywhere
/// (`crypto.getRandomValues`), but `crypto.randomUUID` only on HTTPS pages.
pub fn run_id_from_random(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 9562 variant
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    )
}

/// Whether `s` has a run id's form: `8-4-4-4-12` lowercase hex digits.
pub fn is_uuid(s: &str) -> bool {
    let groups: Vec<&str> = s.split('-').collect();
    groups.len() == 5
        && groups.iter().zip([8, 4, 4, 4, 12]).all(|(g, len)| {
            g.len() == len && g.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        })
}
