//! What a beta user reads before pressing Start, in words: the one source of the
//! landing's text, for whatever paints it. It depends on the study and on three facts
//! about the page that opened it (its origin, its host, its default collector). No DOM,
//! no I/O, no clock.

use crate::page::Page;
use firsttoken_core::api::LinkCheck;
use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::share::{Link, LinkError, Study};
use firsttoken_core::url::origin_of;

/// A typical chat answer's length, for the duration estimate.
const TYPICAL_REQUEST_S: f64 = 1.5;

/// The page's header and footer, around every page of the app.
pub const APP_NAME: &str = "firsttoken";
pub const TAGLINE: &str = "How long you wait for the first token of an answer, measured from your own browser and network.";
pub const FOOTER: &str = "Every time is measured in this browser with performance.now(), from just before the request is sent. Nothing is uploaded unless you agree.";
/// Said by the Start button painted before the app arrives (it cannot start anything yet).
pub const GETTING_READY: &str = "Getting ready: the page is still loading";
/// Said under the painted Start when the app has not come within
/// [`STILL_LOADING_AFTER_MS`]: a slow network, or a page that will not finish.
pub const STILL_LOADING: &str = "The rest of the page is still on its way, which takes a while on a slow network. If Start stays grey, reload the page.";
pub const STILL_LOADING_AFTER_MS: i32 = 15_000;

/// The lead's words around the measured target's label and origin.
pub const LEAD_START: &str = "This page measures how long ";
pub const LEAD_MIDDLE: &str = "takes to start answering you, from this browser and this network: ";
pub const NETWORK_QUESTION: &str = "Which network are you on?";
pub const START: &str = "Start";
pub const WHAT_IT_DOES: &str = "What it does";
pub const CANCEL: &str = "You can cancel at any time; what finished is kept.";
pub const WHAT_IS_SENT: &str = "What is sent, if you agree";
pub const SENT: [&str; 5] = [
    "the times each request took, its status, and how it ended",
    "the target's address (its origin, not the full address)",
    "the network you pick above, and what your browser says of it (type, round trip, speed)",
    "your browser's name and major version, your operating system, phone or not",
    "how precise your browser's clock was, and which of the features this page reads it lacks",
];
pub const WHAT_IS_NEVER_SENT: &str = "What is never sent";
pub const NEVER_SENT: [&str; 3] = [
    "your IP address (the collector keeps none, not even in its logs)",
    "your full browser identification string, or any cookie",
    "API keys, or the text of the questions and answers",
];

/// The landing's words that depend on the study; the rest are the constants above.
#[derive(Debug, Clone, PartialEq)]
pub struct Landing {
    pub title: String,
    /// The measured target's label, and its origin as the lead writes it after the
    /// label: ` (https://chat.example.com) `.
    pub target_label: String,
    pub target_origin: String,
    /// The lead's end: `12 requests, under a minute.`
    pub lead_end: String,
    /// Who made the link, as far as the page's own server can tell ([`Provenance`]).
    pub provenance: String,
    /// Said when the study sends this browser's cookies to the page's own host, with
    /// each full URL they go to.
    pub session_notice: Option<String>,
    /// Said when the link carries what looks like an access token.
    pub token_notice: Option<String>,
    /// Where the results go, and its host as the page names it.
    pub collector_url: String,
    pub collector_host: String,
    /// The consent checkbox's label.
    pub consent: String,
    /// One line per phase, in order.
    pub phases: Vec<String>,
    /// `Compared with: direct (https://api.example.com).`, when other targets are.
    pub compared: Option<String>,
    /// Every host the run contacts, and nowhere else.
    pub hosts: String,
}

/// Reads a link's part after `#` and checks it can run on this page: cookies go only to
/// the page's own origin (`credentials: "same-origin"`), so a link that asks for them
/// elsewhere asks for what the page will not do. Who made it is checked apart
/// ([`Provenance`], [`admit`]).
pub fn open(fragment: &str, page_origin: &str) -> Result<Link, OpenError> {
    let link = Link::parse(fragment)?;
    match link
        .study
        .plan
        .targets
        .iter()
        .find(|t| t.send_cookies && origin_of(&t.url).as_deref() != Some(page_origin))
    {
        Some(t) => Err(OpenError::CookiesElsewhere {
            label: t.label.clone(),
            page_origin: page_origin.to_owned(),
        }),
        None => Ok(link),
    }
}

