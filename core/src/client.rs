//! A coarse description of the browser from its user-agent string: family, major
//! version, OS family, mobile or not. The full string never leaves the browser; only this
//! does (DESIGN.md, "Privacy").

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
pub fn describe(user_agent: &str) -> ClientDescription {
    // Order matters: Edge, Opera and Samsung Internet also say "Chrome", Chrome also
    // says "Safari", and Chrome on iOS says "CriOS".
    const BROWSERS: [(&str, &str); 9] = [
        ("Edg/", "Edge"),
        ("EdgA/", "Edge"),
        ("OPR/", "Opera"),
        ("SamsungBrowser/", "Samsung Internet"),
        ("Firefox/", "Firefox"),
        ("FxiOS/", "Firefox"),
        ("CriOS/", "Chrome"),
        ("Chrome/", "Chrome"),
        ("Version/", "Safari"),
    ];
    let (browser, browser_major) = BROWSERS
        .iter()
        .find_map(|(token, family)| {
            let at = user_agent.find(token)?;
            if *family == "Safari" && !user_agent.contains("Safari/") {
                return None;
            }
            let digits: String = user_agent[at + token.len()..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            Some((Some(*family), digits.parse().ok()))
        })
        .unwrap_or((None, None));
    let os = if user_agent.contains("Android") {
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
    } else if user_agent.contains("Linux") {
        Some("Linux")
    } else {
        None
    };
    let mobile = user_agent.contains("Mobi") || matches!(os, Some("iOS") | Some("Android"));
    ClientDescription {
        browser,
        browser_major,
        os,
        mobile,
    }
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
            ("curl/8.5.0", (None, None, None, false)),
        ];
        for (ua, (browser, major, os, mobile)) in cases {
            let d = describe(ua);
            assert_eq!(
                (d.browser, d.browser_major, d.os, d.mobile),
                (browser, major, os, mobile),
                "{ua}"
            );
        }
    }
}
