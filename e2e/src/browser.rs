//! The three engines beta users bring, each through its own WebDriver: headless Chromium
//! through chromedriver, with the flags in the workspace's `webdriver.json` (the same file
//! the wasm-bindgen test runner reads); headless Firefox ESR through geckodriver; and
//! WebKitGTK's MiniBrowser through WebKitWebDriver, on a virtual X display (`xvfb-run`).
//! Every driver is started from the path `cargo xtask` installed it at: a client that
//! looks for one by itself waits forever on a machine without internet.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use base64::Engine as _;
use serde_json::{Value, json};
use thirtyfour::extensions::addons::firefox::FirefoxTools;
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

/// A browser engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    Chromium,
    Firefox,
    WebKit,
}

impl Engine {
    pub const ALL: [Engine; 3] = [Engine::Chromium, Engine::Firefox, Engine::WebKit];

    /// The engine's name in file names and messages.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Chromium => "chromium",
            Engine::Firefox => "firefox",
            Engine::WebKit => "webkit",
        }
    }

    /// Whether the app measures in its worker in this engine: everywhere but WebKit,
    /// which carries a worker's fetches through the page's thread anyway.
    pub fn measures_in_worker(self) -> bool {
        self != Engine::WebKit
    }

    /// The browser family the app records for this engine on this machine.
    pub fn family(self) -> &'static str {
        match self {
            Engine::Chromium => "Chrome",
            Engine::Firefox => "Firefox",
            Engine::WebKit => "WebKitGTK",
        }
    }
}

/// A WebDriver process and one browser session; both end when this is dropped (or sooner
/// with [`Browser::quit`]).
pub struct Browser {
    // Fields drop in order: the session first, while its driver can still end it (a
    // session dropped after its driver waits out thirtyfour's 120 s request timeout),
    // then the driver.
    pub driver: WebDriver,
    pub engine: Engine,
    process: DriverProcess,
    /// Firefox's profile ([`firefox_profile`]) or WebKitGTK's configuration
    /// ([`gtk_config`]), removed once the browser has ended.
    _profile: Option<tempfile::TempDir>,
}

/// A GTK configuration (`XDG_CONFIG_HOME`) under which WebKitGTK's MiniBrowser window can
/// be as narrow as a phone: its toolbar's buttons and address field otherwise hold it at
/// 447 CSS px or more. It styles the browser's own widgets, not the page.
fn gtk_config() -> anyhow::Result<tempfile::TempDir> {
    let config = tempfile::tempdir()?;
    std::fs::create_dir(config.path().join("gtk-3.0"))?;
    std::fs::write(
        config.path().join("gtk-3.0/gtk.css"),
        "* { min-width: 0; padding: 0; margin: 0; }\n",
    )?;
    Ok(config)
}

/// A Firefox profile whose window can be as narrow as a phone: Firefox's own toolbars
/// give its window a minimum width of about 450–500 CSS px, which a style sheet for the
/// browser's chrome (`userChrome.css`, read when the profile allows it) lifts.
fn firefox_profile() -> anyhow::Result<tempfile::TempDir> {
    let profile = tempfile::tempdir()?;
    std::fs::write(
        profile.path().join("user.js"),
        "user_pref(\"toolkit.legacyUserProfileCustomizations.stylesheets\", true);\n",
    )?;
    std::fs::create_dir(profile.path().join("chrome"))?;
    std::fs::write(
        profile.path().join("chrome/userChrome.css"),
        "* { min-width: 0 !important; }\n",
    )?;
    Ok(profile)
}

/// Kills the driver (and, for WebKit, the X server `xvfb-run` started) when dropped.
struct DriverProcess(Child);

