//! Share links: a study (a plan, where results go, what the operator calls it) packed into
//! the part of a URL after `#`, which browsers never send to a server.
//!
//! The format is `v1.` followed by the study's JSON, deflated (RFC 1951) and base64url
//! encoded without padding. The version comes first so that a link made by a later
//! firsttoken says so instead of failing obscurely. Opening a link validates everything in
//! it, and every failure is a sentence a beta user can pass on to the operator.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::plan::Plan;
use crate::schema::ValidationError;

/// The format written and read.
pub const VERSION: &str = "v1";
/// Where a firsttoken server takes runs, after its base path; a study without a collector
/// uploads to the one that served its page.
pub const RUNS_PATH: &str = "/api/v1/runs";
/// The longest link payload accepted: far beyond any real plan, short of what breaks
/// messaging apps and browsers' address bars.
pub const MAX_PAYLOAD_CHARS: usize = 16_000;
/// The most a payload may inflate to.
const MAX_JSON_BYTES: usize = 256 * 1024;

/// What a share link carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Study {
    /// What the operator calls this measurement ("Chat latency, December beta").
    pub title: String,
    pub plan: Plan,
    /// The collector's runs endpoint (`https://collect.example.com/api/v1/runs`); `None`
    /// means the app's own server.
    #[serde(default)]
    pub collector: Option<String>,
    /// The operator confirmed that the link carries a token, and that it is one made for
    /// this benchmark only. A link with a secret-looking header and without this is
    /// refused, and a page opened from a link with it tells the user.
    #[serde(default)]
    pub carries_token: bool,
    /// A random name for this link ([`STUDY_ID_CHARS`] characters of base32, 80 random
    /// bits), made when the link is: every run from the link carries it, and the Results
    /// page can show one link's runs alone. `None` in links made before there were ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub study_id: Option<String>,
}

/// How long a study id is: 16 characters of base32, 80 bits.
pub const STUDY_ID_CHARS: usize = 16;
/// What a study id looks like, for error messages.
pub const STUDY_ID_FORM: &str = "16 characters, lowercase a–z and 2–7";
/// RFC 4648's base32 alphabet, lowercase.
const BASE32: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";

/// A study id from 10 random bytes (the caller draws them from the platform's
/// cryptographic generator): 80 bits in 16 base32 characters, so two links never meet.
pub fn study_id_from_random(random: [u8; 10]) -> String {
    let bits = random
        .iter()
        .fold(0u128, |acc, &byte| (acc << 8) | u128::from(byte));
    (0..STUDY_ID_CHARS)
        .rev()
        .map(|i| char::from(BASE32[((bits >> (5 * i)) & 31) as usize]))
        .collect()
}

/// Whether `id` has a study id's form.
pub fn is_study_id(id: &str) -> bool {
    id.len() == STUDY_ID_CHARS && id.bytes().all(|b| BASE32.contains(&b))
}

/// Why a link cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the link has no study in it: it should end with #v1. and a long code")]
    Empty,
    /// Made by another firsttoken version.
    #[error(
        "the link was made for firsttoken format {0:?}, and this page reads {VERSION}: ask for a new link"
    )]
    UnknownVersion(String),
    /// The text after the version is damaged (often: cut off when copied).
    #[error("the link is damaged ({0}); it may have been cut off when it was copied")]
    Damaged(&'static str),
    #[error("the link is too long ({0} characters, at most {MAX_PAYLOAD_CHARS})")]
    TooLong(usize),
    /// The contents are not a study.
    #[error("the link does not describe a study: {0}")]
    NotAStudy(String),
    /// A study, but not a runnable one.
    #[error("the study in the link is not valid: {0}")]
    Invalid(ValidationError),
}

/// Header names that usually carry secrets.
fn secret_looking(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name == "authorization"
        || ["key", "token", "secret", "password", "session"]
            .iter()
            .any(|w| name.contains(w))
}

