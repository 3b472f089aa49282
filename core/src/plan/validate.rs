//! A plan's rules: [`Plan::validate`] refuses what cannot measure what it claims, and the
//! error names the field (`phases[2].levels[1]`, `targets[1].fresh_url`).

use std::collections::BTreeMap;

use firsttoken_stream::dialect::Dialect;

use crate::field::ValidationError;
use crate::plan::{
    FORBIDDEN_HEADERS, HTTP1_CONNECTIONS_PER_HOST, MAX_BODY_BYTES, MAX_HEADERS, MAX_IDLE_MS,
    MAX_LEVEL, MAX_SAMPLES, MAX_SCENARIOS, MAX_TARGETS, MAX_TIMEOUT_MS, Phase, PhasePlan, Plan,
    RecordedPlan, RunTag, Scenario, TargetPlan,
};
use crate::text::is_hidden;

impl Plan {
    /// Checks the plan makes sense; the error names the field (`phases[2].levels[1]`).
    pub fn validate(&self) -> Result<(), ValidationError> {
        let fail = |field: String, message: String| Err(ValidationError { field, message });
        if self.targets.is_empty() {
            return fail("targets".into(), "a plan needs a target".into());
        }
        if self.targets.len() > MAX_TARGETS {
            return fail("targets".into(), format!("at most {MAX_TARGETS} targets"));
        }
        for (i, target) in self.targets.iter().enumerate() {
            target
                .validate()
                .map_err(|e| e.within(&format!("targets[{i}]")))?;
        }
        let has_probe_url = self.main_target().probe_url.is_some();
        check_phases(
            &self.phases,
            self.targets.len(),
            self.multiplexed,
            Some(has_probe_url),
        )?;
        if self.main_target().fresh_url.is_none()
            && let Some(i) = self.phases.iter().position(|p| p.phase() == Phase::Fresh)
        {
            return fail(
                "targets[0].fresh_url".into(),
                format!(
                    "phases[{i}] measures new connections, which needs a fresh_url: the target's URL \
                     with {{n}} in a wildcard host name that reaches the same server \
                     (https://{{n}}.fresh.chat.example.com/v1/chat). Without one, every \
                     \"new\" request would reuse a warm connection"
                ),
            );
        }
        check_timeout(self.timeout_ms)?;
        check_stall(self.stall_timeout_ms, self.timeout_ms)?;
        match &self.run_tag {
            Some(RunTag::Header(name)) => {
                check_header_name("run_tag.header", name)?;
            }
            Some(RunTag::BodyField(field)) if field.is_empty() || field.len() > 64 => {
                return fail(
                    "run_tag.body-field".into(),
                    "must be 1–64 characters".into(),
                );
            }
            _ => {}
        }
        Ok(())
    }
}
impl RecordedPlan {
    /// Requests the plan makes, for a run with `targets` targets.
    pub fn total_requests(&self, targets: usize) -> u64 {
        self.phases.iter().map(|p| p.requests(targets)).sum()
    }

    /// The plan rules that can still be checked without URLs (a run records none).
    pub fn validate(&self, targets: usize) -> Result<(), ValidationError> {
        check_phases(&self.phases, targets, self.multiplexed, None)?;
        check_timeout(self.timeout_ms)?;
        check_stall(self.stall_timeout_ms, self.timeout_ms)
    }
}

/// Checks a phase list; the error names the field (`phases[2].levels[1]`). `probe_url` is
/// whether the main target has a probe URL, when that is known (a recorded plan drops URLs).
fn check_phases(
    phases: &[PhasePlan],
    targets: usize,
    multiplexed: bool,
    probe_url: Option<bool>,
) -> Result<(), ValidationError> {
    if phases.is_empty() {
        return Err(ValidationError {
            field: "phases".into(),
            message: "a plan needs at least one phase".into(),
        });
    }
    for (i, phase) in phases.iter().enumerate() {
        check_phase(phase, targets, multiplexed, probe_url)
            .map_err(|e| e.within(&format!("phases[{i}]")))?;
    }
    let total: u64 = phases.iter().map(|p| p.requests(targets)).sum();
    if total > MAX_SAMPLES as u64 {
        return Err(ValidationError {
            field: "phases".into(),
            message: format!("the plan makes {total} requests, at most {MAX_SAMPLES} are allowed"),
        });
    }
    Ok(())
}

fn check_timeout(timeout_ms: u32) -> Result<(), ValidationError> {
    if !(1_000..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
        return Err(ValidationError {
            field: "timeout_ms".into(),
            message: format!("must be between 1000 and {MAX_TIMEOUT_MS}, got {timeout_ms}"),
        });
    }
    Ok(())
}

