//! firsttoken on the operator's own origin: the built app and its API under a path prefix
//! (`--base-path /firsttoken`) behind a real nginx from Debian's packages (`cargo xtask
//! test` installs it and names it in `NGINX_BIN`; each test starts it on a free loopback port
//! with the book's own block, `firsttoken_e2e::nginx`). A beta
//! user opens the link through the proxy, measures the demo (now on the page's own origin:
//! no CORS preflight, and the page's cookies when the study asks) and uploads.

use std::time::Duration;

use anyhow::Context;
use firsttoken_e2e::TestServer;
use firsttoken_e2e::browser::{Browser, DESKTOP};
use firsttoken_e2e::nginx::{BASE, Nginx, NginxConfig, free_port};
use thirtyfour::prelude::*;

const WAIT: Duration = Duration::from_secs(60);
/// A fast demo answer, so 50 requests take a few seconds.
const FAST: &str = "first_token_ms=40&itl_ms=2&tokens=8";
/// Requests per run: the closing note's "median of 50".
const REQUESTS: usize = 50;

/// Makes a Steady link on the operator's page at `page` (under the prefix) for the demo
/// there, with the page's cookies sent when `cookies`, and returns the link.
async fn make_link(browser: &Browser, page: &str, cookies: bool) -> anyhow::Result<String> {
    let driver = &browser.driver;
    driver.goto(page).await?;
    let target = browser
        .wait_for_count("[data-testid=target-url]", 1, WAIT)
        .await?
        .remove(0);
    let demo = format!("{}{BASE}/v1/chat/completions", page_origin(page));
    assert_eq!(
        target.prop("value").await?.unwrap_or_default(),
        demo,
        "the demo is offered under the prefix"
    );
    target.send_keys(Key::Control + "a").await?;
    target.send_keys(format!("{demo}?{FAST}")).await?;
    driver
        .find(By::Css("[data-testid=protocol] option[value=steady]"))
        .await?
        .click()
        .await?;
    let count = browser
        .wait_for_count("[data-testid=request-count]", 1, WAIT)
        .await?
        .remove(0);
    count.send_keys(Key::Control + "a").await?;
    count.send_keys(REQUESTS.to_string()).await?;
    if cookies {
        driver
            .find(By::Css("[data-testid=send-cookies]"))
            .await?
            .click()
            .await?;
        // Only a link the operator signs sends cookies.
        driver
            .find(By::Css("[data-testid=admin-token]"))
            .await?
            .send_keys(firsttoken_e2e::ADMIN_TOKEN)
            .await?;
    }
    let link = browser.make_link(WAIT).await?;
    let signed = driver
        .find(By::Css("[data-testid=link-signed]"))
        .await?
        .attr("data-signed")
        .await?;
    assert_eq!(
        signed.as_deref(),
        Some(if cookies { "true" } else { "false" })
    );
    assert!(
        link.starts_with(&format!("{}{BASE}/run#", page_origin(page))),
        "{link}"
    );
    let results = driver
        .find(By::Css("[data-testid=link-results-href]"))
        .await?
        .attr("href")
        .await?
        .unwrap_or_default();
    assert!(
        results.starts_with(&format!("{}{BASE}/results?study=", page_origin(page))),
        "{results}"
    );
    Ok(link)
}

fn page_origin(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    url[after_scheme..]
        .find('/')
        .map_or(url, |i| &url[..after_scheme + i])
}

/// The operator's site: the app under [`BASE`] behind nginx on a port chosen first, so
/// the server can let signed links send cookies to everything under the prefix there.
async fn operators_site(trust_forwarded_for: bool) -> anyhow::Result<(TestServer, Nginx)> {
    let port = free_port()?;
    let server = TestServer::start_with(|c| {
        c.base_path = BASE.into();
        c.trust_forwarded_for = trust_forwarded_for;
        c.cookie_target_prefixes = vec![format!("http://127.0.0.1:{port}{BASE}/")];
    })
    .await?;
    let nginx = Nginx::start(&NginxConfig {
        port: Some(port),
        ..NginxConfig::plain(server.address)
    })?;
    Ok((server, nginx))
}