impl Study {
    /// The headers that look like secrets, as `target label: header name`.
    pub fn secret_headers(&self) -> Vec<String> {
        self.plan
            .targets
            .iter()
            .flat_map(|t| {
                t.headers
                    .keys()
                    .filter(|h| secret_looking(h))
                    .map(move |h| format!("{}: {h}", t.label))
            })
            .collect()
    }

    /// Checks the study can be run; the error names the field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let fail = |field: &str, message: String| {
            Err(ValidationError {
                field: field.to_owned(),
                message,
            })
        };
        let title_chars = self.title.trim().chars().count();
        if title_chars == 0
            || title_chars > 120
            || self
                .title
                .chars()
                .any(|c| c.is_control() || crate::schema::is_hidden(c))
        {
            return fail(
                "title",
                "must be 1–120 characters without control characters".into(),
            );
        }
        self.plan.validate().map_err(|e| ValidationError {
            field: format!("plan.{}", e.field),
            message: e.message,
        })?;
        if let Some(collector) = &self.collector
            && crate::schema::origin_of(collector).is_none()
        {
            return fail(
                "collector",
                format!("{collector:?} must be an absolute http:// or https:// URL"),
            );
        }
        if let Some(id) = &self.study_id
            && !is_study_id(id)
        {
            return fail("study_id", format!("{id:?} must be {STUDY_ID_FORM}"));
        }
        let secrets = self.secret_headers();
        if !secrets.is_empty() && !self.carries_token {
            return fail(
                "carries_token",
                format!(
                    "headers that look like secrets ({}) would travel in the link: confirm they are a benchmark-only token",
                    secrets.join(", ")
                ),
            );
        }
        Ok(())
    }

    /// The link's part after `#`.
    pub fn to_fragment(&self) -> String {
        // Serializing owned, validated data cannot fail.
        let json = serde_json::to_vec(self).unwrap_or_default();
        let deflated = miniz_oxide::deflate::compress_to_vec(&json, 9);
        format!("{VERSION}.{}", URL_SAFE_NO_PAD.encode(deflated))
    }

    /// Reads a link's part after `#` (with or without the `#`), and checks it.
    pub fn from_fragment(fragment: &str) -> Result<Self, LinkError> {
        let fragment = fragment.trim().trim_start_matches('#');
        if fragment.is_empty() {
            return Err(LinkError::Empty);
        }
        let (version, payload) = fragment
            .split_once('.')
            .ok_or(LinkError::Damaged("no version mark"))?;
        if version != VERSION {
            return Err(LinkError::UnknownVersion(
                version.chars().take(16).collect(),
            ));
        }
        if payload.len() > MAX_PAYLOAD_CHARS {
            return Err(LinkError::TooLong(payload.len()));
        }
        let deflated = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| LinkError::Damaged("it holds characters a link code never has"))?;
        let json = miniz_oxide::inflate::decompress_to_vec_with_limit(&deflated, MAX_JSON_BYTES)
            .map_err(|_| LinkError::Damaged("its code does not unpack"))?;
        let study: Study =
            serde_json::from_slice(&json).map_err(|e| LinkError::NotAStudy(e.to_string()))?;
        study.validate().map_err(LinkError::Invalid)?;
        Ok(study)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::plan::TargetPlan;

    fn study() -> Study {
        let target = TargetPlan::new(
            "prod chat",
            "https://chat.example.com/v1/chat/completions",
            Dialect::OpenaiChat,
            r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"How are my savings?"}]}"#,
        );
        Study {
            title: "Chat latency, December beta".into(),
            plan: Plan::quick(target),
            collector: Some("https://collect.example.com/api/v1/runs".into()),
            carries_token: false,
            study_id: Some(study_id_from_random([7; 10])),
        }
    }

    #[test]
    fn a_study_id_is_80_random_bits_in_base32() {
        // Python: base64.b32encode(bytes(10)).lower() and of bytes([255] * 10), and of
        // bytes(range(1, 11)) → "aebagbafaydqqcik".
        assert_eq!(study_id_from_random([0; 10]), "aaaaaaaaaaaaaaaa");
        assert_eq!(study_id_from_random([255; 10]), "7777777777777777");
        let counting: [u8; 10] = std::array::from_fn(|i| i as u8 + 1);
        assert_eq!(study_id_from_random(counting), "aebagbafaydqqcik");
        assert!(is_study_id("aebagbafaydqqcik"));
        for bad in [
            "",
            "aebagbafaydqqci",
            "aebagbafaydqqcikk",
            "AEBAGBAFAYDQQCIK",
            "aebagbafaydqqci1",
        ] {
            assert!(!is_study_id(bad), "{bad}");
        }
        let mut s = study();
        s.study_id = Some("not an id".into());
        let e = s.validate().expect_err("a bad id");
        assert_eq!(e.field, "study_id");
        assert!(e.message.contains("16 characters"), "{e}");
        // A link made before ids still opens, and says nothing of one.
        s.study_id = None;
        assert_eq!(Study::from_fragment(&s.to_fragment()), Ok(s.clone()));
        assert!(
            !serde_json::to_string(&s)
                .expect("json")
                .contains("study_id")
        );
    }

    #[test]
    fn a_study_survives_its_link_and_the_link_is_compact() {
        let s = study();
        let fragment = s.to_fragment();
        assert!(fragment.starts_with("v1."));
        assert!(
            fragment
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
            "{fragment}"
        );
        assert_eq!(Study::from_fragment(&format!("#{fragment}")), Ok(s.clone()));
        let json = serde_json::to_string(&s).expect("json");
        assert!(
            fragment.len() < json.len(),
            "{} ≥ {}",
            fragment.len(),
            json.len()
        );
    }

    #[test]
    fn broken_links_say_what_is_wrong() {
        let fragment = study().to_fragment();
        let err = |f: &str| Study::from_fragment(f).expect_err("refused");
        assert_eq!(err(""), LinkError::Empty);
        assert_eq!(err("#"), LinkError::Empty);
        assert!(
            matches!(err(&fragment.replacen("v1.", "v9.", 1)), LinkError::UnknownVersion(v) if v == "v9")
        );
        assert!(
            matches!(err(&fragment[..fragment.len() / 2]), LinkError::Damaged(_)),
            "a link cut in half"
        );
        assert!(matches!(err("v1.!!!"), LinkError::Damaged(_)));
        assert!(matches!(err("nodot"), LinkError::Damaged(_)));
        let not_a_study = format!(
            "v1.{}",
            URL_SAFE_NO_PAD.encode(miniz_oxide::deflate::compress_to_vec(b"{\"x\":1}", 9))
        );
        assert!(matches!(err(&not_a_study), LinkError::NotAStudy(_)));
        let mut bad = study();
        bad.plan.phases.clear();
        assert!(
            matches!(err(&bad.to_fragment()), LinkError::Invalid(e) if e.field == "plan.phases")
        );
        let message = err(&fragment[..40]).to_string();
        assert!(message.contains("cut off"), "{message}");
    }

    #[test]
    fn a_secret_needs_the_operators_confirmation() {
        let mut s = study();
        s.plan.targets[0]
            .headers
            .insert("Authorization".into(), "Bearer bench-only".into());
        let e = s.validate().expect_err("unconfirmed token");
        assert_eq!(e.field, "carries_token");
        assert!(e.message.contains("prod chat: Authorization"), "{e}");
        s.carries_token = true;
        assert_eq!(s.validate(), Ok(()));
        assert_eq!(
            s.secret_headers(),
            vec!["prod chat: Authorization".to_owned()]
        );
        s.plan.targets[0].headers.clear();
        s.plan.targets[0]
            .headers
            .insert("X-Api-Key".into(), "k".into());
        s.carries_token = false;
        assert!(s.validate().is_err());
    }

    #[test]
    fn a_huge_payload_is_refused_before_unpacking() {
        let huge = format!("v1.{}", "A".repeat(MAX_PAYLOAD_CHARS + 1));
        assert!(matches!(
            Study::from_fragment(&huge),
            Err(LinkError::TooLong(_))
        ));
    }
}
