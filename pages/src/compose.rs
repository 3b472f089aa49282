//! The operator's form, without the page: its values, the study they describe
//! ([`Form::build`]) and the error that names the form field at fault. The compose page
//! only reads its inputs into a [`Form`] and shows what comes back.

use std::collections::BTreeMap;

use firsttoken_core::api::RUNS_PATH;
use firsttoken_core::plan::{PhasePlan, Plan, RunTag, TargetPlan};
use firsttoken_core::share::Study;
use firsttoken_core::url::origin_of;
use firsttoken_stream::dialect::Dialect;

use crate::page::Page;
use crate::presets::{KeyHeader, Preset};

/// The protocols the form offers (a study's JSON can describe any other).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Quick,
    Session,
    Steady,
}

impl Protocol {
    pub const ALL: [Protocol; 3] = [Protocol::Quick, Protocol::Session, Protocol::Steady];

    pub fn name(self) -> &'static str {
        match self {
            Protocol::Quick => "quick",
            Protocol::Session => "session",
            Protocol::Steady => "steady",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Protocol::Quick => "Quick: every phase, about a minute",
            Protocol::Session => "Session: the full protocol, about 20 minutes",
            Protocol::Steady => "Only requests one after another",
        }
    }

    /// What the protocol leaves out for want of a fresh-connection URL, in a sentence;
    /// `None` when nothing is.
    pub fn left_out(self, fresh_url: &str) -> Option<&'static str> {
        (matches!(self, Protocol::Quick | Protocol::Session) && fresh_url.trim().is_empty()).then_some(
            "Without a fresh-connection URL this protocol leaves out the requests on new connections: there is no way to force a new connection to the same host name.",
        )
    }
}

/// What is wrong with the form: the field, as the form labels it, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct FormError {
    pub field: &'static str,
    pub message: String,
}

impl FormError {
    fn new(field: &'static str, message: impl Into<String>) -> Self {
        FormError {
            field,
            message: message.into(),
        }
    }
}

/// The form's values, as typed.
#[derive(Debug, Clone)]
pub struct Form {
    pub title: String,
    pub url: String,
    pub fresh_url: String,
    pub label: String,
    pub version: String,
    pub dialect: Dialect,
    pub body: String,
    pub protocol: Protocol,
    /// How many requests "one after another" makes.
    pub requests: String,
    /// Extra request headers, one `Name: value` a line.
    pub headers: String,
    /// Where the token goes (the chosen preset's API wants it there).
    pub key_header: KeyHeader,
    pub token: String,
    pub token_is_for_benchmark: bool,
    /// Send this browser's cookies to the target (its signed-in session): only for a
    /// target on the page's own origin.
    pub send_cookies: bool,
    pub compare_url: String,
    pub compare_label: String,
    /// The preset the compared endpoint speaks; `None`: the target's format, body and
    /// headers.
    pub compare_preset: Option<&'static Preset>,
    pub compare_key: String,
    pub collector: String,
    pub run_tag_header: String,
}

impl Form {
    /// The study the form describes, named `study_id`, or the field that is wrong.
    pub fn build(&self, page: Page, study_id: String) -> Result<Study, FormError> {
        serde_json::from_str::<serde_json::Value>(&self.body)
            .map_err(|e| FormError::new("Request body", format!("not valid JSON: {e}")))?;
        let mut main = target(
            page,
            "Target URL",
            &self.label,
            &self.url,
            &self.dialect,
            &self.body,
        )?;
        if !self.version.trim().is_empty() {
            main.version = Some(self.version.trim().to_owned());
        }
        main.fresh_url = Some(self.fresh_url.trim().to_owned()).filter(|f| !f.is_empty());
        main.headers.extend(parse_headers(&self.headers)?);
        if !self.token.trim().is_empty() {
            let (name, value) = self.key_header.header(self.token.trim());
            main.headers.insert(name, value);
        }
        if self.send_cookies {
            if origin_of(&main.url).as_deref() != Some(page.origin) {
                return Err(FormError::new(
                    "Send cookies",
                    format!(
                        "only a target on this page's origin ({}) can get this browser's cookies",
                        page.origin
                    ),
                ));
            }
            main.send_cookies = true;
        }
        let compare = self.compare(page)?;
        let mut plan = match self.protocol {
            Protocol::Quick => Plan::quick(main),
            Protocol::Session => Plan::session(main, compare.clone().into_iter().collect()),
            Protocol::Steady => {
                let n = self
                    .requests
                    .trim()
                    .parse()
                    .ok()
                    .filter(|n| (1..=1000).contains(n))
                    .ok_or_else(|| {
                        FormError::new("Requests", "enter a whole number from 1 to 1000")
                    })?;
                Plan::steady(main, n)
            }
        };
        if let Some(compare) = compare
            && self.protocol != Protocol::Session
        {
            plan.targets.push(compare);
            plan.phases.push(PhasePlan::Compare { rounds: 5 });
        }
        if !self.run_tag_header.trim().is_empty() {
            plan.run_tag = Some(RunTag::Header(self.run_tag_header.trim().to_owned()));
        }
        let study = Study {
            title: self.title.trim().to_owned(),
            plan,
            collector: (self.collector.trim() != page.own_collector())
                .then(|| self.collector.trim().to_owned()),
            carries_token: self.token_is_for_benchmark,
            study_id: Some(study_id),
        };
        study.validate().map_err(|e| {
            if e.field.ends_with("fresh_url") {
                FormError::new("Fresh-connection URL", e.message)
            } else {
                FormError::new("The study", format!("not valid: {e}"))
            }
        })?;
        Ok(study)
    }