/// Why a link cannot run on this page.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenError {
    /// The link itself cannot be read.
    #[error(transparent)]
    Link(#[from] LinkError),
    #[error(
        "target {label:?} asks for this browser's cookies, but they are sent only to the page's own origin ({page_origin}), and it is on another"
    )]
    CookiesElsewhere { label: String, page_origin: String },
}

/// Who made a link, as the page's own server answers ([`firsttoken_core::api::CHECK_PATH`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    /// The page is still asking.
    Checking,
    /// Signed with the server's key: made by the operator of the page's site, unchanged
    /// since. `cookies_refused`: why cookies may not go with it even so.
    Operator {
        signed_at_ms: Option<u64>,
        cookies_refused: Option<String>,
    },
    /// Not signed by this site's operator: anyone could have made it.
    Anyone { reason: String },
}

impl Provenance {
    /// What the server's answer means.
    pub fn of(check: LinkCheck) -> Self {
        if check.signed {
            Provenance::Operator {
                signed_at_ms: check.signed_at_ms,
                cookies_refused: check.cookies_refused,
            }
        } else {
            Provenance::Anyone {
                reason: check
                    .unsigned_reason
                    .unwrap_or_else(|| "no signature".into()),
            }
        }
    }

    /// The server could not be asked, or did not answer as one: `why`.
    pub fn unanswered(why: &str) -> Self {
        Provenance::Anyone {
            reason: format!("the site's server could not be asked: {why}"),
        }
    }

    /// The landing's sentence about it, naming the page's host.
    pub fn words(&self, host: &str) -> String {
        match self {
            Provenance::Checking => format!("Checking with {host} who made this link…"),
            Provenance::Operator { signed_at_ms, .. } => format!(
                "Made by the operator of {host} (signed{}, unchanged since).",
                signed_at_ms
                    .map(|ms| format!(" on {}", utc_date(ms)))
                    .unwrap_or_default()
            ),
            Provenance::Anyone { reason } => format!(
                "Not signed by {host}'s operator ({reason}): anyone could have made this link."
            ),
        }
    }
}

/// Whether the study may run on this page given who made it: a study that sends this
/// browser's cookies runs only from a link the site's operator signed, to URLs the
/// operator allows. Anything else runs as any web page's requests would.
pub fn admit(study: &Study, provenance: &Provenance, host: &str) -> Result<(), String> {
    let cookie_urls = study.cookie_urls();
    let Some(first) = cookie_urls.first() else {
        return Ok(());
    };
    let why = match provenance {
        Provenance::Checking => "it has not been checked yet".to_owned(),
        Provenance::Operator {
            cookies_refused: None,
            ..
        } => return Ok(()),
        Provenance::Operator {
            cookies_refused: Some(why),
            ..
        } => why.clone(),
        Provenance::Anyone { reason } => format!("{host}'s operator did not sign it ({reason})"),
    };
    Err(format!(
        "this link asks to send your cookies for {host} with its requests (to {first}), and only a link {host}'s operator signed for that may: {why}"
    ))
}

