//! The record's rules: [`Run::validate`] names the first field that breaks one, with its
//! path (`samples[3].ttft_ms`), in the browser before an upload and in the collector
//! before anything is stored.

use std::fmt;

use crate::field::ValidationError;
use crate::plan::{MAX_SAMPLES, Phase, PhasePlan};
use crate::schema::bounds::{EFFECTIVE_TYPES, MAX_DOWNLINK_MBPS, is_protocol};
use crate::schema::{
    Client, EngineReport, MAX_CLOCK_STEP_MS, MAX_MESSAGE_CHARS, MAX_MS, MAX_TIMING_ENTRIES,
    MAX_TOKENS, NetworkReading, Run, SCHEMA_VERSION, STARTED_AT_RANGE_MS, Sample, Target, is_uuid,
};
use crate::text::is_hidden;
use crate::url::check_origin;

/// Collects the path of the field being checked.
struct Check<'a> {
    path: &'a dyn fmt::Display,
}

impl Check<'_> {
    fn fail(&self, field: &str, message: impl Into<String>) -> ValidationError {
        let path = self.path.to_string();
        ValidationError {
            field: if path.is_empty() {
                field.to_owned()
            } else {
                format!("{path}.{field}")
            },
            message: message.into(),
        }
    }

    fn time(&self, field: &str, value: f64) -> Result<(), ValidationError> {
        if !value.is_finite() {
            return Err(self.fail(field, "must be a finite number"));
        }
        if !(0.0..MAX_MS).contains(&value) {
            return Err(self.fail(
                field,
                format!("must be between 0 and {MAX_MS} ms, got {value}"),
            ));
        }
        Ok(())
    }

    fn opt_time(&self, field: &str, value: Option<f64>) -> Result<(), ValidationError> {
        value.map_or(Ok(()), |v| self.time(field, v))
    }

    /// A short human-entered or client-derived string: bounded, no control characters.
    fn text(&self, field: &str, value: &str, max_chars: usize) -> Result<(), ValidationError> {
        let chars = value.chars().count();
        if chars > max_chars {
            return Err(self.fail(
                field,
                format!("must be at most {max_chars} characters, got {chars}"),
            ));
        }
        if value.chars().any(char::is_control) {
            return Err(self.fail(field, "must not contain control characters"));
        }
        if let Some(c) = value.chars().find(|c| is_hidden(*c)) {
            return Err(self.fail(
                field,
                format!(
                    "must not contain invisible or direction-changing characters, got U+{:04X}",
                    u32::from(c)
                ),
            ));
        }
        Ok(())
    }

    fn non_empty_text(
        &self,
        field: &str,
        value: &str,
        max_chars: usize,
    ) -> Result<(), ValidationError> {
        if value.trim().is_empty() {
            return Err(self.fail(field, "must not be empty"));
        }
        self.text(field, value, max_chars)
    }
}

impl Run {
    /// Checks every rule a stored record must follow. The first broken rule is returned,
    /// naming its field.
    pub fn validate(&self) -> Result<(), ValidationError> {
        let top = Check { path: &"" };
        if self.schema_version != SCHEMA_VERSION {
            return Err(top.fail(
                "schema_version",
                format!(
                    "unsupported version {}, this collector reads version {SCHEMA_VERSION}",
                    self.schema_version
                ),
            ));
        }
        if !is_uuid(&self.run_id) {
            return Err(top.fail(
                "run_id",
                "must be a lowercase UUID like 0f8fad5b-d9cb-469f-a165-70867728950e",
            ));
        }
        let (earliest, latest) = STARTED_AT_RANGE_MS;
        if !(earliest..latest).contains(&self.started_at_ms) {
            return Err(top.fail(
                "started_at_ms",
                format!(
                    "must be Unix milliseconds between 2020 and 2100, got {}",
                    self.started_at_ms
                ),
            ));
        }
        top.non_empty_text("app_version", &self.app_version, 32)?;
        if let Some(id) = &self.study_id
            && !crate::study_id::is_study_id(id)
        {
            return Err(top.fail(
                "study_id",
                format!("must be {}", crate::study_id::STUDY_ID_FORM),
            ));
        }
        if self.targets.is_empty() || self.targets.len() > 8 {
            return Err(top.fail("targets", "a run has 1 to 8 targets"));
        }
        for (i, target) in self.targets.iter().enumerate() {
            target.validate(i)?;
        }
        self.client.validate()?;
        self.plan
            .validate(self.targets.len())
            .map_err(|e| top.fail(&format!("plan.{}", e.field), e.message))?;
        self.engine.validate()?;
        if self.samples.is_empty() {
            return Err(top.fail("samples", "a run needs at least one sample"));
        }
        let planned = self.plan.total_requests(self.targets.len());
        if self.samples.len() as u64 > planned {
            return Err(top.fail(
                "samples",
                format!(
                    "the plan makes {planned} requests, the run has {} samples",
                    self.samples.len()
                ),
            ));
        }
        self.check_samples_against_plan()?;
        let gaps = self.itl_gaps();
        if gaps > super::MAX_RUN_ITL_GAPS {
            return Err(top.fail(
                "samples",
                format!(
                    "the samples hold {gaps} inter-token gaps; a run keeps at most {} in all",
                    super::MAX_RUN_ITL_GAPS
                ),
            ));
        }
        for (i, sample) in self.samples.iter().enumerate() {
            sample.validate(i)?;
            let target = self.targets.get(sample.target as usize).ok_or_else(|| {
                Check {
                    path: &SamplePath(i),
                }
                .fail("target", format!("there is no target {}", sample.target))
            })?;
            if let Some(scenario) = &sample.scenario
                && !target.scenarios.contains(scenario)
            {
                return Err(Check {
                    path: &SamplePath(i),
                }
                .fail(
                    "scenario",
                    format!("target {} has no scenario {scenario:?}", sample.target),
                ));
            }
        }
        Ok(())
    }