fn check_stall(stall_ms: Option<u32>, timeout_ms: u32) -> Result<(), ValidationError> {
    match stall_ms {
        Some(ms) if !(1_000..=timeout_ms).contains(&ms) => Err(ValidationError {
            field: "stall_timeout_ms".into(),
            message: format!("must be between 1000 and timeout_ms ({timeout_ms}), got {ms}"),
        }),
        _ => Ok(()),
    }
}

fn check_phase(
    phase: &PhasePlan,
    targets: usize,
    multiplexed: bool,
    probe_url: Option<bool>,
) -> Result<(), ValidationError> {
    let at_least_one = |field: &str, n: u32| {
        if n == 0 {
            Err(ValidationError::new(field, "must be at least 1"))
        } else {
            Ok(())
        }
    };
    match phase {
        PhasePlan::Probe { requests } => {
            at_least_one("requests", *requests)?;
            if probe_url == Some(false) {
                return Err(ValidationError::new(
                    "",
                    "a probe phase needs targets[0].probe_url, a light GET endpoint on the target's host",
                ));
            }
        }
        PhasePlan::Warmup { requests }
        | PhasePlan::Steady { requests }
        | PhasePlan::Fresh { requests } => {
            at_least_one("requests", *requests)?;
        }
        PhasePlan::Concurrency {
            levels,
            requests_per_level,
        } => {
            at_least_one("requests_per_level", *requests_per_level)?;
            if levels.is_empty() {
                return Err(ValidationError::new(
                    "levels",
                    "list at least one concurrency level",
                ));
            }
            for (j, &k) in levels.iter().enumerate() {
                if !(1..=MAX_LEVEL).contains(&k) {
                    return Err(ValidationError::new(
                        format!("levels[{j}]"),
                        format!("must be between 1 and {MAX_LEVEL}, got {k}"),
                    ));
                }
                if k > HTTP1_CONNECTIONS_PER_HOST && !multiplexed {
                    return Err(ValidationError::new(
                        format!("levels[{j}]"),
                        format!(
                            "{k} simultaneous requests exceed the {HTTP1_CONNECTIONS_PER_HOST} connections per host \
                             a browser opens over HTTP/1.1: the rest would wait in the browser, not at the server. \
                             If the target speaks HTTP/2 or HTTP/3, set \"multiplexed\": true"
                        ),
                    ));
                }
            }
        }
        PhasePlan::Cold { idle_ms } => {
            if idle_ms.is_empty() {
                return Err(ValidationError::new(
                    "idle_ms",
                    "list at least one idle interval",
                ));
            }
            if let Some((j, ms)) = idle_ms
                .iter()
                .enumerate()
                .find(|(_, ms)| **ms > MAX_IDLE_MS)
            {
                return Err(ValidationError::new(
                    format!("idle_ms[{j}]"),
                    format!("must be at most {MAX_IDLE_MS} ms (30 minutes), got {ms}"),
                ));
            }
        }
        PhasePlan::Compare { rounds } => {
            at_least_one("rounds", *rounds)?;
            if targets < 2 {
                return Err(ValidationError::new(
                    "",
                    "a compare phase needs a second target to compare with",
                ));
            }
        }
    }
    Ok(())
}

impl TargetPlan {
    /// A target with one scenario.
    pub fn new(label: &str, url: &str, dialect: Dialect, body: &str) -> Self {
        Self {
            label: label.to_owned(),
            url: url.to_owned(),
            dialect,
            headers: BTreeMap::new(),
            scenarios: vec![Scenario {
                name: "default".to_owned(),
                body: body.to_owned(),
            }],
            timings_pointer: None,
            version: None,
            fresh_url: None,
            probe_url: None,
            demo: false,
            send_cookies: false,
        }
    }

    /// The URL of fresh-connection request number `n`.
    pub fn fresh_url_for(&self, n: u64) -> Option<String> {
        self.fresh_url
            .as_ref()
            .map(|t| t.replace("{n}", &n.to_string()))
    }