    /// The endpoint to compare with, when one is named.
    fn compare(&self, page: Page) -> Result<Option<TargetPlan>, FormError> {
        if self.compare_url.trim().is_empty() {
            return Ok(None);
        }
        let field = "Compare with";
        let target = match self.compare_preset {
            Some(preset) => {
                let label = if self.compare_label.trim().is_empty() {
                    preset.key
                } else {
                    &self.compare_label
                };
                let dialect = preset.dialect.dialect();
                let mut t = target(page, field, label, &self.compare_url, &dialect, preset.body)?;
                t.headers = preset.headers(&self.compare_key);
                t
            }
            None => target(
                page,
                field,
                &self.compare_label,
                &self.compare_url,
                &self.dialect,
                &self.body,
            )?,
        };
        Ok(Some(target))
    }
}

/// One target of the form, labelled by its host when `label` is blank; `field` names the
/// URL's field in errors.
fn target(
    page: Page,
    field: &'static str,
    label: &str,
    url: &str,
    dialect: &Dialect,
    body: &str,
) -> Result<TargetPlan, FormError> {
    let url = url.trim();
    let origin = origin(field, url)?;
    let label = if label.trim().is_empty() {
        origin.split("://").nth(1).unwrap_or(&origin).to_owned()
    } else {
        label.trim().to_owned()
    };
    let mut t = TargetPlan::new(&label, url, dialect.clone(), body);
    if origin == page.origin {
        // This server: its ping endpoint is the probe, and the demo reports its timing
        // breakdown at /server_timings.
        t.probe_url = Some(format!("{}/api/v1/ping", page.app_root()));
        t.timings_pointer = Some("/server_timings".into());
    }
    Ok(t)
}

/// The origin of an absolute http(s) URL (`https://chat.example.com`), or why it has
/// none; `field` names the URL's field.
fn origin(field: &'static str, url: &str) -> Result<String, FormError> {
    let Some((scheme, _)) = url.split_once("://") else {
        return Err(FormError::new(
            field,
            format!("{url:?} is not an absolute URL"),
        ));
    };
    if !scheme.eq_ignore_ascii_case("http") && !scheme.eq_ignore_ascii_case("https") {
        return Err(FormError::new(
            field,
            format!("the URL must use http or https, not {scheme}"),
        ));
    }
    origin_of(url).ok_or_else(|| {
        FormError::new(
            field,
            format!(
                "{url:?} has no origin a record can keep: its host may use only letters, \
                 digits, - and . (or be an IP address), its port 1–65535"
            ),
        )
    })
}

/// Request headers written one `Name: value` a line (blank lines skipped), or which line
/// is not one.
pub fn parse_headers(text: &str) -> Result<BTreeMap<String, String>, FormError> {
    let mut headers = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match line.split_once(':') {
            Some((name, value)) if !name.trim().is_empty() && !name.trim().contains(' ') => {
                headers.insert(name.trim().to_owned(), value.trim().to_owned());
            }
            _ => {
                return Err(FormError::new(
                    "Request headers",
                    format!("line {} is not Name: value", i + 1),
                ));
            }
        }
    }
    Ok(headers)
}

