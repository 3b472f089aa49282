//! What a server must change, written out: the CORS headers a plan's requests need, and
//! the failing lines' response headers as examples for common stacks.

use crate::check::{Line, Verdict};

/// The CORS headers the plan's requests need from `page`.
pub(super) fn allow_headers_fix(page: &str, request_headers: &[String]) -> String {
    format!(
        "Access-Control-Allow-Origin: {page}\nAccess-Control-Allow-Methods: POST\nAccess-Control-Allow-Headers: {}",
        request_headers.join(", ")
    )
}

/// What a server must change, as examples for common stacks: the response headers of the
/// failing lines, written for FastAPI/Starlette, Express, nginx and Caddy. The preflight's
/// answer is kept for 7200 s, the most Chromium keeps one: a shorter time (FastAPI's
/// default is 600 s, Express's none) makes the session protocol's request after 10 min
/// idle wait for a preflight, which its cold figure would then include.
pub fn examples(page: &str, lines: &[Line]) -> Vec<(&'static str, String)> {
    let failing = |key: &str| {
        lines.iter().any(|l| {
            l.key == key && matches!(l.verdict, Verdict::Fail | Verdict::Warn) && l.fix.is_some()
        })
    };
    let cors = failing("cors");
    let timing = failing("timing_allow_origin") || failing("fresh");
    let server_timing = failing("server_timing");
    if !(cors || timing || server_timing) {
        return Vec::new();
    }
    let allow_headers = lines
        .iter()
        .find(|l| l.key == "cors")
        .and_then(|l| l.fix.as_deref())
        .and_then(|fix| {
            fix.lines()
                .find_map(|h| h.strip_prefix("Access-Control-Allow-Headers: "))
        })
        .unwrap_or("content-type, authorization")
        .to_owned();
    let quoted: Vec<String> = allow_headers
        .split(", ")
        .map(|h| format!("\"{h}\""))
        .collect();
    let quoted = quoted.join(", ");

    let mut fastapi = String::new();
    if cors {
        fastapi += &format!(
            "from fastapi.middleware.cors import CORSMiddleware\n\napp.add_middleware(\n    CORSMiddleware,\n    allow_origins=[\"{page}\"],\n    allow_methods=[\"POST\"],\n    allow_headers=[{quoted}],\n    max_age=7200,\n)\n"
        );
    }
    if timing || server_timing {
        fastapi += "\n@app.middleware(\"http\")\nasync def timing_headers(request, call_next):\n    response = await call_next(request)\n";
        if timing {
            fastapi += &format!("    response.headers[\"Timing-Allow-Origin\"] = \"{page}\"\n");
        }
        if server_timing {
            fastapi += "    # Your own steps before the model call, measured in the handler:\n    response.headers[\"Server-Timing\"] = f\"auth;dur={auth_ms}, db;dur={db_ms}\"\n";
        }
        fastapi += "    return response\n";
    }

    let mut express = String::new();
    if cors {
        express += &format!(
            "const cors = require(\"cors\");\n\napp.use(cors({{ origin: \"{page}\", methods: [\"POST\"], allowedHeaders: [{quoted}], maxAge: 7200 }}));\n"
        );
    }
    if timing {
        express += &format!(
            "app.use((req, res, next) => {{ res.set(\"Timing-Allow-Origin\", \"{page}\"); next(); }});\n"
        );
    }
    if server_timing {
        express += "// In the handler, before the first byte of the stream:\nres.set(\"Server-Timing\", `auth;dur=${authMs}, db;dur=${dbMs}`);\n";
    }

    let mut nginx = String::from("location /v1/ {\n");
    let mut caddy = String::from("handle /v1/* {\n");
    if cors {
        nginx += &format!(
            "    add_header Access-Control-Allow-Origin \"{page}\" always;\n    add_header Access-Control-Allow-Methods \"POST\" always;\n    add_header Access-Control-Allow-Headers \"{allow_headers}\" always;\n    add_header Access-Control-Max-Age 7200 always;\n"
        );
        caddy += &format!(
            "    header Access-Control-Allow-Origin \"{page}\"\n    header Access-Control-Allow-Methods \"POST\"\n    header Access-Control-Allow-Headers \"{allow_headers}\"\n    header Access-Control-Max-Age 7200\n"
        );
    }
    if timing {
        nginx += &format!("    add_header Timing-Allow-Origin \"{page}\" always;\n");
        caddy += &format!("    header Timing-Allow-Origin \"{page}\"\n");
    }
    if cors {
        nginx += "    if ($request_method = OPTIONS) { return 204; }\n";
        caddy += "    @preflight method OPTIONS\n    respond @preflight 204\n";
    }
    if server_timing {
        nginx +=
            "    # Server-Timing comes from the app itself (see the FastAPI or Express example).\n";
        caddy +=
            "    # Server-Timing comes from the app itself (see the FastAPI or Express example).\n";
    }
    nginx += "    proxy_buffering off;   # stream each event as it comes\n    proxy_pass http://127.0.0.1:8000;\n}\n";
    caddy += "    reverse_proxy 127.0.0.1:8000 {\n        flush_interval -1   # stream each event as it comes\n    }\n}\n";

    vec![
        ("FastAPI / Starlette", fastapi),
        ("Express", express),
        ("nginx", nginx),
        ("Caddy", caddy),
    ]
}

/// Request headers that make a cross-origin request need a CORS preflight: every header
/// but the CORS-safelisted ones (lowercase, deduplicated), and the engine's
/// `content-type: application/json`.
pub fn preflight_headers<'a>(headers: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut names = vec!["content-type".to_owned()];
    for name in headers {
        let name = name.trim().to_ascii_lowercase();
        let safelisted = matches!(
            name.as_str(),
            "accept" | "accept-language" | "content-language"
        );
        if !safelisted && !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The book's page on what an endpoint must send gives, for each stack, exactly the
    /// code the check prints when CORS, Timing-Allow-Origin and Server-Timing all fail,
    /// for a page on `https://firsttoken.example.com` and a request with an
    /// `authorization` header: the page and the app cannot drift apart.
    #[test]
    fn the_books_endpoint_page_shows_the_checks_own_examples() {
        let page = "https://firsttoken.example.com";
        let line = |key: &str, fix: String| Line {
            key: key.into(),
            verdict: Verdict::Fail,
            title: String::new(),
            detail: String::new(),
            fix: Some(fix),
        };
        let headers = preflight_headers(["authorization"]);
        let lines = [
            line("cors", allow_headers_fix(page, &headers)),
            line("timing_allow_origin", "Timing-Allow-Origin: *".into()),
            line("server_timing", "Server-Timing: auth;dur=12".into()),
        ];
        let book = include_str!("../../../docs/src/guide/endpoint.md");
        let mut missing = String::new();
        for (stack, code) in examples(page, &lines) {
            let language = match stack {
                "FastAPI / Starlette" => "python",
                "Express" => "javascript",
                "nginx" => "nginx",
                _ => "caddy",
            };
            let block = format!("```{language}\n{code}```");
            if !book.contains(&block) {
                missing += &format!("{stack}:\n{block}\n");
            }
        }
        assert!(
            missing.is_empty(),
            "docs/src/guide/endpoint.md lacks these examples as the check prints them:\n{missing}"
        );
    }
}
