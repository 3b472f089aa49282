//! Each request's wait for its first token in layers (`firsttoken_core::layers`), checked
//! against the target's own clock and the link's round trip: over an emulated 4G link
//! (80 ms round trip, up to 10 ms of jitter each way), TLS 1.3 and HTTP/2, the demo
//! reports its steps in `Server-Timing` and its whole time to the first token in the
//! stream. The server's layer is the target's figure; what is left after the browser's
//! own time before sending is the network both ways and the delivery, so about one round
//! trip. The page shows the same split, drawn, for the latest request and for the run.

use std::time::Duration;

use firsttoken_core::layers::Layers;
use firsttoken_core::plan::{Phase, PhasePlan, Plan};
use firsttoken_core::schema::Run;
use firsttoken_core::share::Study;
use firsttoken_crowd::stats::median;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::link::{Link, Profile};
use firsttoken_e2e::target::{FieldTarget, TargetConfig, TlsVersion};
use thirtyfour::prelude::*;

const KNOBS: &str = "first_token_ms=150&itl_ms=5&tokens=5&auth_ms=40&retrieval_ms=30";

#[tokio::test]
async fn each_layer_of_the_wait_matches_the_targets_clock_over_a_4g_link() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let target = FieldTarget::start(
        server.state(),
        TargetConfig {
            tls: Some(TlsVersion::Tls13),
            http2: true,
            ..TargetConfig::default()
        },
    )
    .await?;
    let profile = Profile::FOURG;
    let link = Link::start(target.address(), profile).await?;
    let flags = [target.spki_flag(), FieldTarget::resolver_flag("*.test")];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let browser = Browser::start_with(DESKTOP, &flags).await?;

    let mut demo = server.demo_target(KNOBS);
    demo.url = format!(
        "https://target.test:{}/v1/chat/completions?{KNOBS}",
        link.address().port()
    );
    demo.fresh_url = None;
    demo.probe_url = None;
    let mut plan = Plan::steady(demo, 5);
    plan.phases = vec![
        PhasePlan::Warmup { requests: 1 },
        PhasePlan::Steady { requests: 5 },
    ];
    let study = Study {
        title: "Layers".into(),
        plan,
        collector: None,
        carries_token: false,
        study_id: None,
    };
    browser.driver.goto(server.link(&study)).await?;
    browser
        .wait_for_count("[data-testid=start-button]", 1, Duration::from_secs(30))
        .await?;
    let run: Run = serde_json::from_str(&server.run_and_read_record(&browser).await?)?;

    let warm: Vec<Layers> = run
        .samples
        .iter()
        .filter(|s| s.phase == Phase::Steady && s.error.is_none())
        .map(|s| Layers::of(s).expect("a first token"))
        .collect();
    assert_eq!(warm.len(), 5, "{run:#?}");
    for (layers, sample) in warm
        .iter()
        .zip(run.samples.iter().filter(|s| s.phase == Phase::Steady))
    {
        let server_part = layers.server.as_ref().expect("the demo reports its time");
        // The whole is the target's own clock, and its steps are the ones it named.
        let written =
            sample.stream_timings.as_ref().expect("the demo's timings")["first_token_written_ms"];
        assert!(
            (server_part.total_ms() - written).abs() < 1e-9,
            "{layers:?}"
        );
        let names: Vec<&str> = server_part.steps.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.first() == Some(&"auth") && names.contains(&"retrieval"),
            "{layers:?}"
        );
        // The model's configured first token, after the head.
        assert!(
            server_part.after_head_ms.expect("the whole") >= 150.0,
            "{layers:?}"
        );
        assert_eq!(
            layers.rest_holds(),
            "the network both ways and the stream's delivery",
            "{layers:?}"
        );
    }
    // A warm request on HTTP/2 with its preflight cached leaves at once.
    let before_send = median(
        &warm
            .iter()
            .map(|l| l.before_send_ms.clone().expect("Resource Timing"))
            .collect::<Vec<_>>(),
    )
    .expect("five");
    assert!(
        before_send < profile.rtt_ms / 2.0,
        "{before_send} ms before sending"
    );
    // The rest: one round trip (80 ms, and up to 10 ms of jitter each way), plus the
    // stream's delivery and the two programs' own hops; never less than the round trip
    // (2 ms for the clocks' rounding).
    let rest = median(&warm.iter().map(|l| l.rest_ms).collect::<Vec<_>>()).expect("five");
    assert!(
        (profile.rtt_ms - 2.0..profile.rtt_ms + 2.0 * profile.jitter_ms + 40.0).contains(&rest),
        "the rest's median {rest:.1} ms over an {} ms round trip: {warm:#?}",
        profile.rtt_ms
    );

    // The page draws the same split for the latest request.
    let drawn = browser
        .driver
        .find(By::Css("[data-testid=waterfall] [data-testid=layers]"))
        .await?
        .text()
        .await?;
    for words in [
        "before sending",
        "server: auth",
        "server: after its head",
        "the rest",
    ] {
        assert!(drawn.contains(words), "{words:?} in {drawn}");
    }
    // And the run's steady requests, each layer's median and share.
    let run_split = browser
        .driver
        .find(By::Css("[data-testid=run-report] [data-testid=run-split]"))
        .await?
        .text()
        .await?;
    for words in [
        "before sending",
        "server: auth",
        "server: after its head",
        "the rest",
        "From all 5 steady requests",
    ] {
        assert!(run_split.contains(words), "{words:?} in {run_split}");
    }
    browser.screenshot("study-desktop-layers").await?;
    browser.quit().await
}