    fn validate(&self) -> Result<(), ValidationError> {
        let field = |f: &str, m: String| Err(ValidationError::new(f, m));
        if self.label.trim().is_empty()
            || self.label.chars().count() > 64
            || self.label.chars().any(|c| c.is_control() || is_hidden(c))
        {
            return field(
                "label",
                "must be 1–64 characters without control, invisible or direction-changing characters".into(),
            );
        }
        check_url("url", &self.url)?;
        if let Dialect::Custom(custom) = &self.dialect {
            custom
                .validate()
                .map_err(|e| ValidationError::new(e.field, e.message).within("dialect.custom"))?;
        }
        if self.headers.len() > MAX_HEADERS {
            return field("headers", format!("at most {MAX_HEADERS} headers"));
        }
        for (name, value) in &self.headers {
            check_header_name(&format!("headers.{name}"), name)?;
            if value.len() > 4096 || value.chars().any(|c| c.is_control() && c != '\t') {
                return field(
                    &format!("headers.{name}"),
                    "the value must be at most 4096 characters without control characters".into(),
                );
            }
        }
        if self.scenarios.is_empty() || self.scenarios.len() > MAX_SCENARIOS {
            return field(
                "scenarios",
                format!("list 1 to {MAX_SCENARIOS} request bodies"),
            );
        }
        for (i, scenario) in self.scenarios.iter().enumerate() {
            let name = &scenario.name;
            if name.is_empty() || name.chars().count() > 64 || name.chars().any(char::is_control) {
                return field(
                    &format!("scenarios[{i}].name"),
                    "must be 1–64 characters".into(),
                );
            }
            if self.scenarios[..i].iter().any(|s| &s.name == name) {
                return field(
                    &format!("scenarios[{i}].name"),
                    format!("{name:?} is used twice"),
                );
            }
            if scenario.body.len() > MAX_BODY_BYTES {
                return field(
                    &format!("scenarios[{i}].body"),
                    format!("must be at most {MAX_BODY_BYTES} bytes"),
                );
            }
            if let Err(e) = serde_json::from_str::<serde_json::Value>(&scenario.body) {
                return field(
                    &format!("scenarios[{i}].body"),
                    format!("is not valid JSON: {e}"),
                );
            }
        }
        if let Some(pointer) = &self.timings_pointer
            && !pointer.starts_with('/')
        {
            return field(
                "timings_pointer",
                format!("{pointer:?} is not a JSON pointer: it starts with /"),
            );
        }
        if let Some(version) = &self.version
            && (version.trim().is_empty()
                || version.chars().count() > 64
                || version.chars().any(|c| c.is_control() || is_hidden(c)))
        {
            return field(
                "version",
                "must be 1–64 characters without control, invisible or direction-changing characters".into(),
            );
        }
        if let Some(fresh) = &self.fresh_url {
            let host = fresh.split_once("://").map_or("", |(_, rest)| {
                rest.split(['/', '?', '#']).next().unwrap_or("")
            });
            if !host.contains("{n}") {
                return field(
                    "fresh_url",
                    "must have {n} in its host name (https://{n}.fresh.chat.example.com/v1/chat): \
                     only a new host name guarantees a new connection"
                        .into(),
                );
            }
            check_url("fresh_url", &fresh.replace("{n}", "1"))?;
        }
        if let Some(probe) = &self.probe_url {
            check_url("probe_url", probe)?;
        }
        Ok(())
    }
}

/// An absolute http(s) URL without spaces or credentials.
fn check_url(field: &str, url: &str) -> Result<(), ValidationError> {
    let fail = |message: String| ValidationError::new(field, message);
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or_else(|| {
            fail(format!(
                "{url:?} must be an absolute http:// or https:// URL"
            ))
        })?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() {
        return Err(fail(format!("{url:?} has no host")));
    }
    if authority.contains('@') {
        return Err(fail(
            "must not carry credentials (user:password@); use a header".into(),
        ));
    }
    if url.len() > 2048 || url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(fail(
            "must be at most 2048 characters without spaces".into(),
        ));
    }
    // A record keeps each target's origin: a URL whose origin cannot be written down
    // (a host with `_` or `%`, say) would make every run against it unstorable.
    if crate::url::origin_of(url).is_none() {
        return Err(fail(format!(
            "{url:?} has no origin a record can keep: its host may use only letters, digits, \
             - and . (or be an IP address), its port 1–65535"
        )));
    }
    Ok(())
}

/// A header name a page may set; `field` is where it was written.
fn check_header_name(field: &str, name: &str) -> Result<(), ValidationError> {
    let fail = |message: String| Err(ValidationError::new(field, message));
    let token = |c: char| c.is_ascii_alphanumeric() || "!#$%&'*+-.^_`|~".contains(c);
    if name.is_empty() || name.len() > 64 || !name.chars().all(token) {
        return fail(format!("{name:?} is not a header name"));
    }
    let lower = name.to_ascii_lowercase();
    if FORBIDDEN_HEADERS.contains(&lower.as_str())
        || lower.starts_with("proxy-")
        || lower.starts_with("sec-")
    {
        return fail(format!("browsers do not let a page set {name}"));
    }
    if lower == "content-type" {
        // A text/plain POST is a "simple" request that goes out without the CORS preflight
        // in which a host agrees to be called: a link must not turn requests into those.
        return fail(
            "requests are always sent as application/json; a link cannot change Content-Type"
                .into(),
        );
    }
    Ok(())
}
