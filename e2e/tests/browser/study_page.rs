//! A beta user's path, in headless Chromium against real servers: open a share link,
//! consent, run the quick protocol against the demo target, watch the charts fill, upload.
//! Also, in Chromium, Firefox and WebKitGTK alike: a collector that is away during the
//! upload gets the run later, exactly once (`engines.rs` has the rest of the path in the
//! other two). In Chromium: a broken link says so; the operator's page makes a link.
//! Screenshots of each state land in `target/e2e-screenshots/`.

use std::time::Duration;

use firsttoken_core::plan::{PhasePlan, Plan};
use firsttoken_core::share::Study;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP, Engine, PHONE, Viewport};
use firsttoken_e2e::tls::{ACCEPT_SELF_SIGNED, TlsServer};
use firsttoken_server::db::Table;
use thirtyfour::prelude::*;

const WAIT: Duration = Duration::from_secs(30);
/// A fast demo, so the quick protocol's requests take a fraction of a second each.
const FAST: &str = "first_token_ms=80&itl_ms=4&tokens=12";

/// The study id of the tests' links.
const STUDY_ID: &str = "e2etestlinkaaaaa";

fn study(plan: Plan, collector: Option<String>) -> Study {
    Study {
        title: "Chat latency, end-to-end test".into(),
        plan,
        collector,
        carries_token: false,
        study_id: Some(STUDY_ID.into()),
    }
}

/// The text of the one QR code in a PNG picture, read by rqrr (not the encoder's crate).
fn read_qr(png_bytes: &[u8]) -> String {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(png_bytes));
    decoder.set_transformations(png::Transformations::EXPAND | png::Transformations::STRIP_16);
    let mut reader = decoder.read_info().expect("a PNG");
    let mut pixels = vec![0; reader.output_buffer_size().expect("a size")];
    let info = reader.next_frame(&mut pixels).expect("a frame");
    let channels = info.color_type.samples();
    let (width, height) = (info.width as usize, info.height as usize);
    let mut image = rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| {
        let at = y * info.line_size + x * channels;
        // The first channel: grey, or red (the code is black on white).
        pixels[at]
    });
    let grids = image.detect_grids();
    assert_eq!(
        grids.len(),
        1,
        "one QR code in the {width}×{height} picture"
    );
    grids[0].decode().expect("the code decodes").1
}

/// The `data-testid` of the element that has the keyboard focus.
async fn focused(driver: &WebDriver) -> anyhow::Result<String> {
    let id = driver
        .execute(
            "return document.activeElement && document.activeElement.getAttribute('data-testid')",
            Vec::new(),
        )
        .await?;
    Ok(id.json().as_str().unwrap_or_default().to_owned())
}

async fn press(driver: &WebDriver, key: Key) -> anyhow::Result<()> {
    driver.action_chain().send_keys(key).perform().await?;
    Ok(())
}

/// Picks Wi-Fi, agrees and starts with the keyboard alone, as someone who cannot use a
/// pointer would: Tab to the network choice (one stop for the group), arrows within it,
/// Tab to the consent box, Space, Tab to Start, Enter.
async fn start_by_keyboard(driver: &WebDriver) -> anyhow::Result<()> {
    for _ in 0..20 {
        if focused(driver).await?.starts_with("network-") {
            break;
        }
        press(driver, Key::Tab).await?;
    }
    assert_eq!(
        focused(driver).await?,
        "network-unknown",
        "Tab reaches the network choice, on the browser's guess (none here)"
    );
    // Cellular, Fiber, Cable / DSL, Wi-Fi, Satellite, Other, Not sure: three to the left.
    for _ in 0..3 {
        press(driver, Key::Left).await?;
    }
    assert_eq!(focused(driver).await?, "network-wifi");
    press(driver, Key::Tab).await?;
    assert_eq!(focused(driver).await?, "consent");
    press(driver, Key::Space).await?;
    press(driver, Key::Tab).await?;
    assert_eq!(focused(driver).await?, "start-button");
    press(driver, Key::Enter).await?;
    Ok(())
}

