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

use crate::field::ValidationError;
use crate::plan::Plan;
use crate::study_id::{STUDY_ID_FORM, is_study_id};

/// The format written and read.
pub const VERSION: &str = "v1";
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
                .any(|c| c.is_control() || crate::text::is_hidden(c))
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
            && crate::url::origin_of(collector).is_none()
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

    /// Reads a link's part after `#` (with or without the `#`), and checks it; a
    /// signature, if the link has one, is not checked here ([`Link::parse`]).
    pub fn from_fragment(fragment: &str) -> Result<Self, LinkError> {
        Link::parse(fragment).map(|link| link.study)
    }

    /// The URLs this browser's cookies go to with the requests: the targets that ask
    /// for them, their endpoint and, when it is on the same origin, their probe.
    pub fn cookie_urls(&self) -> Vec<&str> {
        self.plan
            .targets
            .iter()
            .filter(|t| t.send_cookies)
            .flat_map(|t| {
                let origin = crate::url::origin_of(&t.url);
                std::iter::once(t.url.as_str()).chain(
                    t.probe_url
                        .as_deref()
                        .filter(move |p| crate::url::origin_of(p) == origin),
                )
            })
            .collect()
    }

    /// Why this study may not send cookies under `prefixes` (the operator's
    /// `--cookie-target-prefix`), naming the first URL outside them; `None` when it sends
    /// none, or each URL it sends them to is under one.
    pub fn cookies_refused(&self, prefixes: &[String]) -> Option<String> {
        let outside = self
            .cookie_urls()
            .into_iter()
            .find(|url| !prefixes.iter().any(|p| cookie_prefix_allows(p, url)))?;
        Some(if prefixes.is_empty() {
            format!(
                "this site's operator allows cookies to no URL (the collector has no --cookie-target-prefix), and the link sends them to {outside}"
            )
        } else {
            format!(
                "{outside} is not under a URL this site's operator allows cookies to ({})",
                prefixes.join(", ")
            )
        })
    }
}

/// The length of a link's signature: HMAC-SHA256, 32 bytes in base64url.
pub const SIGNATURE_CHARS: usize = 43;

/// A link taken apart: the study, the text a signature covers (`v1.` and the study's
/// code) and the signature after it, if the link has one (`v1.<study>.<signature>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub study: Study,
    pub signed_text: String,
    pub signature: Option<String>,
}

impl Link {
    /// Reads a link's part after `#` (with or without the `#`), and checks its study.
    pub fn parse(fragment: &str) -> Result<Self, LinkError> {
        let fragment = fragment.trim().trim_start_matches('#');
        if fragment.is_empty() {
            return Err(LinkError::Empty);
        }
        let (version, rest) = fragment
            .split_once('.')
            .ok_or(LinkError::Damaged("no version mark"))?;
        if version != VERSION {
            return Err(LinkError::UnknownVersion(
                version.chars().take(16).collect(),
            ));
        }
        let (payload, signature) = match rest.split_once('.') {
            Some((payload, signature)) => {
                let well_formed = signature.len() == SIGNATURE_CHARS
                    && signature
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
                if !well_formed {
                    return Err(LinkError::Damaged("its signature is not whole"));
                }
                (payload, Some(signature.to_owned()))
            }
            None => (rest, None),
        };
        let study = Study::from_payload(payload)?;
        Ok(Link {
            study,
            signed_text: format!("{VERSION}.{payload}"),
            signature,
        })
    }

    /// The link's part after `#`, with its signature when it has one.
    pub fn fragment(&self) -> String {
        match &self.signature {
            Some(signature) => format!("{}.{signature}", self.signed_text),
            None => self.signed_text.clone(),
        }
    }
}

/// What the collector answers when its operator signs a study ([`STUDIES_PATH`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignedStudy {
    pub study_id: String,
    /// When the collector first signed the study (ms since 1970).
    pub signed_at_ms: u64,
    /// The link's part after `#`: `v1.<study>.<signature>`.
    pub fragment: String,
    /// The link on that server, after its origin: `/firsttoken/run#v1.…`.
    pub path: String,
}