/// A preset's headers other than the key, as the headers field shows them.
pub fn headers_text(preset: &Preset) -> String {
    preset
        .headers("")
        .iter()
        .map(|(name, value)| format!("{name}: {value}\n"))
        .collect()
}

/// On a loopback server, `{n}.localhost` names reach the same server under a new origin
/// each (browsers resolve every `*.localhost` to loopback), so fresh requests really get
/// new connections.
pub fn loopback_fresh_url(url: &str) -> Option<String> {
    let rest = url.strip_prefix("http://")?;
    ["127.0.0.1", "localhost"].into_iter().find_map(|host| {
        let after = rest.strip_prefix(host)?;
        (after.starts_with(':') || after.starts_with('/'))
            .then(|| format!("http://{{n}}.localhost{after}"))
    })
}

/// Who beyond this machine cannot open a link to `url`: `Some` when its host is a loopback
/// name or address (only this computer can open it) or a private, link-local or local-only
/// one (only machines on the same local network can), `None` for any other host (which
/// may still be unreachable, but nothing in its name says so).
pub fn local_only(url: &str) -> Option<LocalOnly> {
    let origin = origin_of(url)?;
    let authority = origin.split_once("://")?.1;
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next()?,
        None => authority.split(':').next()?,
    };
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return local_v4(ip);
    }
    if let Ok(ip) = host.parse::<std::net::Ipv6Addr>() {
        // `::ffff:127.0.0.1` is 127.0.0.1.
        if let Some(v4) = ip.to_ipv4_mapped() {
            return local_v4(v4);
        }
        return if ip.is_loopback() || ip.is_unspecified() {
            Some(LocalOnly::ThisComputer)
        } else if ip.is_unique_local() || ip.is_unicast_link_local() {
            Some(LocalOnly::LocalNetwork)
        } else {
            None
        };
    }
    let name = host.trim_end_matches('.');
    if name == "localhost" || name.ends_with(".localhost") {
        Some(LocalOnly::ThisComputer)
    } else if [".local", ".lan", ".internal", ".home.arpa"]
        .iter()
        .any(|suffix| name.ends_with(suffix))
        || !name.contains('.')
    {
        // Multicast DNS, the names routers and private networks give, and a bare name
        // (resolved through the local network's own search domains).
        Some(LocalOnly::LocalNetwork)
    } else {
        None
    }
}

/// Where an IPv4 address can be reached from: loopback and `0.0.0.0` on this computer
/// only, private and link-local addresses on the local network only.
fn local_v4(ip: std::net::Ipv4Addr) -> Option<LocalOnly> {
    if ip.is_loopback() || ip.is_unspecified() {
        Some(LocalOnly::ThisComputer)
    } else if ip.is_private() || ip.is_link_local() {
        Some(LocalOnly::LocalNetwork)
    } else {
        None
    }
}

/// Why a link can be opened only nearby ([`local_only`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LocalOnly {
    /// A loopback host: only the computer that made the link can open it.
    ThisComputer,
    /// A private, link-local or local name: only machines on the same local network can.
    LocalNetwork,
}