async fn quick_protocol(viewport: Viewport) -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let plan = Plan::quick(server.demo_target(FAST));
    let total = plan.total_requests() as usize;
    let probes: usize = plan
        .phases
        .iter()
        .map(|p| match p {
            PhasePlan::Probe { requests } => *requests as usize,
            _ => 0,
        })
        .sum();
    let browser = Browser::start(viewport).await?;
    let driver = &browser.driver;
    let shot = |state: &str| format!("study-{}-{state}", viewport.name);

    driver.goto(server.link(&study(plan, None))).await?;
    let title = browser
        .wait_for_text("[data-testid=study-title]", WAIT, |t| !t.is_empty())
        .await?;
    assert_eq!(title, "Chat latency, end-to-end test");
    // Start is above the fold, on a 360 × 740 phone too: what the run does and what it
    // sends follow it.
    browser
        .wait_for_count("[data-testid=start-button]", 1, WAIT)
        .await?;
    let fold = driver
        .execute(
            "const r = document.querySelector('[data-testid=start-button]').getBoundingClientRect(); return [r.bottom, window.innerHeight];",
            Vec::new(),
        )
        .await?;
    let [bottom, screen]: [f64; 2] = serde_json::from_value(fold.json().clone())?;
    assert!(
        bottom <= screen && screen <= f64::from(viewport.height),
        "Start ends {bottom} px down, the screen at {screen} px"
    );
    // Every host the run contacts is named before the user agrees: the target, the
    // fresh connections' wildcard host name, and the collector.
    let hosts = driver
        .find(By::Css("[data-testid=hosts]"))
        .await?
        .text()
        .await?;
    let port = server.address.port();
    assert!(
        hosts.contains(&format!(
            "127.0.0.1:{port}, *.localhost:{port}, and nowhere else"
        )),
        "{hosts}"
    );
    assert!(hosts.contains("the results go to 127.0.0.1:"), "{hosts}");
    browser.screenshot(&shot("1-landing")).await?;
    browser.screenshot_dark(&shot("1-landing")).await?;

    if viewport.mobile {
        // A thumb: tap the network, the consent and Start.
        for control in ["network-wifi", "consent", "start-button"] {
            driver
                .find(By::Css(format!("[data-testid={control}]")))
                .await?
                .click()
                .await?;
        }
    } else {
        start_by_keyboard(driver).await?;
    }

    // The charts fill while it runs.
    browser
        .wait_for_count("[data-testid=timeline-chart] line.dot", 8, WAIT)
        .await?;
    let status = driver
        .find(By::Css("[data-testid=run-status]"))
        .await?
        .text()
        .await?;
    assert!(status.starts_with("Part "), "{status}");
    browser.screenshot(&shot("2-running")).await?;

    browser
        .wait_for_text("[data-testid=run-status]", Duration::from_secs(90), |t| {
            t.starts_with("Finished")
        })
        .await?;
    let dots = driver
        .find_all(By::Css("[data-testid=timeline-chart] line.dot"))
        .await?;
    assert_eq!(
        dots.len(),
        total - probes,
        "one dot per request but the network probes, which have no first token"
    );
    assert!(
        !driver
            .find_all(By::Css("[data-testid=phase-distributions] path.cdf-line"))
            .await?
            .is_empty()
    );
    assert_eq!(
        driver
            .find_all(By::Css("[data-testid=concurrency-chart] line.median"))
            .await?
            .len(),
        2
    );
    assert!(
        !driver
            .find_all(By::Css("[data-testid=concurrency-chart] path.serial"))
            .await?
            .is_empty()
    );
    assert!(
        driver
            .find_all(By::Css("[data-testid=waterfall] .wf-row"))
            .await?
            .len()
            >= 4
    );
    let reading = driver
        .find(By::Css("[data-testid=concurrency-reading]"))
        .await?
        .text()
        .await?;
    assert!(
        reading.contains("side by side"),
        "the demo serves requests in parallel: {reading}"
    );
    let connection = driver
        .find(By::Css("[data-testid=connection-reading]"))
        .await?
        .text()
        .await?;
    // On loopback a new host name costs a millisecond or two, next to the demo's spread:
    // either a figure from all five fresh requests, or none because its interval holds 0.
    assert!(
        (connection
            .starts_with("A new host name (DNS lookup, connection, TLS and the CORS preflight")
            && connection.contains("on 5 requests verified on a new connection"))
            || connection.starts_with(
                "No figure for what a new host name costs: the difference cannot be told from zero"
            ),
        "every fresh request is verified (a new origin over HTTP/1.1): {connection}"
    );
    let cold = driver
        .find(By::Css("[data-testid=cold-reading]"))
        .await?
        .text()
        .await?;
    assert!(cold.contains("(waited 15."), "{cold}");
    // A percentile is shown only where the count supports it (p90 from 10 values, p99
    // from 100); otherwise the cell says what it needs and what it has.
    let cells = driver
        .execute(
            "return [...document.querySelectorAll('[data-testid=report-row]')].map(row => \
             Object.fromEntries([...row.querySelectorAll('td')].map(td => \
             [td.dataset.label || 'phase', td.textContent])));",
            Vec::new(),
        )
        .await?;
    let rows: Vec<std::collections::HashMap<String, String>> =
        serde_json::from_value(cells.json().clone())?;
    let row = |phase: &str| {
        rows.iter()
            .find(|r| r.get("phase").is_some_and(|p| p.starts_with(phase)))
            .unwrap_or_else(|| panic!("no row for {phase}: {rows:?}"))
    };
    let (steady, fresh) = (row("one after another"), row("new connections"));
    let p90 = &steady["TTFT p90"];
    assert!(
        p90.starts_with(|c: char| c.is_ascii_digit()) && p90.contains(" ms"),
        "ten values give a p90: {steady:?}"
    );
    assert_eq!(steady["TTFT p99"], "needs 100 (has 10)", "{steady:?}");
    assert_eq!(fresh["TTFT p90"], "needs 10 (has 5)", "{fresh:?}");

    // Consent was given: the run is sent, and the page links to it.
    browser
        .wait_for_count("[data-testid=stored-run-link]", 1, WAIT)
        .await?;
    browser.screenshot(&shot("3-results")).await?;
    browser.screenshot_dark(&shot("3-results")).await?;
    let record = server.only_record().await?;
    assert_eq!(record["samples"].as_array().map(Vec::len), Some(total));
    assert_eq!(record["study_id"], STUDY_ID, "the run names its link");
    assert_eq!(record["client"]["network"], "wifi");
    assert_eq!(record["engine"]["in_worker"], true);
    assert_eq!(record["targets"][0]["demo"], true);
    // The app's server makes the page cross-origin isolated; Chromium then steps its
    // clock in 5 µs (100 µs otherwise), and it has everything the page reads.
    let engine = &record["engine"];
    assert_eq!(engine["cross_origin_isolated"], true, "{engine}");
    let step = engine["clock_step_ms"].as_f64().expect("a clock step");
    assert!(step <= 0.005, "{engine}");
    assert_eq!(engine["unavailable"], serde_json::json!([]), "{engine}");
    // So its results have nothing to say of what the browser could not give.
    assert!(
        driver
            .find_all(By::Css("[data-testid=browser-limits]"))
            .await?
            .is_empty()
    );
    browser.quit().await
}

