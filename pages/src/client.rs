//! A coarse description of the browser from its user-agent string: family, major
//! version, OS family, mobile or not. The full string never leaves the browser; only this
//! does (ARCHITECTURE.md, "What may leave the browser").

/// Browser family, major version, OS family and whether it is a phone or tablet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClientDescription {
    pub browser: Option<&'static str>,
    pub browser_major: Option<u32>,
    pub os: Option<&'static str>,
    pub mobile: bool,
}

/// Describes a user agent coarsely. Unknown browsers and systems give `None`, never a
/// guess.
///
/// Every browser on iOS is WebKit underneath, whatever its name: Chrome (`CriOS`),
/// Firefox (`FxiOS`) and Edge (`EdgiOS`) there are named as users know them, and the OS
/// says iOS. Safari's `Version/` token is believed only on Apple systems: WebKitGTK and
/// WPE on Linux copy Safari's string (their `Version/` is not their own release), so they
/// are named for what they are and their version is absent. An iPad asking for desktop
/// pages (the default since iPadOS 13) sends macOS Safari's string and is counted as such.
pub fn describe(user_agent: &str) -> ClientDescription {
    let os = os_family(user_agent);
    let (browser, browser_major) = browser_family(user_agent, os);
    let mobile = user_agent.contains("Mobi") || matches!(os, Some("iOS") | Some("Android"));
    ClientDescription {
        browser,
        browser_major,
        os,
        mobile,
    }
}

fn os_family(user_agent: &str) -> Option<&'static str> {
    if user_agent.contains("Android") {
        Some("Android")
    } else if ["iPhone", "iPad", "iPod"]
        .iter()
        .any(|d| user_agent.contains(d))
    {
        Some("iOS")
    } else if user_agent.contains("CrOS") {
        Some("ChromeOS")
    } else if user_agent.contains("Windows") {
        Some("Windows")
    } else if user_agent.contains("Mac OS X") || user_agent.contains("Macintosh") {
        Some("macOS")
    } else if user_agent.contains("Linux") || user_agent.contains("X11") {
        Some("Linux")
    } else {
        None
    }
}

fn browser_family(user_agent: &str, os: Option<&str>) -> (Option<&'static str>, Option<u32>) {
    // Order matters: Edge, Opera and Samsung Internet also say "Chrome", Chrome also
    // says "Safari", and the iOS browsers say "Safari" and sometimes "Version/".
    const BROWSERS: [(&str, &str); 10] = [
        ("Edg/", "Edge"),
        ("EdgA/", "Edge"),
        ("EdgiOS/", "Edge"),
        ("OPR/", "Opera"),
        ("SamsungBrowser/", "Samsung Internet"),
        ("Firefox/", "Firefox"),
        ("FxiOS/", "Firefox"),
        ("CriOS/", "Chrome"),
        ("Chrome/", "Chrome"),
        ("Version/", "Safari"),
    ];
    let apple = matches!(os, Some("macOS") | Some("iOS"));
    let found = BROWSERS.iter().find_map(|(token, family)| {
        let at = user_agent.find(token)?;
        if *family == "Safari" && !(apple && user_agent.contains("Safari/")) {
            return None;
        }
        Some((Some(*family), major_after(&user_agent[at + token.len()..])))
    });
    if let Some(found) = found {
        return found;
    }
    if user_agent.contains("AppleWebKit/") && os == Some("Linux") {
        // WebKit on Linux: WPE says so; WebKitGTK does not name itself.
        let family = if user_agent.contains("WPE") {
            "WPE WebKit"
        } else {
            "WebKitGTK"
        };
        return (Some(family), None);
    }
    (None, None)
}

/// The engine that renders the page, which decides how it measures best.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RenderingEngine {
    /// Chrome, Edge, Opera, Samsung Internet and the other Chromium browsers.
    Blink,
    /// Firefox, except on iOS.
    Gecko,
    /// Safari, every browser on iOS whatever its name, WebKitGTK and WPE.
    WebKit,
}

/// The rendering engine a user agent names, or `None` when it names none.
pub fn rendering_engine(user_agent: &str) -> Option<RenderingEngine> {
    if os_family(user_agent) == Some("iOS") {
        return Some(RenderingEngine::WebKit);
    }
    if user_agent.contains("Chrome/") || user_agent.contains("Chromium/") {
        Some(RenderingEngine::Blink)
    } else if user_agent.contains("Gecko/") && user_agent.contains("Firefox/") {
        Some(RenderingEngine::Gecko)
    } else if user_agent.contains("AppleWebKit/") {
        Some(RenderingEngine::WebKit)
    } else {
        None
    }
}

