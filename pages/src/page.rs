//! The page the app runs on, as the pages' rules see it: where it is, and so where its own
//! server's collector is. The compose form and the landing both start from it.

use firsttoken_core::api::RUNS_PATH;

/// The page that opened the app.
#[derive(Debug, Clone, Copy)]
pub struct Page<'a> {
    /// `https://bench.example.com`: cookies go to this origin only.
    pub origin: &'a str,
    /// `bench.example.com`: named when a study sends this browser's cookies.
    pub host: &'a str,
    /// The path the app is served under (`/firsttoken`, or empty at the root): its
    /// collector, probe and demo are there.
    pub base_path: &'a str,
}

impl Page<'_> {
    /// Where this server's app, collector and demo are: the origin and the base path
    /// (`https://bench.example.com/firsttoken`).
    pub fn app_root(&self) -> String {
        format!("{}{}", self.origin, self.base_path.trim_end_matches('/'))
    }

    /// The collector on this server: `https://bench.example.com/firsttoken/api/v1/runs`.
    /// A link that names no collector uploads there.
    pub fn own_collector(&self) -> String {
        format!("{}{RUNS_PATH}", self.app_root())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Under a base path, the page's own collector is under it too.
    #[test]
    fn the_own_collector_is_under_the_base_path() {
        let page = Page {
            origin: "https://bench.example.com",
            host: "bench.example.com",
            base_path: "/firsttoken/",
        };
        assert_eq!(page.app_root(), "https://bench.example.com/firsttoken");
        assert_eq!(
            page.own_collector(),
            "https://bench.example.com/firsttoken/api/v1/runs"
        );
        let at_root = Page {
            base_path: "",
            ..page
        };
        assert_eq!(
            at_root.own_collector(),
            "https://bench.example.com/api/v1/runs"
        );
    }
}