#[tokio::test]
async fn a_beta_user_runs_the_quick_protocol_on_a_desktop() -> anyhow::Result<()> {
    quick_protocol(DESKTOP).await
}

#[tokio::test]
async fn a_beta_user_runs_the_quick_protocol_on_a_phone() -> anyhow::Result<()> {
    quick_protocol(PHONE).await
}

/// The investigation's server: one worker, and a blocking step before the model call, so
/// simultaneous requests wait for each other. The page must say so in words.
///
/// The blocking step is most of the time to first token, so the server is plainly serial:
/// alone about 205 ms, with 3 at once 205, 405 and 605 ms, a median ratio near 1.97×
/// (one at a time is 2×). With the step a smaller share (150 of 180 ms, a ratio of
/// 1.83×) a loaded machine, whose requests of a batch leave a little apart, read 1.72×,
/// under the 1.75× where "one at a time" begins.
#[tokio::test]
async fn a_server_that_serves_one_request_at_a_time_is_called_so() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let (browser, reading, levels) = serial_server_reading(&server, "serial-e2e", 9).await?;
    assert!(
        reading.starts_with("Your server appears to handle requests one at a time"),
        "{reading}"
    );
    assert!(
        levels.contains("1 at once: first token at") && levels.contains("3 at once"),
        "{levels}"
    );
    browser.screenshot("study-desktop-serial-server").await?;
    browser.quit().await
}