/// The leading digits of a version (`133` of `133.0.1`).
fn major_after(version: &str) -> Option<u32> {
    let digits: String = version.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_user_agents() {
        let cases = [
            (
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",
                (Some("Chrome"), Some(156), Some("Linux"), false),
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
                (Some("Safari"), Some(17), Some("iOS"), true),
            ),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86",
                (Some("Edge"), Some(131), Some("Windows"), false),
            ),
            (
                "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36",
                (Some("Samsung Internet"), Some(25), Some("Android"), true),
            ),
            (
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 14.5; rv:133.0) Gecko/20100101 Firefox/133.0",
                (Some("Firefox"), Some(133), Some("macOS"), false),
            ),
            (
                "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36",
                (Some("Chrome"), Some(131), Some("Android"), true),
            ),
            (
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36",
                (Some("Chrome"), Some(131), Some("macOS"), false),
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
                (Some("Chrome"), Some(131), Some("iOS"), true),
            ),
            (
                "Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36 EdgA/131.0.0.0",
                (Some("Edge"), Some(131), Some("Android"), true),
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) EdgiOS/131.0.2903.87 Version/17.0 Mobile/15E148 Safari/604.1",
                (Some("Edge"), Some(131), Some("iOS"), true),
            ),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:133.0) Gecko/20100101 Firefox/133.0",
                (Some("Firefox"), Some(133), Some("Windows"), false),
            ),
            (
                "Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0",
                (Some("Firefox"), Some(153), Some("Linux"), false),
            ),
            (
                "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
                (Some("Firefox"), Some(133), Some("Android"), true),
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15",
                (Some("Firefox"), Some(133), Some("iOS"), true),
            ),
            (
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
                (Some("Safari"), Some(18), Some("macOS"), false),
            ),
            (
                "Mozilla/5.0 (iPad; CPU OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
                (Some("Safari"), Some(17), Some("iOS"), true),
            ),
            (
                // WebKitGTK 2.50's MiniBrowser, as it sends it.
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/60.5 Safari/605.1.15",
                (Some("WebKitGTK"), None, Some("Linux"), false),
            ),
            (
                "Mozilla/5.0 (Linux; x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 Safari/605.1.15 WPE",
                (Some("WPE WebKit"), None, Some("Linux"), false),
            ),
            (
                "Mozilla/5.0 (Linux; U; Android 4.0.3; en-us) AppleWebKit/534.30 (KHTML, like Gecko) Version/4.0 Mobile Safari/534.30",
                (None, None, Some("Android"), true),
            ),
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 OPR/116.0.0.0",
                (Some("Opera"), Some(116), Some("Windows"), false),
            ),
            ("curl/8.5.0", (None, None, None, false)),
        ];
        for (ua, (browser, major, os, mobile)) in cases {
            let d = describe(ua);
            assert_eq!(
                (d.browser, d.browser_major, d.os, d.mobile),
                (browser, major, os, mobile),
                "{ua}"
            );
            // Every browser the table names has an engine; curl has none.
            assert_eq!(rendering_engine(ua).is_some(), os.is_some(), "{ua}");
        }
    }

    #[test]
    fn every_ios_browser_is_webkit_and_chromium_browsers_are_blink() {
        use RenderingEngine::*;
        let cases = [
            // Chrome, Firefox and Edge on iOS are WebKit underneath.
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) CriOS/131.0.6778.73 Mobile/15E148 Safari/604.1",
                WebKit,
            ),
            (
                "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15",
                WebKit,
            ),
            (
                "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Safari/605.1.15",
                WebKit,
            ),
            (
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/60.5 Safari/605.1.15",
                WebKit,
            ),
            // Chromium browsers also say AppleWebKit and Safari.
            (
                "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.2903.86",
                Blink,
            ),
            (
                "Mozilla/5.0 (Linux; Android 14; SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/25.0 Chrome/121.0.0.0 Mobile Safari/537.36",
                Blink,
            ),
            (
                "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/156.0.0.0 Safari/537.36",
                Blink,
            ),
            (
                "Mozilla/5.0 (Android 14; Mobile; rv:133.0) Gecko/133.0 Firefox/133.0",
                Gecko,
            ),
            (
                "Mozilla/5.0 (X11; Linux x86_64; rv:153.0) Gecko/20100101 Firefox/153.0",
                Gecko,
            ),
        ];
        for (ua, engine) in cases {
            assert_eq!(rendering_engine(ua), Some(engine), "{ua}");
        }
        assert_eq!(rendering_engine("curl/8.5.0"), None);
    }
}