    /// The samples against the run's own recorded plan: only phases the plan has, no more
    /// of a phase than it makes, each at a concurrency it asks for (1, a level, or the
    /// opening batch of a concurrency phase, which is recorded as warm-up), and only a
    /// compare request to a target other than the first. Without this one upload could
    /// claim levels and phases its plan never had, and the cells of hundreds of kinds of
    /// request that came with it kept a whole day's summaries from being folded.
    fn check_samples_against_plan(&self) -> Result<(), ValidationError> {
        let targets = self.targets.len();
        let slot = |phase: Phase| Phase::ALL.iter().position(|p| *p == phase).unwrap_or(0);
        let mut allowed = [0u64; Phase::ALL.len()];
        let (mut levels, mut openings) = (Vec::new(), vec![1]);
        for phase in &self.plan.phases {
            let requests = phase.requests(targets);
            match phase {
                PhasePlan::Concurrency { levels: ks, .. } => {
                    let opening = crate::plan::opening_batch(ks);
                    allowed[slot(Phase::Warmup)] += u64::from(opening);
                    allowed[slot(Phase::Concurrency)] += requests - u64::from(opening);
                    levels.extend_from_slice(ks);
                    openings.push(opening);
                }
                other => allowed[slot(other.phase())] += requests,
            }
        }
        let mut seen = [0u64; Phase::ALL.len()];
        for (i, sample) in self.samples.iter().enumerate() {
            let c = Check {
                path: &SamplePath(i),
            };
            let name = sample.phase.name();
            let at = slot(sample.phase);
            seen[at] += 1;
            if seen[at] > allowed[at] {
                return Err(c.fail(
                    "phase",
                    match allowed[at] {
                        0 => format!("the run's plan has no {name} requests"),
                        n => format!(
                            "the run's plan makes {n} {name} requests, and this is one more"
                        ),
                    },
                ));
            }
            let planned = match sample.phase {
                Phase::Concurrency => levels.contains(&sample.concurrency),
                Phase::Warmup => openings.contains(&sample.concurrency),
                _ => sample.concurrency == 1,
            };
            if !planned {
                return Err(c.fail(
                    "concurrency",
                    format!(
                        "the run's plan makes no {name} requests {} at once",
                        sample.concurrency
                    ),
                ));
            }
            if sample.target != 0 && sample.phase != Phase::Compare {
                return Err(c.fail(
                    "target",
                    format!("only compare requests go to another target; this is {name}"),
                ));
            }
        }
        Ok(())
    }

    /// The target being measured.
    pub fn main_target(&self) -> &Target {
        &self.targets[0]
    }

    /// The target `sample` went to (the main one if its index names none: a validated run
    /// has no such sample).
    pub fn target_of(&self, sample: &Sample) -> &Target {
        self.targets
            .get(sample.target as usize)
            .unwrap_or(self.main_target())
    }
}

/// Formats `targets[i]` only when an error needs it.
struct TargetPath(usize);

impl fmt::Display for TargetPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "targets[{}]", self.0)
    }
}