/// Runs a concurrency phase at 1 and 3 at once, `requests` per level, against a demo that
/// serves one request at a time (its own `pool`), in Chromium, and returns the browser,
/// the page's reading of it and the list of levels beneath.
async fn serial_server_reading(
    server: &TestServer,
    pool: &str,
    requests: u32,
) -> anyhow::Result<(Browser, String, String)> {
    let target = server.demo_target(&format!(
        "first_token_ms=5&itl_ms=4&tokens=6&pre_model_ms=200&slots=1&pool={pool}"
    ));
    let plan = Plan {
        phases: vec![PhasePlan::Concurrency {
            levels: vec![1, 3],
            requests_per_level: requests,
        }],
        ..Plan::steady(target, 1)
    };
    let browser = Browser::start(DESKTOP).await?;
    browser.driver.goto(server.link(&study(plan, None))).await?;
    browser
        .wait_for_count("[data-testid=start-button]", 1, WAIT)
        .await?[0]
        .click()
        .await?;
    let reading = browser
        .wait_for_text(
            "[data-testid=concurrency-reading]",
            Duration::from_secs(60),
            |t| !t.is_empty(),
        )
        .await?;
    let levels = browser
        .driver
        .find(By::Css("[data-testid=concurrency-levels]"))
        .await?
        .text()
        .await?;
    Ok((browser, reading, levels))
}

/// One batch at 3 at once is too few to tell a one-at-a-time server from one that
/// serves requests side by side: the page says so, with the figures, and names neither.
#[tokio::test]
async fn one_batch_is_not_enough_to_tell_and_the_page_says_so() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let (browser, reading, levels) = serial_server_reading(&server, "one-batch-e2e", 3).await?;
    assert!(
        reading.starts_with(
            "Not enough requests to tell how your server handles simultaneous requests: with 3 at once"
        ) && reading.contains("but from only 1 batch; at least 3 are needed."),
        "{reading}"
    );
    assert!(
        !reading.contains("one at a time:") && !reading.contains("side by side:"),
        "{reading}"
    );
    // The level's own line gives no interval either: one batch cannot support one.
    assert!(
        levels.contains("3 at once:")
            && levels.contains("(no interval from only 1 batch; at least 3 are needed)")
            && !levels.contains("95% interval"),
        "{levels}"
    );
    browser.screenshot("study-desktop-one-batch").await?;
    browser.quit().await
}

#[tokio::test]
async fn a_collector_that_is_away_gets_the_run_later_exactly_once() -> anyhow::Result<()> {
    collector_away(Engine::Chromium).await
}

#[tokio::test]
async fn in_firefox_a_collector_that_is_away_gets_the_run_later_exactly_once() -> anyhow::Result<()>
{
    collector_away(Engine::Firefox).await
}

#[tokio::test]
async fn in_webkit_a_collector_that_is_away_gets_the_run_later_exactly_once() -> anyhow::Result<()>
{
    collector_away(Engine::WebKit).await
}

/// The run is kept in the browser (IndexedDB) while the collector is away, survives a
/// reload, is sent once when the collector is back, and can be deleted from it.
async fn collector_away(engine: Engine) -> anyhow::Result<()> {
    let app = TestServer::start().await?;
    let mut collector = TestServer::collector_that_goes_away().await?;
    let plan = Plan::steady(app.demo_target(FAST), 5);
    let link = app.link(&study(plan, Some(collector.url("/api/v1/runs"))));
    collector.stop().await;

    let browser = Browser::start_engine(engine, DESKTOP).await?;
    let driver = &browser.driver;
    driver.goto(&link).await?;
    browser.consent_and_start().await?;
    let pending = browser
        .wait_for_text("[data-testid=upload-pending]", WAIT, |t| {
            t.contains("waiting to be sent")
        })
        .await?;
    assert!(pending.contains("could not be reached"), "{pending}");
    browser.screenshot("study-desktop-4-collector-away").await?;

    // A new visit (the user reloads, or comes back tomorrow) finds the run kept.
    driver.refresh().await?;
    browser
        .wait_for_count("[data-testid=upload-entry][data-state=pending]", 1, WAIT)
        .await?;
    browser.screenshot("study-desktop-5-kept-for-later").await?;

    collector.resume().await?;
    browser
        .wait_for_count(
            "[data-testid=upload-entry][data-state=sent]",
            1,
            Duration::from_secs(90),
        )
        .await?;
    browser.screenshot("study-desktop-6-delivered").await?;
    assert_eq!(collector.db.count(Table::Runs).await?, 1);
    // Whatever else was offered on the way (a retry, the page going away), one copy.
    driver.refresh().await?;
    browser
        .wait_for_count("[data-testid=upload-entry][data-state=sent]", 1, WAIT)
        .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(collector.db.count(Table::Runs).await?, 1);
    assert_eq!(collector.db.stored_samples().await?, 5);

    // The token that deletes it was made in this browser, whichever copy was stored.
    driver
        .find(By::Css("[data-testid=delete-run]"))
        .await?
        .click()
        .await?;
    browser
        .wait_for_count("[data-testid=upload-entry][data-state=deleted]", 1, WAIT)
        .await?;
    assert_eq!(collector.db.count(Table::Runs).await?, 0);
    assert_eq!(collector.db.stored_samples().await?, 0);
    browser.screenshot("study-desktop-7-deleted").await?;
    browser.quit().await
}