/// `2026-12-06`: the UTC date of `ms` since 1970 (Hinnant's days-to-civil, whole
/// numbers only).
pub fn utc_date(ms: u64) -> String {
    let z = (ms / 86_400_000) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

impl Landing {
    pub fn of(study: &Study, page: Page<'_>, provenance: &Provenance) -> Landing {
        let plan = &study.plan;
        let collector_url = study
            .collector
            .clone()
            .unwrap_or_else(|| page.own_collector());
        let collector_host = origin_of(&collector_url)
            .map(|o| o.split("://").nth(1).unwrap_or(&o).to_owned())
            .unwrap_or_else(|| collector_url.clone());
        let targets: Vec<(String, String)> = plan
            .targets
            .iter()
            .map(|t| (t.label.clone(), origin_of(&t.url).unwrap_or_default()))
            .collect();
        let others: Vec<String> = targets.iter().skip(1).map(|(l, _)| l.clone()).collect();
        let secrets = study.secret_headers();
        let host = page.host;
        Landing {
            title: study.title.clone(),
            target_label: targets[0].0.clone(),
            target_origin: format!(" ({}) ", targets[0].1),
            lead_end: format!(
                "{} requests, {}.",
                plan.total_requests(),
                duration_estimate(plan)
            ),
            provenance: provenance.words(host),
            session_notice: plan.targets.iter().any(|t| t.send_cookies).then(|| format!(
                "This measurement uses your signed-in session with {host}: this browser's cookies for {host} go with each request to {}, as they do when you use it. They are never uploaded.",
                study.cookie_urls().join(" and ")
            )),
            token_notice: (!secrets.is_empty()).then(|| format!(
                "This link carries an access token for the measured service ({}), which the person who sent it says is for this benchmark only. It goes to that service with each request and is never uploaded.",
                secrets.join(", ")
            )),
            consent: format!(
                "Send the results to {collector_host} when the run finishes (what is and is not sent: below)"
            ),
            phases: plan.phases.iter().map(|p| phase_words(p, &others)).collect(),
            compared: (!others.is_empty()).then(|| {
                format!(
                    "Compared with: {}.",
                    targets
                        .iter()
                        .skip(1)
                        .map(|(l, o)| format!("{l} ({o})"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }),
            hosts: format!(
                "This browser sends requests to {}, and nowhere else (the results go to {collector_host} only if you agree above).",
                plan.hosts().join(", ")
            ),
            collector_url,
            collector_host,
        }
    }
}

/// The phase in words, for the landing.
pub fn phase_words(phase: &PhasePlan, others: &[String]) -> String {
    let plural = |n: u32, one: &str, many: &str| {
        if n == 1 {
            format!("1 {one}")
        } else {
            format!("{n} {many}")
        }
    };
    match phase {
        PhasePlan::Probe { requests } => format!(
            "{} to time the network round trip",
            plural(*requests, "small request", "small requests")
        ),
        PhasePlan::Warmup { requests } => format!(
            "{} to open the connection (not counted)",
            plural(*requests, "request", "requests")
        ),
        PhasePlan::Steady { requests } => format!(
            "{} one after another",
            plural(*requests, "chat request", "chat requests")
        ),
        PhasePlan::Fresh { requests } => format!(
            "{}, each on a new connection",
            plural(*requests, "request", "requests")
        ),
        PhasePlan::Concurrency {
            levels,
            requests_per_level,
        } => format!(
            "requests in groups sent at the same time ({} at once; about {requests_per_level} each)",
            levels
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PhasePlan::Cold { idle_ms } => format!(
            "after waiting idle ({}), one request each",
            idle_ms
                .iter()
                .map(|ms| wait(u64::from(*ms)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        PhasePlan::Compare { rounds } => {
            format!("{rounds} rounds comparing with {}", others.join(", "))
        }
    }
}

/// "about 2 minutes", from a typical answer's length and the idle waits.
pub fn duration_estimate(plan: &Plan) -> String {
    let seconds = plan.expected_seconds(TYPICAL_REQUEST_S);
    if seconds < 60.0 {
        "under a minute".to_owned()
    } else {
        let minutes = (seconds / 60.0).ceil() as u32;
        format!(
            "about {minutes} minute{}",
            if minutes == 1 { "" } else { "s" }
        )
    }
}

/// A wait someone chose, in the unit they would say it in: `500 ms`, `15 s`, `2.5 s`,
/// `2 min`, `1 min 30 s`. Whole-number arithmetic, halves rounded up: formatting a float
/// would bring the standard library's float printing (about 10 KB) into the landing
/// painter.
pub fn wait(ms: u64) -> String {
    if ms < 1000 {
        return format!("{ms} ms");
    }
    if ms < 60_000 {
        let tenths = (ms + 50) / 100;
        return if ms.is_multiple_of(1000) {
            format!("{} s", ms / 1000)
        } else {
            format!("{}.{} s", tenths / 10, tenths % 10)
        };
    }
    let whole = (ms + 500) / 1000;
    let (minutes, rest) = (whole / 60, whole % 60);
    if rest == 0 {
        format!("{minutes} min")
    } else {
        format!("{minutes} min {rest} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_core::plan::TargetPlan;
    use firsttoken_stream::dialect::Dialect;

    const PAGE: Page<'static> = Page {
        origin: "https://bench.example.com",
        host: "bench.example.com",
        base_path: "",
    };

    fn target(label: &str, url: &str) -> TargetPlan {
        TargetPlan::new(label, url, Dialect::OpenaiChat, r#"{"stream":true}"#)
    }

    fn study(plan: Plan) -> Study {
        Study {
            title: "Checkout assistant".into(),
            plan,
            collector: None,
            carries_token: false,
            study_id: None,
        }
    }

    #[test]
    fn waits_are_said_in_the_unit_one_would_choose() {
        assert_eq!(wait(500), "500 ms");
        assert_eq!(wait(15_000), "15 s");
        assert_eq!(wait(2_500), "2.5 s");
        assert_eq!(wait(2_250), "2.3 s");
        assert_eq!(wait(2_249), "2.2 s");
        assert_eq!(wait(59_960), "60.0 s");
        assert_eq!(wait(60_000), "1 min");
        assert_eq!(wait(89_499), "1 min 29 s");
        assert_eq!(wait(120_000), "2 min");
        assert_eq!(wait(90_000), "1 min 30 s");
    }

    /// Every phase in words, the lead and the hosts, for a plan with another target to
    /// compare with and the page's own collector.
    #[test]
    fn a_study_reads_as_the_landing_says_it() {
        let mut plan = Plan::steady(target("prod chat", "https://chat.example.com/v1/chat"), 10);
        plan.targets
            .push(target("direct", "https://api.example.com:8443/v1/chat"));
        plan.phases = vec![
            PhasePlan::Warmup { requests: 1 },
            PhasePlan::Steady { requests: 10 },
            PhasePlan::Concurrency {
                levels: vec![1, 3],
                requests_per_level: 9,
            },
            PhasePlan::Cold {
                idle_ms: vec![15_000, 90_000],
            },
            PhasePlan::Compare { rounds: 5 },
        ];
        let landing = Landing::of(&study(plan), PAGE, &Provenance::Checking);
        assert_eq!(landing.title, "Checkout assistant");
        assert_eq!(landing.target_label, "prod chat");
        assert_eq!(landing.target_origin, " (https://chat.example.com) ");
        assert_eq!(
            landing.phases,
            [
                "1 request to open the connection (not counted)",
                "10 chat requests one after another",
                "requests in groups sent at the same time (1, 3 at once; about 9 each)",
                "after waiting idle (15 s, 1 min 30 s), one request each",
                "5 rounds comparing with direct",
            ]
        );
        assert_eq!(
            landing.compared.as_deref(),
            Some("Compared with: direct (https://api.example.com:8443).")
        );
        assert_eq!(
            landing.hosts,
            "This browser sends requests to chat.example.com, api.example.com:8443, and nowhere else (the results go to bench.example.com only if you agree above)."
        );
        assert_eq!(
            landing.consent,
            "Send the results to bench.example.com when the run finishes (what is and is not sent: below)"
        );
        assert_eq!(
            landing.collector_url,
            "https://bench.example.com/api/v1/runs"
        );
        assert_eq!(landing.session_notice, None);
        assert_eq!(landing.token_notice, None);
        // 1 + 10 + (3 opening + 9 × 1 + 3 × 3) + 2 + 5 rounds × 2 targets = 44 requests;
        // 36 request times of 1.5 s (batches count once) and 105 s idle: 159 s, 3 minutes
        // begun.
        assert_eq!(landing.lead_end, "44 requests, about 3 minutes.");
    }

    /// A link that sends cookies is opened only on the page whose origin gets them, and
    /// then says whose session it uses, with every full URL the cookies go to; a token in
    /// the link is named.
    #[test]
    fn cookies_and_tokens_are_said_before_start() {
        let mut own = target("app", "https://bench.example.com/api/chat");
        own.send_cookies = true;
        own.probe_url = Some("https://bench.example.com/api/ping".into());
        own.headers
            .insert("Authorization".into(), "Bearer secret".into());
        let link = Study {
            carries_token: true,
            ..study(Plan::steady(own, 5))
        }
        .to_fragment();
        let signed = Provenance::Operator {
            signed_at_ms: Some(1_796_601_600_000),
            cookies_refused: None,
        };
        let opened = open(&link, PAGE.origin)
            .map(|l| Landing::of(&l.study, PAGE, &signed))
            .map_err(|e| e.to_string());
        let landing = opened.as_ref().map_err(String::as_str);
        assert_eq!(
            landing.map(|l| l.session_notice.as_deref()),
            Ok(Some(
                "This measurement uses your signed-in session with bench.example.com: this browser's cookies for bench.example.com go with each request to https://bench.example.com/api/chat and https://bench.example.com/api/ping, as they do when you use it. They are never uploaded."
            ))
        );
        assert_eq!(
            landing.map(|l| l.provenance.as_str()),
            Ok(
                "Made by the operator of bench.example.com (signed on 2026-12-07, unchanged since)."
            )
        );
        assert!(
            landing
                .map(|l| l.token_notice.clone().unwrap_or_default())
                .unwrap_or_default()
                .contains("(app: Authorization)"),
            "{landing:?}"
        );
        assert_eq!(
            open(&link, "https://elsewhere.example.org")
                .map(|l| l.study.title)
                .map_err(|e| e.to_string()),
            Err("target \"app\" asks for this browser's cookies, but they are sent only to the page's own origin (https://elsewhere.example.org), and it is on another".to_owned())
        );
    }

    /// Cookies go only with a link the site's operator signed, to URLs it allows; any
    /// other link runs without them or not at all, and says why.
    #[test]
    fn only_the_operators_signed_link_sends_cookies() {
        let mut own = target("app", "https://bench.example.com/api/chat");
        own.send_cookies = true;
        let with_cookies = study(Plan::steady(own.clone(), 5));
        let host = PAGE.host;
        let anyone = Provenance::of(LinkCheck {
            signed: false,
            signed_at_ms: None,
            unsigned_reason: Some("no signature".into()),
            cookies_refused: None,
        });
        let refused = admit(&with_cookies, &anyone, host).expect_err("unsigned");
        assert_eq!(
            refused,
            "this link asks to send your cookies for bench.example.com with its requests (to https://bench.example.com/api/chat), and only a link bench.example.com's operator signed for that may: bench.example.com's operator did not sign it (no signature)"
        );
        assert!(admit(&with_cookies, &Provenance::Checking, host).is_err());
        assert!(
            admit(
                &with_cookies,
                &Provenance::unanswered("404 Not Found"),
                host
            )
            .is_err()
        );
        let outside = Provenance::Operator {
            signed_at_ms: None,
            cookies_refused: Some("not under https://bench.example.com/chat/".into()),
        };
        assert!(
            admit(&with_cookies, &outside, host)
                .expect_err("outside the prefixes")
                .ends_with("may: not under https://bench.example.com/chat/")
        );
        let signed = Provenance::Operator {
            signed_at_ms: None,
            cookies_refused: None,
        };
        assert_eq!(admit(&with_cookies, &signed, host), Ok(()));
        // Without cookies, anyone's link runs, and the landing says whose it is not.
        own.send_cookies = false;
        let plain = study(Plan::steady(own, 5));
        assert_eq!(admit(&plain, &anyone, host), Ok(()));
        assert_eq!(
            Landing::of(&plain, PAGE, &anyone).provenance,
            "Not signed by bench.example.com's operator (no signature): anyone could have made this link."
        );
        assert_eq!(
            Landing::of(&plain, PAGE, &Provenance::Checking).provenance,
            "Checking with bench.example.com who made this link…"
        );
    }

    #[test]
    fn dates_are_utc_days() {
        // Python: datetime.fromtimestamp(ms / 1000, timezone.utc).date()
        for (ms, date) in [
            (0, "1970-01-01"),
            (951_782_400_000, "2000-02-29"),
            (1_796_601_599_999, "2026-12-06"),
            (1_796_601_600_000, "2026-12-07"),
            (253_402_300_799_999, "9999-12-31"),
        ] {
            assert_eq!(utc_date(ms), date, "{ms}");
        }
    }

    #[test]
    fn a_short_plan_takes_under_a_minute_and_a_long_one_says_its_minutes() {
        let quick = Plan::steady(target("t", "https://chat.example.com/"), 10);
        assert_eq!(duration_estimate(&quick), "under a minute");
        let long = Plan::steady(target("t", "https://chat.example.com/"), 100);
        assert_eq!(duration_estimate(&long), "about 3 minutes");
    }
}