impl Target {
    fn validate(&self, position: usize) -> Result<(), ValidationError> {
        let c = Check {
            path: &TargetPath(position),
        };
        c.non_empty_text("label", &self.label, 64)?;
        if let Err(why) = check_origin(&self.origin) {
            return Err(c.fail("origin", why.to_string()));
        }
        if let Some(version) = &self.version {
            c.non_empty_text("version", version, 64)?;
        }
        if let firsttoken_stream::dialect::Dialect::Custom(custom) = &self.dialect {
            custom
                .validate()
                .map_err(|e| c.fail(&format!("dialect.custom.{}", e.field), e.message))?;
        }
        if self.scenarios.len() > 16 {
            return Err(c.fail("scenarios", "at most 16 scenarios"));
        }
        for scenario in &self.scenarios {
            c.non_empty_text("scenarios", scenario, 64)?;
        }
        Ok(())
    }
}

impl Client {
    fn validate(&self) -> Result<(), ValidationError> {
        let c = Check { path: &"client" };
        for (field, value) in [("browser", &self.browser), ("os", &self.os)] {
            if let Some(value) = value {
                c.non_empty_text(field, value, 32)?;
            }
        }
        if let Some(major) = self.browser_major
            && major > 10_000
        {
            return Err(c.fail("browser_major", format!("is not a version: {major}")));
        }
        self.at_end().validate(&c, "")?;
        if let Some(start) = &self.at_start {
            start.validate(&c, "at_start.")?;
        }
        Ok(())
    }
}

impl NetworkReading {
    /// Each field in its range; `prefix` names where the reading sits in the client.
    fn validate(&self, c: &Check<'_>, prefix: &str) -> Result<(), ValidationError> {
        if let Some(effective) = &self.effective_type
            && !EFFECTIVE_TYPES.contains(&effective.as_str())
        {
            return Err(c.fail(
                &format!("{prefix}effective_type"),
                "must be one of slow-2g, 2g, 3g, 4g (the Network Information API's values)",
            ));
        }
        c.opt_time(&format!("{prefix}rtt_ms"), self.rtt_ms)?;
        if let Some(downlink) = self.downlink_mbps
            && !(downlink.is_finite() && (0.0..=MAX_DOWNLINK_MBPS).contains(&downlink))
        {
            return Err(c.fail(
                &format!("{prefix}downlink_mbps"),
                "must be between 0 and 100000",
            ));
        }
        Ok(())
    }
}

impl EngineReport {
    fn validate(&self) -> Result<(), ValidationError> {
        let c = Check { path: &"engine" };
        c.time("timer_lateness_p99_ms", self.timer_lateness_p99_ms)?;
        c.time("timer_lateness_max_ms", self.timer_lateness_max_ms)?;
        c.time("hidden_ms", self.hidden_ms)?;
        if let Some(step) = self.clock_step_ms
            && !(step.is_finite() && step > 0.0 && step <= MAX_CLOCK_STEP_MS)
        {
            return Err(c.fail(
                "clock_step_ms",
                format!("must be above 0 and at most {MAX_CLOCK_STEP_MS}"),
            ));
        }
        if !self.unavailable.windows(2).all(|w| w[0] < w[1]) {
            return Err(c.fail(
                "unavailable",
                "must list each feature at most once, in the schema's order",
            ));
        }
        Ok(())
    }
}

/// Formats `samples[i]` only when an error needs it.
struct SamplePath(usize);

impl fmt::Display for SamplePath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "samples[{}]", self.0)
    }
}