/// Where the browser keeps no IndexedDB (site data blocked, some private modes), the run
/// the user agreed to send is still sent, from memory, and the page says it could not be
/// kept on the device.
#[tokio::test]
async fn without_indexeddb_the_run_is_sent_from_memory_and_the_page_says_so() -> anyhow::Result<()>
{
    let server = TestServer::start().await?;
    let plan = Plan::steady(server.demo_target(FAST), 3);
    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver
        .cdp()
        .send_raw(
            "Page.addScriptToEvaluateOnNewDocument",
            serde_json::json!({
                "source": "Object.defineProperty(window, 'indexedDB', { get: () => undefined });"
            }),
        )
        .await?;
    driver.goto(server.link(&study(plan, None))).await?;
    browser.consent_and_start().await?;
    let problem = browser
        .wait_for_text("[data-testid=save-problem]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(
        problem.contains("could not be kept on this device") && problem.contains("IndexedDB"),
        "{problem}"
    );
    browser
        .wait_for_count("[data-testid=stored-run-link]", 1, WAIT)
        .await?;
    assert_eq!(server.db.count(Table::Runs).await?, 1);
    assert_eq!(server.db.stored_samples().await?, 3);
    let list = driver
        .find(By::Css("[data-testid=uploads]"))
        .await?
        .text()
        .await?;
    assert!(list.contains("not kept on this device"), "{list}");
    browser.screenshot("study-desktop-no-indexeddb").await?;
    browser.quit().await
}

#[tokio::test]
async fn a_broken_link_says_what_is_wrong() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let browser = Browser::start(PHONE).await?;
    let driver = &browser.driver;
    let good = server.link(&study(Plan::steady(server.demo_target(FAST), 3), None));
    // Cut off in the middle, as some apps do to long links.
    driver.goto(&good[..good.len() - 30]).await?;
    let reason = browser
        .wait_for_text("[data-testid=broken-link-reason]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(
        reason.starts_with("The link is damaged") && reason.contains("cut off"),
        "{reason}"
    );
    browser.screenshot("study-phone-broken-link").await?;
    driver.goto(server.url("/run#v7.abc")).await?;
    driver.refresh().await?;
    let reason = browser
        .wait_for_text("[data-testid=broken-link-reason]", WAIT, |t| {
            t.contains("v7")
        })
        .await?;
    assert!(reason.contains("ask for a new link"), "{reason}");
    assert!(
        driver
            .find_all(By::Css("[data-testid=start-button]"))
            .await?
            .is_empty()
    );
    browser.quit().await
}

#[tokio::test]
async fn the_operator_makes_a_link_and_a_token_needs_confirming() -> anyhow::Result<()> {
    operator_makes_a_link(Engine::Chromium).await
}

#[tokio::test]
async fn in_firefox_the_operator_makes_a_link() -> anyhow::Result<()> {
    operator_makes_a_link(Engine::Firefox).await
}

#[tokio::test]
async fn in_webkit_the_operator_makes_a_link() -> anyhow::Result<()> {
    operator_makes_a_link(Engine::WebKit).await
}