/// Opens `link`, runs it and waits for the upload; returns the stored-run link.
async fn run_and_upload(browser: &Browser, link: &str) -> anyhow::Result<String> {
    browser.driver.goto(link).await?;
    browser.consent_and_start().await?;
    let stored = browser
        .wait_for_count("[data-testid=stored-run-link]", 1, Duration::from_secs(120))
        .await?[0]
        .attr("href")
        .await?
        .unwrap_or_default();
    Ok(stored)
}

/// The median TTFT of a stored record's samples.
fn median_ttft(record: &serde_json::Value) -> f64 {
    let mut ttft: Vec<f64> = record["samples"]
        .as_array()
        .map(|samples| {
            samples
                .iter()
                .filter_map(|s| s["ttft_ms"].as_f64())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(ttft.len(), REQUESTS, "every request has its TTFT");
    ttft.sort_by(f64::total_cmp);
    (ttft[REQUESTS / 2 - 1] + ttft[REQUESTS / 2]) / 2.0
}

/// Through nginx under `/firsttoken`: the operator's page offers the demo, the link and the
/// results page under the prefix; a beta user's run measures the demo same-origin (no
/// preflight), sends the page's cookie when the study asks (nginx's log shows it), and
/// uploads. The same study run without the proxy gives the closing note's comparison.
#[tokio::test]
async fn behind_nginx_under_a_prefix_a_beta_user_measures_and_uploads() -> anyhow::Result<()> {
    let (server, nginx) = operators_site(true).await?;
    let browser = Browser::start(DESKTOP).await?;

    // Nothing outside the prefix is firsttoken's (nginx answers 404 itself).
    assert_eq!(
        http_status(nginx.port(), "/v1/chat/completions").await?,
        404
    );
    assert_eq!(
        http_status(nginx.port(), &format!("{BASE}/api/v1/ping")).await?,
        200
    );

    let proxied = nginx.url(&format!("{BASE}/"));
    let link = make_link(&browser, &proxied, true).await?;
    // The user's signed-in session with the app: a cookie of the proxy's origin.
    browser
        .driver
        .goto(nginx.url(&format!("{BASE}/results")))
        .await?;
    browser
        .driver
        .execute(
            "document.cookie = 'session=beta-user-7; path=/';",
            Vec::new(),
        )
        .await?;
    browser.driver.goto(&link).await?;
    let notice = browser
        .wait_for_text("[data-testid=session-notice]", WAIT, |t| !t.is_empty())
        .await?;
    assert!(
        notice.contains(&format!(
            "signed-in session with 127.0.0.1:{}",
            nginx.port()
        )),
        "{notice}"
    );
    let provenance = browser
        .wait_for_text("[data-testid=provenance]", WAIT, |t| {
            t.starts_with("Made by")
        })
        .await?;
    assert!(
        provenance.starts_with(&format!(
            "Made by the operator of 127.0.0.1:{}",
            nginx.port()
        )),
        "{provenance}"
    );
    assert!(
        notice.contains(&format!(
            "http://127.0.0.1:{}{BASE}/v1/chat/completions",
            nginx.port()
        )),
        "the full URL the cookies go to: {notice}"
    );
    browser.screenshot("study-session-notice").await?;
    let stored = run_and_upload(&browser, &link).await?;
    assert!(
        stored.starts_with(&nginx.url(&format!("{BASE}/api/v1/runs/"))),
        "{stored}"
    );
    let through_proxy = server.only_record().await?;
    for s in through_proxy["samples"].as_array().expect("samples") {
        assert_eq!(s["error"], serde_json::Value::Null, "{s}");
        // Same origin, no preflight: Resource Timing proves each request reused the
        // page's connection to nginx. The demo behind nginx reports the port of nginx's
        // upstream socket, new for every request, which once read every one as new.
        assert_eq!(s["conn"]["new_connection"], false, "{s}");
    }
    // Switched off at the first request: Resource Timing proved it reused a connection
    // while the port was one never seen (or, without that proof, at the second: a new
    // port back to back).
    let off = &through_proxy["engine"]["client_port_off"];
    assert!(
        off == "contradicted" || off == "changed",
        "the port nginx's upstream socket gives is not the browser's: {}",
        through_proxy["engine"]
    );
    // Every measured request went through nginx with the cookie.
    let log = std::fs::read_to_string(nginx.access_log())?;
    let demo_requests: Vec<&str> = log
        .lines()
        .filter(|l| l.starts_with(&format!("POST {BASE}/v1/chat/completions")))
        .collect();
    assert_eq!(demo_requests.len(), REQUESTS, "{log}");
    assert!(
        demo_requests
            .iter()
            .all(|l| l.contains("session=beta-user-7")),
        "{log}"
    );
    // The collector's requests carry no cookie (nginx writes an empty one as `-`).
    assert!(
        log.lines()
            .filter(|l| l.contains("/api/v1/runs"))
            .all(|l| l.contains(" cookie=[-] ")),
        "{log}"
    );

    // The same measurement without the proxy, for the comparison.
    let direct = server.url(&format!("{BASE}/"));
    let link = make_link(&browser, &direct, false).await?;
    run_and_upload(&browser, &link).await?;
    let records = server.records().await?;
    let direct_record = records
        .iter()
        .find(|r| r["run_id"] != through_proxy["run_id"])
        .context("the direct run")?;
    eprintln!(
        "demo TTFT median of {REQUESTS} ({FAST}): through nginx {:.2} ms, direct {:.2} ms",
        median_ttft(&through_proxy),
        median_ttft(direct_record)
    );
    browser.quit().await
}

/// Anyone can make a link; one that asks for the user's cookies on the operator's own
/// origin (the confused deputy: any path, any body, the session's cookie) is refused
/// unless the operator signed it, and no request leaves the page. A signed link with one
/// URL changed loses its signature, and is refused the same way.
#[tokio::test]
async fn a_link_the_operator_did_not_sign_never_sends_the_users_cookies() -> anyhow::Result<()> {
    let (server, nginx) = operators_site(false).await?;
    let browser = Browser::start(DESKTOP).await?;
    // The signed-in user's session on the operator's site.
    browser
        .driver
        .goto(nginx.url(&format!("{BASE}/results")))
        .await?;
    browser
        .driver
        .execute(
            "document.cookie = 'session=beta-user-7; path=/';",
            Vec::new(),
        )
        .await?;
    // A stranger's link: a cookie-protected settings endpoint of the operator's site.
    let mut target = server.demo_target("tokens=2");
    target.url = nginx.url(&format!("{BASE}/api/account/email"));
    target.probe_url = None;
    target.fresh_url = None;
    target.send_cookies = true;
    let study = firsttoken_core::share::Study {
        title: "Quick latency check".into(),
        plan: firsttoken_core::plan::Plan::steady(target, 3),
        collector: Some("http://127.0.0.1:9/api/v1/runs".into()),
        carries_token: false,
        study_id: None,
    };
    let page = nginx.url(&format!("{BASE}/run#"));
    let unsigned = format!("{page}{}", study.to_fragment());
    // The same study under a signature the operator made for another one.
    let mut signed_other = study.clone();
    signed_other.plan.targets[0].url = nginx.url(&format!("{BASE}/v1/chat/completions"));
    let other = server.signed_link(&signed_other).await?;
    let (_, signature) = other.rsplit_once('.').context("signed")?;
    let borrowed = format!("{unsigned}.{signature}");
    for (link, why) in [
        (&unsigned, "(no signature)"),
        (&borrowed, "a signature that is not this site's"),
    ] {
        browser.driver.goto(link).await?;
        // A new hash only: the page reloads itself for it.
        browser.driver.refresh().await?;
        let reason = browser
            .wait_for_text("[data-testid=broken-link-reason]", WAIT, |t| !t.is_empty())
            .await?;
        assert!(
            reason.contains("asks to send your cookies") && reason.contains(why),
            "{reason}"
        );
        assert!(
            browser
                .driver
                .find_all(By::Css("[data-testid=start-button]"))
                .await?
                .is_empty()
        );
    }
    browser.screenshot("study-unsigned-cookies-refused").await?;
    let log = std::fs::read_to_string(nginx.access_log())?;
    assert!(
        !log.contains("/api/account/email"),
        "no request reached the settings endpoint: {log}"
    );
    browser.quit().await
}

/// The book's location block passes an upload as large as the collector takes: nginx's own
/// limit is 1 MiB, and without the block's `client_max_body_size` nginx answered `413` to
/// the longest runs before the collector saw them. A 2 MiB body that is not a run reaches
/// the collector, which says what is wrong with it.
#[tokio::test]
async fn behind_nginx_a_large_upload_reaches_the_collector() -> anyhow::Result<()> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (_server, nginx) = operators_site(true).await?;
    let body = format!("[{}0]", "0,".repeat(1024 * 1024));
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", nginx.port())).await?;
    let head = format!(
        "POST {BASE}/api/v1/runs HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    let status = answer.split(' ').nth(1).unwrap_or_default();
    assert_eq!(status, "422", "{answer}");
    assert!(
        answer.contains("\"error\""),
        "the collector's own answer: {answer}"
    );
    Ok(())
}

/// The status of a GET, from a plain HTTP/1.0 client (not the browser). Async: the
/// firsttoken server behind nginx runs on this test's own runtime.
async fn http_status(port: u16, path: &str) -> anyhow::Result<u16> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await?;
    let mut head = String::new();
    stream.read_to_string(&mut head).await?;
    head.split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .with_context(|| format!("not an HTTP response: {head:?}"))
}

/// Over a fiber link (10 ms round trip), nginx ending TLS 1.3 in front of the app with
/// the book's block: the target check says whether the client port the target reports is
/// the browser's. nginx reporting `$remote_port` itself (the book's lines) passes; the
/// app's own port behind nginx, from a new upstream connection per request (the book's block
/// as written) or from a shared pool of them, warns with the reason and names the fix.
/// A pool reuses one upstream connection for back-to-back requests, so only the fresh host
/// names (new browser connections on a port already seen) show it.
#[tokio::test]
async fn behind_nginx_over_a_link_the_check_says_whether_the_client_port_is_the_browsers()
-> anyhow::Result<()> {
    use firsttoken_e2e::link::{Link, Profile};
    use firsttoken_e2e::target::{FieldTarget, PortHeader, TargetConfig};

    use crate::target_check::{check, fill, verdict};

    let server = TestServer::start().await?;
    for (pool, client_port, port_header, expected, says) in [
        (None, true, PortHeader::Absent, "pass", "came from port"),
        (None, false, PortHeader::Peer, "warn", "a proxy's"),
        (Some(4), false, PortHeader::Peer, "warn", "a proxy's"),
    ] {
        let case = format!("pool {pool:?}, port from nginx {client_port}");
        let target = FieldTarget::start(
            server.state_under(BASE),
            TargetConfig {
                tls: None,
                http2: false,
                port_header,
                ..TargetConfig::default()
            },
        )
        .await?;
        let nginx = Nginx::start(&NginxConfig {
            pool,
            client_port,
            ..NginxConfig::ending_tls_for(&target)
        })?;
        let link = Link::start(nginx.address(), Profile::FIBER).await?;
        let flags = [target.spki_flag(), FieldTarget::resolver_flag("*.test")];
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let browser = Browser::start_with(DESKTOP, &flags).await?;
        browser.driver.goto(server.url("/")).await?;
        let port = link.address().port();
        let path = format!("{BASE}/v1/chat/completions?{FAST}");
        fill(
            &browser,
            "fresh-url",
            &format!("https://{{n}}.fresh.test:{port}{path}"),
        )
        .await?;
        let list = check(&browser, &format!("https://target.test:{port}{path}"), None).await?;
        browser.quit().await?;
        let line = verdict(&list, "client_port");
        assert_eq!(line.verdict, expected, "{case}: {list:#?}");
        assert!(line.text.contains(says), "{case}: {list:#?}");
        if expected == "warn" {
            assert!(line.text.contains("$remote_port"), "{case}: {list:#?}");
        }
        // Resource Timing still tells the fresh host names' connections new: the port
        // never overrides it.
        assert_eq!(verdict(&list, "fresh").verdict, "pass", "{case}: {list:#?}");
    }
    Ok(())
}