impl Drop for DriverProcess {
    fn drop(&mut self) {
        // The driver leads a process group of its own (see `spawn_driver`): end all of it,
        // `xvfb-run`'s X server included. `--` before the negative id matters: without it
        // procps' kill reads `-<id>` as an option, and a stray `-1` would signal every
        // process the user may signal.
        let group = self.0.id();
        if group > 1 {
            let _ = Command::new("kill")
                .args(["-s", "TERM", "--", &format!("-{group}")])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The path in `variable`, or `default`.
fn path_from(variable: &str, default: &str) -> String {
    std::env::var(variable).unwrap_or_else(|_| default.into())
}

/// Starts a driver process, in a process group of its own so that all of it can be ended.
fn spawn_driver(
    program: &str,
    args: &[String],
    env: &[(&str, &Path)],
    hint: &str,
) -> anyhow::Result<DriverProcess> {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    Ok(DriverProcess(command.spawn().with_context(|| {
        format!("cannot start {program}: {hint}")
    })?))
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

    /// The driver's process id: the browser's processes descend from it.
    pub fn driver_pid(&self) -> u32 {
        self.process.0.id()
    }

    /// [`Browser::start`] with more Chromium flags.
    pub async fn start_with(viewport: Viewport, flags: &[&str]) -> anyhow::Result<Self> {
        let port = free_port()?;
        let chromedriver = path_from("CHROMEDRIVER", "/usr/bin/chromedriver");
        // Killed on the way out, even when no session opens.
        let process = spawn_driver(
            &chromedriver,
            &[format!("--port={port}")],
            &[],
            "`cargo xtask test` installs chromium-driver",
        )?;
        let browser = Self {
            driver: connect(port, chromium_capabilities(viewport, flags)?).await?,
            engine: Engine::Chromium,
            process,
            _profile: None,
        };
        browser.emulate(viewport).await?;
        Ok(browser)
    }

    /// Opens `engine` sized to `viewport`: Chromium as [`Browser::start`] does, Firefox
    /// headless, WebKitGTK's MiniBrowser on a virtual display. Firefox and WebKit have no
    /// device emulation: their window is sized to the viewport instead, and a phone
    /// viewport is a narrow window, not a touch device.
    pub async fn start_engine(engine: Engine, viewport: Viewport) -> anyhow::Result<Self> {
        let port = free_port()?;
        let (process, capabilities, profile) = match engine {
            Engine::Chromium => return Self::start(viewport).await,
            Engine::Firefox => {
                let geckodriver = path_from("GECKODRIVER", "/root/.cargo/bin/geckodriver");
                let process = spawn_driver(
                    &geckodriver,
                    &[format!("--port={port}"), "--host=127.0.0.1".into()],
                    &[],
                    "`cargo xtask test` installs it with cargo install geckodriver",
                )?;
                let mut caps = DesiredCapabilities::firefox();
                caps.set_firefox_binary(&path_from("FIREFOX", "/usr/bin/firefox-esr"))?;
                caps.add_arg("-headless")?;
                let profile = firefox_profile()?;
                caps.add_arg("-profile")?;
                caps.add_arg(&profile.path().display().to_string())?;
                caps.add_arg(&format!("--width={}", viewport.width))?;
                caps.add_arg(&format!("--height={}", viewport.height))?;
                (process, Capabilities::from(caps), profile)
            }
            Engine::WebKit => {
                let webkit_driver = path_from("WEBKIT_DRIVER", "/usr/bin/WebKitWebDriver");
                let config = gtk_config()?;
                let process = spawn_driver(
                    &path_from("XVFB_RUN", "/usr/bin/xvfb-run"),
                    &[
                        "-a".into(),
                        "-s".into(),
                        "-screen 0 1920x1200x24".into(),
                        webkit_driver,
                        format!("--port={port}"),
                    ],
                    &[("XDG_CONFIG_HOME", config.path())],
                    "`cargo xtask test` installs xvfb and webkit2gtk-driver",
                )?;
                let mut caps = Capabilities::new();
                caps.set("browserName", "MiniBrowser")?;
                caps.set(
                    "webkitgtk:browserOptions",
                    json!({
                        "binary": path_from(
                            "MINIBROWSER",
                            "/usr/lib/x86_64-linux-gnu/webkit2gtk-4.1/MiniBrowser"
                        ),
                        "args": ["--automation"],
                    }),
                )?;
                (process, caps, config)
            }
        };
        let browser = Self {
            driver: connect(port, capabilities).await?,
            engine,
            process,
            _profile: Some(profile),
        };
        browser.fit_window(viewport).await?;
        Ok(browser)
    }

    /// Sizes a Firefox or WebKit window so that the page inside it is `viewport`, as near
    /// as the engine's smallest window allows: the window is set, the page's own size
    /// read, and the window corrected by the difference (its toolbars). Both windows can
    /// be a phone's width: Firefox's profile ([`firefox_profile`]) and MiniBrowser's GTK
    /// style ([`gtk_config`]) lift their toolbars' minimum widths.
    async fn fit_window(&self, viewport: Viewport) -> anyhow::Result<()> {
        let (mut width, mut height) = (viewport.width, viewport.height);
        for _ in 0..3 {
            self.driver.set_window_rect(0, 0, width, height).await?;
            let inner = self
                .driver
                .execute("return [window.innerWidth, window.innerHeight]", Vec::new())
                .await?;
            let inner: Vec<i64> = inner.convert()?;
            let (dw, dh) = (
                i64::from(viewport.width) - inner[0],
                i64::from(viewport.height) - inner[1],
            );
            if dw == 0 && dh == 0 {
                break;
            }
            width = (i64::from(width) + dw).max(1) as u32;
            height = (i64::from(height) + dh).max(1) as u32;
        }
        Ok(())
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

    /// Saves a screenshot in dark mode as `{name}-dark`, and goes back to light. Chromium
    /// only: the others cannot switch the colour scheme of a running page, so they take
    /// none.
    pub async fn screenshot_dark(&self, name: &str) -> anyhow::Result<()> {
        if self.engine != Engine::Chromium {
            return Ok(());
        }
        self.dark(true).await?;
        let shot = self.screenshot(&format!("{name}-dark")).await;
        self.dark(false).await?;
        shot
    }

    /// Ticks the consent box once the page has mounted, and presses Start.
    pub async fn consent_and_start(&self) -> anyhow::Result<()> {
        self.driver
            .query(By::Css("[data-testid=consent]"))
            .first()
            .await?
            .click()
            .await?;
        self.driver
            .find(By::Css("[data-testid=start-button]"))
            .await?
            .click()
            .await?;
        Ok(())
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

    /// Waits until the text of `selector` starts with `prefix`, and returns it, without
    /// polling: one script watches the element from inside the page and answers once.
    /// [`Browser::wait_for_text`] asks the browser twice every 50 ms, and each question
    /// takes the page's main thread, the browser's and the driver's: a benchmark that
    /// polls measures its own questions (`engine_bias` did: 1,373 DevTools messages on the
    /// page during one block). The script may run as long as the session's script timeout.
    pub async fn wait_for_text_quietly(
        &self,
        selector: &str,
        prefix: &str,
    ) -> anyhow::Result<String> {
        const WATCH: &str = r#"
const [selector, prefix, done] = arguments;
const settled = () => {
  const element = document.querySelector(selector);
  const text = element ? element.textContent : '';
  if (!text.startsWith(prefix)) return false;
  done(text);
  return true;
};
if (!settled()) {
  const observer = new MutationObserver(() => { if (settled()) observer.disconnect(); });
  observer.observe(document.body, {subtree: true, childList: true, characterData: true});
}
"#;
        let text = self
            .driver
            .execute_async(WATCH, vec![json!(selector), json!(prefix)])
            .await
            .with_context(|| {
                format!("waiting for the text of {selector} to start with {prefix:?}")
            })?;
        text.json()
            .as_str()
            .map(str::to_owned)
            .with_context(|| format!("the text of {selector}, not {}", text.json()))
    }

    /// Saves a screenshot of the whole page as `target/e2e-screenshots/{name}.png`
    /// (Chromium; the other engines save what the window shows, and their name goes in
    /// the file name: `{name}-firefox.png`).
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<()> {
        // Chromium paints scrolled overflow regions blank in a beyond-viewport capture
        // once the page itself has scrolled, so capture from the top.
        self.driver
            .execute("window.scrollTo(0, 0)", Vec::new())
            .await?;
        std::fs::create_dir_all(screenshot_dir())?;
        let path = self.screenshot_path(name);
        let other = |png: Vec<u8>| std::fs::write(&path, png);
        match self.engine {
            Engine::Chromium => {}
            Engine::Firefox => {
                let tools = FirefoxTools::new(self.driver.handle().clone());
                other(tools.full_screenshot_as_png().await?)?;
                return Ok(());
            }
            Engine::WebKit => {
                // No full-page capture: make the window as tall as the page (same width,
                // so the same layout), capture, and size it back.
                let rect = self.driver.get_window_rect().await?;
                let number = |script: &'static str| async move {
                    let value = self.driver.execute(script, Vec::new()).await?;
                    anyhow::Ok(value.json().as_i64())
                };
                let page = number("return document.documentElement.scrollHeight")
                    .await?
                    .unwrap_or(rect.height)
                    .clamp(1, 6000);
                let inner = number("return window.innerHeight")
                    .await?
                    .unwrap_or(rect.height);
                let chrome = (rect.height - inner).max(0);
                self.driver
                    .set_window_rect(rect.x, rect.y, rect.width as u32, (page + chrome) as u32)
                    .await?;
                // Captured at once, the newly exposed part of the window can still be
                // unpainted (black): wait for the page to see its new height, then a
                // moment for the paint.
                for _ in 0..20 {
                    if number("return window.innerHeight").await?.unwrap_or(page) >= page {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
                let png = self.driver.screenshot_as_png().await;
                self.driver
                    .set_window_rect(rect.x, rect.y, rect.width as u32, rect.height as u32)
                    .await?;
                other(png?)?;
                return Ok(());
            }
        }
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
        std::fs::write(path, png)?;
        Ok(())
    }

    /// Where [`Self::screenshot`] puts the picture called `name`: Chromium's without a
    /// suffix, the other engines' with their name.
    pub fn screenshot_path(&self, name: &str) -> std::path::PathBuf {
        screenshot_dir().join(match self.engine {
            Engine::Chromium => format!("{name}.png"),
            other => format!("{name}-{}.png", other.name()),
        })
    }

    /// Ends the session and its driver.
    pub async fn quit(self) -> anyhow::Result<()> {
        let Self {
            driver, process, ..
        } = self;
        let result = driver.quit().await;
        drop(process);
        result.map_err(Into::into)
    }
}

/// Opens a session, retrying while the driver is still starting.
async fn connect(port: u16, capabilities: Capabilities) -> anyhow::Result<WebDriver> {
    let start = Instant::now();
    loop {
        match WebDriver::new(format!("http://127.0.0.1:{port}"), capabilities.clone()).await {
            Ok(driver) => return Ok(driver),
            Err(_) if start.elapsed() < Duration::from_secs(30) => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).context("the WebDriver did not open a browser session"),
        }
    }
}

/// Chromium's binary and flags from `webdriver.json`, and the window size.
fn chromium_capabilities(viewport: Viewport, flags: &[&str]) -> anyhow::Result<Capabilities> {
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
    Ok(caps.into())
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