/// Whether cookies may go to `url` under the operator's `prefix`
/// (`https://chat.example.com/api/chat`): the same scheme and host (in any case), and a
/// path that starts with the prefix's at a `/` (so `/api` allows `/api/x`, never
/// `/apiary`). A URL whose path a browser would rewrite (`..`, `.` segments, in any
/// spelling, or a backslash) is never allowed: the request would go elsewhere than the
/// text says.
pub fn cookie_prefix_allows(prefix: &str, url: &str) -> bool {
    let split = |u: &str| -> Option<(String, String)> {
        let (scheme, rest) = u.split_once("://")?;
        let (authority, path) = match rest.find(['/', '?', '#']) {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let path = path.split(['?', '#']).next().unwrap_or("/");
        Some((
            format!(
                "{}://{}",
                scheme.to_ascii_lowercase(),
                authority.to_ascii_lowercase()
            ),
            if path.is_empty() {
                "/".into()
            } else {
                path.to_owned()
            },
        ))
    };
    let (Some((prefix_origin, prefix_path)), Some((origin, path))) = (split(prefix), split(url))
    else {
        return false;
    };
    let rewritten = path.contains('\\')
        || path.split('/').any(|segment| {
            let s = segment.to_ascii_lowercase().replace("%2e", ".");
            s == "." || s == ".."
        });
    if rewritten || prefix_origin != origin {
        return false;
    }
    path == prefix_path
        || (path.starts_with(&prefix_path)
            && (prefix_path.ends_with('/') || path[prefix_path.len()..].starts_with('/')))
}

impl Study {
    /// The study in a link's code (after `v1.`).
    fn from_payload(payload: &str) -> Result<Self, LinkError> {
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
    use crate::plan::TargetPlan;
    use crate::study_id::study_id_from_random;
    use firsttoken_stream::dialect::Dialect;

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

    /// A signature rides after the study's code and is kept apart from it; a link without
    /// one (every link made before signing) still opens; a cut signature is damage.
    #[test]
    fn a_signature_is_the_links_last_part() {
        let s = study();
        let unsigned = s.to_fragment();
        let link = Link::parse(&unsigned).expect("unsigned opens");
        assert_eq!(
            (link.signature.as_deref(), link.signed_text.as_str()),
            (None, unsigned.as_str())
        );
        let signature = "A".repeat(SIGNATURE_CHARS);
        let signed = format!("{unsigned}.{signature}");
        let link = Link::parse(&format!("#{signed}")).expect("signed opens");
        assert_eq!(link.signature.as_deref(), Some(signature.as_str()));
        assert_eq!(link.signed_text, unsigned);
        assert_eq!(link.fragment(), signed);
        assert_eq!(Study::from_fragment(&signed), Ok(s));
        for cut in [
            &signed[..signed.len() - 1],
            &format!("{signed}A"),
            &format!("{unsigned}."),
        ] {
            assert_eq!(
                Link::parse(cut),
                Err(LinkError::Damaged("its signature is not whole")),
                "{cut}"
            );
        }
    }

    #[test]
    fn cookies_go_only_under_the_operators_prefixes() {
        let prefix = "https://chat.example.com/api/chat";
        for (url, allowed) in [
            ("https://chat.example.com/api/chat", true),
            ("https://CHAT.example.com/api/chat/stream?x=1", true),
            ("https://chat.example.com/api/chatty", false),
            ("https://chat.example.com/api/chat/../../settings", false),
            ("https://chat.example.com/api/chat/%2E%2e/settings", false),
            ("https://chat.example.com/api/chat/./x", false),
            ("https://chat.example.com/api/chat\\..\\settings", false),
            ("http://chat.example.com/api/chat", false),
            ("https://chat.example.com:8443/api/chat", false),
            ("https://evil.example.com/api/chat", false),
            ("https://chat.example.com/settings", false),
        ] {
            assert_eq!(cookie_prefix_allows(prefix, url), allowed, "{url}");
        }
        assert!(cookie_prefix_allows(
            "https://chat.example.com/",
            "https://chat.example.com/x"
        ));
        assert!(cookie_prefix_allows(
            "https://chat.example.com",
            "https://chat.example.com/x"
        ));
        assert!(!cookie_prefix_allows(
            "not a url",
            "https://chat.example.com/x"
        ));

        let mut s = study();
        assert_eq!(s.cookies_refused(&[]), None, "no cookies asked for");
        s.plan.targets[0].send_cookies = true;
        assert_eq!(
            s.cookies_refused(&[]).as_deref(),
            Some(
                "this site's operator allows cookies to no URL (the collector has no --cookie-target-prefix), and the link sends them to https://chat.example.com/v1/chat/completions"
            )
        );
        let allowed = vec!["https://chat.example.com/v1/".to_owned()];
        assert_eq!(s.cookies_refused(&allowed), None);
        s.plan.targets[0].probe_url = Some("https://chat.example.com/admin/ping".into());
        assert_eq!(
            s.cookies_refused(&allowed).as_deref(),
            Some(
                "https://chat.example.com/admin/ping is not under a URL this site's operator allows cookies to (https://chat.example.com/v1/)"
            )
        );
        // A probe on another origin gets no cookies, so it needs no prefix.
        s.plan.targets[0].probe_url = Some("https://probe.example.com/admin".into());
        assert_eq!(s.cookies_refused(&allowed), None);
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