/// Where the runs of `study` can be read: the Results page of the server that collects
/// them (under its base path: the collector URL without `/api/v1/runs`), showing this
/// study alone. `None` for a study without an id.
pub fn results_of(study: &Study, page: Page) -> Option<String> {
    let id = study.study_id.as_ref()?;
    let server = match study.collector.as_deref() {
        Some(collector) => collector
            .trim_end_matches('/')
            .strip_suffix(RUNS_PATH)
            .map(str::to_owned)
            .or_else(|| origin_of(collector))?,
        None => page.app_root(),
    };
    Some(format!("{server}/results?study={id}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_core::plan::Phase;

    const PAGE: Page = Page {
        origin: "http://127.0.0.1:8080",
        host: "127.0.0.1:8080",
        base_path: "/ft",
    };
    const ID: &str = "abcdefghijklmnop";

    /// The form as the page opens it: the demo on this server.
    fn demo() -> Form {
        let url = "http://127.0.0.1:8080/ft/v1/chat/completions";
        Form {
            title: "Chat latency".into(),
            url: url.into(),
            fresh_url: loopback_fresh_url(url).unwrap_or_default(),
            label: "demo".into(),
            version: String::new(),
            dialect: Dialect::OpenaiChat,
            body: r#"{"stream": true}"#.into(),
            protocol: Protocol::Quick,
            requests: "20".into(),
            headers: String::new(),
            key_header: KeyHeader::Bearer,
            token: String::new(),
            token_is_for_benchmark: false,
            send_cookies: false,
            compare_url: String::new(),
            compare_label: String::new(),
            compare_preset: None,
            compare_key: String::new(),
            collector: PAGE.own_collector(),
            run_tag_header: String::new(),
        }
    }

    fn phases(study: &Study) -> Vec<Phase> {
        study.plan.phases.iter().map(PhasePlan::phase).collect()
    }

    #[test]
    fn the_demo_gets_this_servers_probe_timings_and_fresh_names() {
        let study = demo().build(PAGE, ID.into()).expect("a valid form");
        let main = study.plan.main_target();
        assert_eq!(main.label, "demo");
        assert_eq!(
            main.probe_url.as_deref(),
            Some("http://127.0.0.1:8080/ft/api/v1/ping")
        );
        assert_eq!(main.timings_pointer.as_deref(), Some("/server_timings"));
        assert_eq!(
            main.fresh_url.as_deref(),
            Some("http://{n}.localhost:8080/ft/v1/chat/completions")
        );
        assert!(phases(&study).contains(&Phase::Fresh));
        // This server's collector is the default, kept out of the link.
        assert_eq!(study.collector, None);
        assert_eq!(study.study_id.as_deref(), Some(ID));
        assert_eq!(
            results_of(&study, PAGE).as_deref(),
            Some("http://127.0.0.1:8080/ft/results?study=abcdefghijklmnop")
        );
    }

    #[test]
    fn another_origin_gets_no_probe_and_no_fresh_phase_without_a_fresh_url() {
        let form = Form {
            url: "https://chat.example.com/v1/chat".into(),
            fresh_url: String::new(),
            label: " ".into(),
            version: " v2 ".into(),
            collector: "https://collect.example.com/base/api/v1/runs".into(),
            ..demo()
        };
        let study = form.build(PAGE, ID.into()).expect("a valid form");
        let main = study.plan.main_target();
        assert_eq!(main.label, "chat.example.com");
        assert_eq!(main.version.as_deref(), Some("v2"));
        assert_eq!(
            (main.probe_url.as_ref(), main.timings_pointer.as_ref()),
            (None, None)
        );
        assert!(!phases(&study).contains(&Phase::Fresh));
        assert!(Protocol::Quick.left_out(&form.fresh_url).is_some());
        assert!(Protocol::Steady.left_out("").is_none());
        assert!(
            Protocol::Session
                .left_out("https://{n}.f.example.com/v1")
                .is_none()
        );
        assert_eq!(
            results_of(&study, PAGE).as_deref(),
            Some("https://collect.example.com/base/results?study=abcdefghijklmnop")
        );
    }

    #[test]
    fn each_mistake_names_its_field() {
        let cases: [(Form, &str, &str); 9] = [
            (
                Form {
                    body: "{".into(),
                    ..demo()
                },
                "Request body",
                "not valid JSON",
            ),
            (
                Form {
                    url: "chat.example.com".into(),
                    ..demo()
                },
                "Target URL",
                "is not an absolute URL",
            ),
            (
                Form {
                    url: "ftp://example.com/x".into(),
                    ..demo()
                },
                "Target URL",
                "not ftp",
            ),
            (
                Form {
                    url: "https://my_host.example/v1".into(),
                    fresh_url: String::new(),
                    ..demo()
                },
                "Target URL",
                "no origin a record can keep",
            ),
            (
                Form {
                    headers: "X-A: 1\nnot a header\n".into(),
                    ..demo()
                },
                "Request headers",
                "line 2 is not Name: value",
            ),
            (
                Form {
                    url: "https://chat.example.com/v1".into(),
                    fresh_url: String::new(),
                    send_cookies: true,
                    ..demo()
                },
                "Send cookies",
                "(http://127.0.0.1:8080)",
            ),
            (
                Form {
                    protocol: Protocol::Steady,
                    requests: "1001".into(),
                    ..demo()
                },
                "Requests",
                "1 to 1000",
            ),
            (
                Form {
                    compare_url: "nowhere".into(),
                    ..demo()
                },
                "Compare with",
                "not an absolute URL",
            ),
            (
                Form {
                    fresh_url: "http://localhost:8080/v1".into(),
                    ..demo()
                },
                "Fresh-connection URL",
                "{n} in its host name",
            ),
        ];
        for (form, field, says) in cases {
            let error = form.build(PAGE, ID.into()).expect_err("a mistake");
            assert_eq!(error.field, field, "{error}");
            assert!(error.message.contains(says), "{error}");
            assert!(error.to_string().starts_with(&format!("{field}: ")));
        }
        // A token in the link needs the operator's word that it is a benchmark-only one.
        let token = Form {
            token: "sk-123".into(),
            ..demo()
        };
        let error = token.clone().build(PAGE, ID.into()).expect_err("a mistake");
        assert_eq!(error.field, "The study");
        assert!(error.message.contains("carries_token"), "{error}");
        let study = Form {
            token_is_for_benchmark: true,
            ..token
        }
        .build(PAGE, ID.into())
        .expect("a valid form");
        assert_eq!(
            study
                .plan
                .main_target()
                .headers
                .get("Authorization")
                .map(String::as_str),
            Some("Bearer sk-123")
        );
    }

    #[test]
    fn headers_cookies_run_tag_and_a_compared_preset_reach_the_plan() {
        let openai = Preset::find("openai-chat").expect("a preset");
        let form = Form {
            headers: "X-Team: latency\n\n  X-Trace :  on \n".into(),
            send_cookies: true,
            run_tag_header: " X-Run-Tag ".into(),
            compare_url: openai.url("").to_string(),
            compare_preset: Some(openai),
            compare_key: "sk-bench".into(),
            token_is_for_benchmark: true,
            ..demo()
        };
        let study = form.build(PAGE, ID.into()).expect("a valid form");
        let main = study.plan.main_target();
        assert_eq!(
            main.headers.get("X-Team").map(String::as_str),
            Some("latency")
        );
        assert_eq!(main.headers.get("X-Trace").map(String::as_str), Some("on"));
        assert!(main.send_cookies);
        assert_eq!(study.plan.run_tag, Some(RunTag::Header("X-Run-Tag".into())));
        let compared = &study.plan.targets[1];
        assert_eq!(compared.label, "openai-chat");
        assert_eq!(compared.headers, openai.headers("sk-bench"));
        assert_eq!(phases(&study).last(), Some(&Phase::Compare));
        // The session protocol places the compared target itself.
        let session = Form {
            protocol: Protocol::Session,
            ..form
        }
        .build(PAGE, ID.into())
        .expect("a valid form");
        assert_eq!(session.plan.targets.len(), 2);
        assert_eq!(
            phases(&session)
                .iter()
                .filter(|p| **p == Phase::Compare)
                .count(),
            1
        );
    }

    #[test]
    fn a_link_on_a_loopback_or_private_host_is_local_only() {
        let this = Some(LocalOnly::ThisComputer);
        let near = Some(LocalOnly::LocalNetwork);
        for (url, expected) in [
            ("http://127.0.0.1:8080/run#v1.x", this),
            ("http://127.9.9.9/run", this),
            ("http://localhost:8080/run", this),
            ("http://app.localhost/run", this),
            ("http://[::1]:8080/run", this),
            ("http://0.0.0.0:8080/run", this),
            ("http://192.168.1.20:8080/run", near),
            ("http://10.0.0.5/run", near),
            ("http://172.16.3.4/run", near),
            ("http://169.254.1.1/run", near),
            ("http://[fd12:3456::1]/run", near),
            ("http://[fe80::1]/run", near),
            ("http://[::ffff:127.0.0.1]:8080/run", this),
            ("http://[::ffff:192.168.1.20]/run", near),
            ("https://[::ffff:93.184.216.34]/run", None),
            ("http://laptop.local:8080/run", near),
            ("http://router.lan/run", near),
            ("http://bench/run", near),
            ("https://firsttoken.example.com/run#v1.x", None),
            ("https://93.184.216.34/run", None),
            ("https://172.32.0.1/run", None),
            ("https://[2001:db8::1]/run", None),
            ("not a url", None),
        ] {
            assert_eq!(local_only(url), expected, "{url}");
        }
    }

    #[test]
    fn loopback_targets_get_wildcard_localhost_names() {
        assert_eq!(
            loopback_fresh_url("http://localhost:3000/v1/chat").as_deref(),
            Some("http://{n}.localhost:3000/v1/chat")
        );
        assert_eq!(
            loopback_fresh_url("http://127.0.0.1/x").as_deref(),
            Some("http://{n}.localhost/x")
        );
        for other in [
            "https://127.0.0.1/x",
            "http://127.0.0.10/x",
            "http://localhost.example/x",
        ] {
            assert_eq!(loopback_fresh_url(other), None, "{other}");
        }
    }
}