/// The compose page makes a link that carries a token only once the token is confirmed as
/// for this benchmark only, and the beta user's page says it carries one.
async fn operator_makes_a_link(engine: Engine) -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let browser = Browser::start_engine(engine, DESKTOP).await?;
    let driver = &browser.driver;
    driver.goto(server.url("/")).await?;
    let token = driver.query(By::Css("[data-testid=token]")).first().await?;
    token.send_keys("bench-only-123").await?;
    driver
        .find(By::Css("[data-testid=make-link]"))
        .await?
        .click()
        .await?;
    let error = browser
        .wait_for_text("[data-testid=compose-error]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(error.contains("benchmark-only token"), "{error}");
    driver
        .find(By::Css("[data-testid=token-confirmed]"))
        .await?
        .click()
        .await?;
    driver
        .find(By::Css("[data-testid=make-link]"))
        .await?
        .click()
        .await?;
    let link = driver
        .query(By::Css("[data-testid=share-link]"))
        .first()
        .await?
        .prop("value")
        .await?
        .unwrap_or_default();
    assert!(link.starts_with(&server.url("/run#v1.")), "{link}");
    // Made on 127.0.0.1, the link opens on this computer only, and the card says so.
    let local = driver
        .find(By::Css("[data-testid=link-local-only]"))
        .await?
        .text()
        .await?;
    assert!(
        local.starts_with("Only this computer can open this link") && local.contains("Deployment"),
        "{local}"
    );
    browser.screenshot("compose-desktop-link").await?;
    // The QR code the page drew reads back, from the browser's own pixels, as the link.
    // From the whole page's screenshot. Not in WebKitGTK: under Xvfb its element
    // screenshots come out black, its window captures ignore scrolling, and a window
    // made as tall as the page is sometimes painted black below the screen's height; there
    // the drawn code is only checked to be there.
    if engine == Engine::WebKit {
        driver
            .find(By::Css("[data-testid=link-qr] svg path"))
            .await?;
    } else {
        let page = std::fs::read(browser.screenshot_path("compose-desktop-link"))?;
        assert_eq!(read_qr(&page), link);
    }
    let download = driver
        .find(By::Css("[data-testid=download-qr]"))
        .await?
        .attr("href")
        .await?
        .unwrap_or_default();
    assert!(
        download.starts_with("data:image/svg+xml;charset=utf-8,%3C%3Fxml"),
        "{download:.80}"
    );

    let fragment = link.split_once('#').map(|(_, f)| f).unwrap_or_default();
    let study = Study::from_fragment(fragment).expect("the page makes valid links");
    assert!(study.carries_token);
    // The link has an id of its own, and the page says where its runs will appear.
    let id = study.study_id.clone().expect("a new link has a study id");
    assert!(firsttoken_core::study_id::is_study_id(&id), "{id}");
    let results = driver
        .find(By::Css("[data-testid=link-results-href]"))
        .await?;
    assert_eq!(
        results.attr("href").await?.unwrap_or_default(),
        server.url(&format!("/results?study={id}"))
    );
    // Making the link again makes another study, with another id.
    driver
        .find(By::Css("[data-testid=make-link]"))
        .await?
        .click()
        .await?;
    let again = browser
        .wait_for_text("[data-testid=link-results]", WAIT, |t| !t.contains(&id))
        .await?;
    assert!(again.contains("/results?study="), "{again}");
    assert_eq!(
        study.plan.targets[0].headers["Authorization"],
        "Bearer bench-only-123"
    );

    driver.goto(&link).await?;
    let notice = browser
        .wait_for_text("[data-testid=token-notice]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(notice.contains("benchmark only"), "{notice}");
    browser.screenshot("study-desktop-token-notice").await?;
    browser.quit().await
}

/// An operator whose endpoint is on another origin: the fresh-connection URL follows the
/// target, the target check shows it reaches the server on a new connection, a
/// protocol without one says what it leaves out, and a URL without {n} in its host name
/// is refused, naming the field.
#[tokio::test]
async fn the_operator_sets_and_checks_a_fresh_connection_url() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let port = server.address.port();
    let browser = Browser::start(DESKTOP).await?;
    let driver = &browser.driver;
    driver.goto(server.url("/")).await?;
    let target = driver
        .query(By::Css("[data-testid=target-url]"))
        .first()
        .await?;
    // Another origin for the page (localhost, not 127.0.0.1), the same server.
    target.clear().await?;
    target
        .send_keys(format!(
            "http://localhost:{port}/v1/chat/completions?first_token_ms=20&itl_ms=2&tokens=4"
        ))
        .await?;
    let fresh = driver.find(By::Css("[data-testid=fresh-url]")).await?;
    assert_eq!(
        fresh.prop("value").await?.unwrap_or_default(),
        format!(
            "http://{{n}}.localhost:{port}/v1/chat/completions?first_token_ms=20&itl_ms=2&tokens=4"
        ),
        "the fresh URL follows a loopback target"
    );
    // The field says what it is for: a wildcard host name, {n}, a new connection.
    let help = driver
        .find(By::XPath(
            "//input[@data-testid='fresh-url']/following-sibling::small",
        ))
        .await?
        .text()
        .await?;
    for words in [
        "wildcard host name",
        "with {n} where a number goes",
        "force a new connection",
        "Empty: new connections are not measured",
    ] {
        assert!(help.contains(words), "{words:?} not in {help:?}");
    }
    driver
        .find(By::Css("[data-testid=check-target]"))
        .await?
        .click()
        .await?;
    let check = browser
        .wait_for_text("[data-testid=check-fresh]", WAIT, |t| {
            t.contains("connection") || t.contains("did not answer")
        })
        .await?;
    assert!(
        check.contains("answered on a new connection (from the client port"),
        "{check}"
    );
    assert_eq!(
        driver
            .find(By::Css("[data-testid=check-fresh]"))
            .await?
            .attr("data-verdict")
            .await?
            .as_deref(),
        Some("pass")
    );
    browser.screenshot("compose-desktop-fresh-check").await?;

    // Without a fresh URL, the quick protocol leaves the fresh phase out, and says so.
    // (WebDriver's clear fires no input event; a person's keys do.)
    fresh.send_keys(Key::Control + "a").await?;
    fresh.send_keys(Key::Backspace).await?;
    let note = browser
        .wait_for_text("[data-testid=left-out]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(
        note.contains("leaves out the requests on new connections"),
        "{note}"
    );
    let link = browser.make_link(WAIT).await?;
    let fragment = link.split_once('#').map(|(_, f)| f).unwrap_or_default();
    let study = Study::from_fragment(fragment).expect("the page makes valid links");
    assert!(
        study
            .plan
            .phases
            .iter()
            .all(|p| p.phase() != firsttoken_core::plan::Phase::Fresh),
        "{:?}",
        study.plan.phases
    );

    // A number in the path does not make a new host name.
    fresh
        .send_keys(format!(
            "http://localhost:{port}/v1/chat/completions?n={{n}}"
        ))
        .await?;
    driver
        .find(By::Css("[data-testid=make-link]"))
        .await?
        .click()
        .await?;
    let error = browser
        .wait_for_text("[data-testid=compose-error]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(
        error.starts_with("Fresh-connection URL:") && error.contains("host name"),
        "{error}"
    );
    browser.quit().await
}

