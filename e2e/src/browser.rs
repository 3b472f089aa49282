//! Headless Chromium through chromedriver, with the flags in the workspace's
//! `webdriver.json` (the same file the wasm-bindgen test runner reads).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine;
use serde_json::{Value, json};
use thirtyfour::prelude::*;

use crate::{screenshot_dir, workspace_root};

/// A viewport the tests look at the page in.
#[derive(Debug, Clone, Copy)]
pub struct Viewport {
    pub name: &'static str,
    pub width: u32,
    pub height: u32,
    pub mobile: bool,
}

pub const DESKTOP: Viewport = Viewport {
    name: "desktop",
    width: 1280,
    height: 900,
    mobile: false,
};

pub const PHONE: Viewport = Viewport {
    name: "phone",
    width: 360,
    height: 740,
    mobile: true,
};

/// A chromedriver process and one browser session; both end when this is dropped (or
/// sooner with [`Browser::quit`]).
pub struct Browser {
    // Fields drop in order: the session first, while chromedriver can still end it (a
    // session dropped after its chromedriver waits out thirtyfour's 120 s request timeout),
    // then chromedriver.
    pub driver: WebDriver,
    chromedriver: Chromedriver,
}

/// Kills chromedriver when dropped.
struct Chromedriver(Child);

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser").finish_non_exhaustive()
    }
}

impl Browser {
    /// Starts chromedriver on a free port and opens headless Chromium sized to `viewport`.
    pub async fn start(viewport: Viewport) -> anyhow::Result<Self> {
        Self::start_with(viewport, &[]).await
    }

    /// [`Browser::start`] with more Chromium flags.
    pub async fn start_with(viewport: Viewport, flags: &[&str]) -> anyhow::Result<Self> {
        let port = free_port()?;
        let chromedriver_path =
            std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into());
        // Killed on the way out, even when no session opens.
        let chromedriver = Chromedriver(
            Command::new(&chromedriver_path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| {
                format!(
                    "cannot start {chromedriver_path}: `cargo xtask test` installs chromium-driver"
                )
            })?,
        );
        let browser = Self {
            driver: connect(port, viewport, flags).await?,
            chromedriver,
        };
        browser.emulate(viewport).await?;
        Ok(browser)
    }

    /// Sets the page's viewport exactly (a window size would include browser chrome).
    async fn emulate(&self, viewport: Viewport) -> anyhow::Result<()> {
        self.driver
            .cdp()
            .send_raw(
                "Emulation.setDeviceMetricsOverride",
                json!({
                    "width": viewport.width,
                    "height": viewport.height,
                    "deviceScaleFactor": 1,
                    "mobile": viewport.mobile,
                }),
            )
            .await?;
        Ok(())
    }

    /// Shows the page as with the system in dark mode (`prefers-color-scheme: dark`), or
    /// light again.
    pub async fn dark(&self, dark: bool) -> anyhow::Result<()> {
        self.driver
            .cdp()
            .send_raw(
                "Emulation.setEmulatedMedia",
                json!({
                    "features": [{
                        "name": "prefers-color-scheme",
                        "value": if dark { "dark" } else { "light" },
                    }],
                }),
            )
            .await?;
        Ok(())
    }

    /// Saves a screenshot in dark mode as `{name}-dark`, and goes back to light.
    pub async fn screenshot_dark(&self, name: &str) -> anyhow::Result<()> {
        self.dark(true).await?;
        let shot = self.screenshot(&format!("{name}-dark")).await;
        self.dark(false).await?;
        shot
    }

    /// Waits until `selector` matches at least `count` elements and returns them.
    pub async fn wait_for_count(
        &self,
        selector: &str,
        count: usize,
        timeout: Duration,
    ) -> anyhow::Result<Vec<WebElement>> {
        let start = Instant::now();
        loop {
            let found = self.driver.find_all(By::Css(selector)).await?;
            if found.len() >= count {
                return Ok(found);
            }
            if start.elapsed() > timeout {
                bail!(
                    "waited {timeout:?} for {count} × {selector}, found {}",
                    found.len()
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the text of `selector` satisfies `done`, and returns it.
    pub async fn wait_for_text(
        &self,
        selector: &str,
        timeout: Duration,
        done: impl Fn(&str) -> bool,
    ) -> anyhow::Result<String> {
        let start = Instant::now();
        loop {
            let text = match self.driver.find(By::Css(selector)).await {
                Ok(element) => element.text().await.unwrap_or_default(),
                Err(_) => String::new(),
            };
            if done(&text) {
                return Ok(text);
            }
            if start.elapsed() > timeout {
                bail!("waited {timeout:?} for the text of {selector}; it is {text:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Saves a screenshot of the whole page as `target/e2e-screenshots/{name}.png`.
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<()> {
        // Chromium paints scrolled overflow regions blank in a beyond-viewport capture
        // once the page itself has scrolled, so capture from the top.
        self.driver
            .execute("window.scrollTo(0, 0)", Vec::new())
            .await?;
        let shot = self
            .driver
            .cdp()
            .send_raw(
                "Page.captureScreenshot",
                json!({ "format": "png", "captureBeyondViewport": true }),
            )
            .await?;
        let data = shot["data"].as_str().context("no screenshot data")?;
        let png = base64::engine::general_purpose::STANDARD.decode(data)?;
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{name}.png")), png)?;
        Ok(())
    }

    /// Ends the session and chromedriver.
    pub async fn quit(self) -> anyhow::Result<()> {
        let Self {
            driver,
            chromedriver,
        } = self;
        let result = driver.quit().await;
        drop(chromedriver);
        result.map_err(Into::into)
    }
}

/// Opens a session, retrying while chromedriver is still starting.
async fn connect(port: u16, viewport: Viewport, flags: &[&str]) -> anyhow::Result<WebDriver> {
    let options = webdriver_options()?;
    let mut caps = DesiredCapabilities::chrome();
    if let Some(binary) = options["binary"].as_str() {
        caps.set_binary(binary)?;
    }
    for arg in options["args"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
    {
        caps.add_arg(arg)?;
    }
    for flag in flags {
        caps.add_arg(flag)?;
    }
    caps.add_arg(&format!(
        "--window-size={},{}",
        viewport.width, viewport.height
    ))?;
    let start = Instant::now();
    loop {
        match WebDriver::new(format!("http://127.0.0.1:{port}"), caps.clone()).await {
            Ok(driver) => return Ok(driver),
            Err(_) if start.elapsed() < Duration::from_secs(20) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => return Err(e).context("chromedriver did not open a Chromium session"),
        }
    }
}

/// The Chromium binary and flags from `webdriver.json`.
fn webdriver_options() -> anyhow::Result<Value> {
    let path = workspace_root().join("webdriver.json");
    let file: Value = serde_json::from_slice(
        &std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?,
    )?;
    Ok(file["goog:chromeOptions"].clone())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}