impl Sample {
    /// Checks one sample that sits at `position` in its run.
    pub(crate) fn validate(&self, position: usize) -> Result<(), ValidationError> {
        let c = Check {
            path: &SamplePath(position),
        };
        if self.index as usize != position {
            return Err(c.fail(
                "index",
                format!(
                    "must equal the sample's position {position}, got {}",
                    self.index
                ),
            ));
        }
        if self.concurrency == 0 || self.concurrency > 1000 {
            return Err(c.fail("concurrency", "must be between 1 and 1000"));
        }
        c.time("start_ms", self.start_ms)?;
        if self.status != 0 && !(100..=599).contains(&self.status) {
            return Err(c.fail(
                "status",
                format!(
                    "must be 0 (no response) or an HTTP status 100–599, got {}",
                    self.status
                ),
            ));
        }
        if self.status == 0 && self.error.is_none() {
            return Err(c.fail(
                "error",
                "a sample without a response (status 0) needs an error class",
            ));
        }
        if let Some(message) = &self.error_message {
            c.text("error_message", message, MAX_MESSAGE_CHARS)?;
        }
        // The times are readings of one clock taken in this order, so they can only grow.
        let ordered = [
            ("headers_ms", self.headers_ms),
            ("ttfb_ms", self.ttfb_ms),
            ("ttft_any_ms", self.ttft_any_ms),
            ("ttft_ms", self.ttft_ms),
            ("e2e_ms", self.e2e_ms),
        ];
        let mut previous: Option<(&str, f64)> = None;
        for (field, value) in ordered {
            c.opt_time(field, value)?;
            if let Some(value) = value {
                if let Some((before, earlier)) = previous
                    && value < earlier
                {
                    return Err(c.fail(
                        field,
                        format!("{value} ms is earlier than {before} ({earlier} ms)"),
                    ));
                }
                previous = Some((field, value));
            }
        }
        c.opt_time("last_token_ms", self.last_token_ms)?;
        if let (Some(last), Some(first)) = (self.last_token_ms, self.ttft_any_ms)
            && last < first
        {
            return Err(c.fail("last_token_ms", "is earlier than ttft_any_ms"));
        }
        if let (Some(last), Some(end)) = (self.last_token_ms, self.e2e_ms)
            && last > end
        {
            return Err(c.fail("last_token_ms", "is later than e2e_ms"));
        }
        if self.itl_ms.len() > firsttoken_stream::recorder::MAX_ITL_GAPS {
            return Err(c.fail(
                "itl_ms",
                format!("at most {} gaps", firsttoken_stream::recorder::MAX_ITL_GAPS),
            ));
        }
        for gap in &self.itl_ms {
            c.time("itl_ms", *gap)?;
        }
        if let Some(scenario) = &self.scenario {
            c.non_empty_text("scenario", scenario, 64)?;
        }
        if self.batch.is_some_and(|b| b as usize >= MAX_SAMPLES) {
            return Err(c.fail("batch", format!("must be below {MAX_SAMPLES}")));
        }
        c.opt_time("idle_spent_ms", self.idle_spent_ms)?;
        c.opt_time("idle_timer_late_ms", self.idle_timer_late_ms)?;
        c.opt_time("retry_wait_ms", self.retry_wait_ms)?;
        if self.idle_ms.is_some_and(|ms| ms > crate::plan::MAX_IDLE_MS) {
            return Err(c.fail(
                "idle_ms",
                format!("must be at most {}", crate::plan::MAX_IDLE_MS),
            ));
        }
        if let Some(conn) = &self.conn {
            if let Some(protocol) = &conn.protocol
                && !is_protocol(protocol)
            {
                return Err(c.fail(
                    "conn.protocol",
                    format!("{protocol:?} is not a protocol name (h2, http/1.1, h3)"),
                ));
            }
            c.opt_time("conn.dns_ms", conn.dns_ms)?;
            c.opt_time("conn.connect_ms", conn.connect_ms)?;
            c.opt_time("conn.tls_ms", conn.tls_ms)?;
            c.opt_time("conn.sent_ms", conn.sent_ms)?;
            c.opt_time("conn.wait_ms", conn.wait_ms)?;
        }
        if self.server_timing.len() > MAX_TIMING_ENTRIES {
            return Err(c.fail(
                "server_timing",
                format!("at most {MAX_TIMING_ENTRIES} entries"),
            ));
        }
        for entry in &self.server_timing {
            c.non_empty_text("server_timing.name", &entry.name, 64)?;
            c.time("server_timing.duration_ms", entry.duration_ms)?;
            if let Some(description) = &entry.description {
                c.text("server_timing.description", description, 128)?;
            }
        }
        if let Some(timings) = &self.stream_timings {
            if timings.len() > MAX_TIMING_ENTRIES {
                return Err(c.fail(
                    "stream_timings",
                    format!("at most {MAX_TIMING_ENTRIES} entries"),
                ));
            }
            for (name, ms) in timings {
                c.non_empty_text("stream_timings", name, 64)?;
                c.time(&format!("stream_timings.{name}"), *ms)?;
            }
        }
        if let Some(usage) = &self.usage {
            for (field, value) in [
                ("usage.input_tokens", usage.input_tokens),
                ("usage.output_tokens", usage.output_tokens),
                ("usage.reasoning_tokens", usage.reasoning_tokens),
            ] {
                if value.is_some_and(|v| v > MAX_TOKENS) {
                    return Err(c.fail(field, format!("must be at most {MAX_TOKENS}")));
                }
            }
        }
        Ok(())
    }
}