/// Requests to another origin go as the app's own would: one CORS preflight, then the
/// browser's preflight cache (a `no-store` request bypasses that cache and would pay a
/// preflight round trip every time, which the app does not); and over HTTP/2, eight at
/// once share one connection, which the client port shows.
#[tokio::test]
async fn another_origin_costs_one_preflight_and_http2_shares_a_connection() -> anyhow::Result<()> {
    let server = TestServer::start().await?;
    let h2 = TlsServer::start(server.state()).await?;
    let mut target = server.demo_target(FAST);
    target.url = h2.url(&format!("/v1/chat/completions?{FAST}"));
    target.fresh_url = None;
    target.probe_url = None;
    let mut plan = Plan::steady(target, 4);
    plan.phases.push(PhasePlan::Concurrency {
        levels: vec![8],
        requests_per_level: 8,
    });
    plan.multiplexed = true;
    let browser = Browser::start_with(DESKTOP, &[ACCEPT_SELF_SIGNED]).await?;
    let driver = &browser.driver;
    driver.goto(server.link(&study(plan, None))).await?;
    for control in ["consent", "start-button"] {
        browser
            .wait_for_count(&format!("[data-testid={control}]"), 1, WAIT)
            .await?[0]
            .click()
            .await?;
    }
    browser
        .wait_for_count("[data-testid=stored-run-link]", 1, Duration::from_secs(60))
        .await?;
    let record = server.only_record().await?;
    let samples = record["samples"].as_array().expect("samples");
    // 4 steady, the concurrency phase's opening batch of 8 (warm-up), then 8 at once.
    assert_eq!(samples.len(), 20);
    for s in samples {
        assert_eq!(s["error"], serde_json::Value::Null, "{s}");
        assert_eq!(s["conn"]["protocol"], "h2", "{s}");
    }
    assert_eq!(
        h2.preflights.load(std::sync::atomic::Ordering::Relaxed),
        1,
        "the first request's preflight is cached for the rest"
    );
    // The steady requests' connection carries the opening batch and the eight at once.
    for s in &samples[4..] {
        assert_eq!(s["conn"]["new_connection"], false, "{s}");
    }
    browser.quit().await
}
