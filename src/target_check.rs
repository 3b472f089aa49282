//! The target check's requests: one real request of the plan from this browser (with the
//! engine's own code, so it meets CORS, caching and connections as the runs will) and the
//! same again straight after it (is the client port the target reports the browser's?),
//! then, where the study names them, two to fresh host names (does the browser coalesce
//! them?), one probe and one to each compared target, and for a request that needs a CORS
//! preflight the same once more after a wait (is the preflight's answer kept?). When the
//! request gets no
//! response, a few small requests tell an unreachable server from a CORS refusal, and
//! which header the preflight refused.
//! [`firsttoken_pages::check`] reads what they showed as a checklist.

use firsttoken_core::plan::Plan;
use firsttoken_core::schema::ErrorClass;
use firsttoken_core::url::origin_of;
use firsttoken_pages::check::{Cors, Fresh, Observed, PREFLIGHT_WAIT_MS, Reply, preflight_headers};
use wasm_bindgen::JsCast;
use wasm_bindgen_futures::JsFuture;
use web_sys::{
    AbortController, Headers, RequestCache, RequestCredentials, RequestInit, RequestMode,
};

use crate::browser;
use crate::engine::{Measured, RequestSpec, RunContext, first_request, measure_alone};
use crate::platform::Scope;

/// The longest any request of the check may take.
const CHECK_TIMEOUT_MS: u32 = 30_000;
/// The longest a reachability or preflight request may take.
const SMALL_TIMEOUT_MS: u32 = 10_000;

/// Sends the check's requests for `plan` and says what they showed.
pub async fn run(plan: &Plan) -> Observed {
    let scope = Scope::current();
    let page_origin = browser::page_origin();
    let tag: String = scope
        .random_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let context = RunContext {
        run_start: scope.performance().now(),
        ..RunContext::default()
    };
    let limit = |mut spec: RequestSpec| {
        spec.timeout_ms = spec.timeout_ms.min(CHECK_TIMEOUT_MS);
        spec
    };
    let target = plan.main_target();
    let Some(mut spec) = first_request(plan, 0, &tag).map(limit) else {
        unreachable!("a valid plan has a target");
    };
    spec.keep_body = true;
    let main = measure_alone(&scope, &spec, &context).await;
    // The same again, straight after: a client port the target reports must stay the
    // same on one connection, or it is not the browser's (a proxy's upstream socket).
    let main_again = if main.sample.error.is_none() {
        let again = RequestSpec {
            keep_body: false,
            ..spec.clone()
        };
        Some(reply(&measure_alone(&scope, &again, &context).await))
    } else {
        None
    };

    let same_origin = origin_of(&spec.url).as_deref() == Some(page_origin.as_str());
    let request_headers = preflight_headers(spec.headers.iter().map(|(name, _)| name.as_str()));
    let cors = if same_origin {
        Cors::SameOrigin
    } else if main.sample.error == Some(ErrorClass::Network) {
        why_no_response(&scope, &spec, &request_headers).await
    } else {
        // A response, or a request that went out and timed out waiting for one.
        Cors::Passed
    };

    // The fresh URL and the probe are checked wherever the study names them, whatever
    // its phases.
    // Two fresh host names, one after the other: the second shows whether the browser
    // coalesces them onto one HTTP/2 connection.
    let mut fresh = None;
    if target.fresh_url.is_some() {
        let number =
            u64::from_le_bytes(scope.random_bytes()[..8].try_into().unwrap_or([0; 8])) % 1_000_000;
        let ask = |url: String| {
            let spec = RequestSpec {
                url,
                keep_body: false,
                ..spec.clone()
            };
            let (scope, context) = (&scope, &context);
            async move { reply(&measure_alone(scope, &spec, context).await) }
        };
        if let Some(url) = target.fresh_url_for(number) {
            let first = ask(url.clone()).await;
            let second = match target.fresh_url_for(number + 1) {
                Some(next) if first.answered() => Some((next.clone(), ask(next).await)),
                _ => None,
            };
            fresh = Some(Fresh {
                url,
                reply: first,
                second,
            });
        }
    }
    let mut probe = None;
    if let Some(url) = &target.probe_url {
        // As the runs send it: a GET with none of the target's headers.
        let spec = RequestSpec {
            url: url.clone(),
            body: None,
            headers: Vec::new(),
            keep_body: false,
            ..spec.clone()
        };
        probe = Some(reply(&measure_alone(&scope, &spec, &context).await));
    }
    let mut compared = Vec::new();
    for (t, other) in plan.targets.iter().enumerate().skip(1) {
        if let Some(spec) = first_request(plan, t, &tag).map(limit) {
            let measured = measure_alone(&scope, &spec, &context).await;
            compared.push((other.label.clone(), reply(&measured)));
        }
    }

    // Once more after a wait longer than a browser keeps a preflight's answer without
    // Access-Control-Max-Age: does it wait for a new preflight?
    let mut after_wait = None;
    if main.preflighted && main_again.as_ref().is_some_and(Reply::answered) {
        scope.sleep(PREFLIGHT_WAIT_MS).await;
        let again = RequestSpec {
            keep_body: false,
            ..spec.clone()
        };
        after_wait = Some(reply(&measure_alone(&scope, &again, &context).await));
    }

    Observed {
        page_origin,
        dialect: target.dialect.clone(),
        request_headers,
        main: reply(&main),
        main_again,
        after_wait,
        cors,
        fresh,
        probe,
        compared,
    }
}

/// What a measured request showed, for the checklist.
fn reply(m: &Measured) -> Reply {
    let s = &m.sample;
    Reply {
        status: s.status,
        error: s.error,
        error_message: s.error_message.clone(),
        content_type: m.content_type.clone(),
        headers_ms: s.headers_ms,
        ttft_ms: s.ttft_ms,
        ttft_any_ms: s.ttft_any_ms,
        output_tokens: s.usage.as_ref().and_then(|u| u.output_tokens),
        conn: s.conn.clone(),
        server_timing: s.server_timing.len(),
        stream_timings: s.stream_timings.as_ref().map_or(0, |t| t.len()),
        server_whole: firsttoken_core::layers::Layers::of(s)
            .is_some_and(|l| l.server.is_ok_and(|server| server.whole())),
        preflighted: m.preflighted,
        client_port: m.client_port,
        redirected: s.redirected,
        body_start: m.body_start.clone(),
    }
}

/// Why a cross-origin request got no response: a plain GET (no preflight) that gets one
/// means the server answers this page, so the preflight failed, and each header sent
/// alone names the one it failed on; a `no-cors` GET that gets one means the server
/// answers but not to this page; with neither, the browser cannot tell an unreachable
/// server from one whose answers it withholds (opaque-response blocking withholds an
/// error status or JSON even from a `no-cors` request).
async fn why_no_response(scope: &Scope, spec: &RequestSpec, headers: &[String]) -> Cors {
    if spec.body.is_some() && gets_response(scope, &spec.url, None, &[], RequestMode::Cors).await {
        let mut refused = Vec::new();
        for name in headers {
            let value = if name == "content-type" {
                "application/json".to_owned()
            } else {
                spec.headers
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(name))
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            };
            // A body the app refuses at once (`{}` as text/plain, or as JSON when the
            // header is the content type): no model is called for it.
            let alone = [(name.clone(), value)];
            if !gets_response(scope, &spec.url, Some("{}"), &alone, RequestMode::Cors).await {
                refused.push(name.clone());
            }
        }
        return Cors::PreflightRefused { refused };
    }
    if gets_response(scope, &spec.url, None, &[], RequestMode::NoCors).await {
        Cors::NoAllowOrigin
    } else {
        Cors::NoResponse
    }
}

/// Whether a small request gets any response (an opaque one counts, for `no-cors`). Its
/// body is not read.
async fn gets_response(
    scope: &Scope,
    url: &str,
    body: Option<&str>,
    headers: &[(String, String)],
    mode: RequestMode,
) -> bool {
    let init = RequestInit::new();
    init.set_mode(mode);
    init.set_credentials(RequestCredentials::Omit);
    init.set_cache(RequestCache::NoStore);
    if let Ok(h) = Headers::new() {
        for (name, value) in headers {
            let _ = h.set(name, value);
        }
        init.set_headers(&h);
    }
    match body {
        Some(body) => {
            init.set_method("POST");
            init.set_body(&body.into());
        }
        None => init.set_method("GET"),
    }
    let controller = AbortController::new().ok();
    if let Some(c) = &controller {
        init.set_signal(Some(&c.signal()));
    }
    let _timer = controller
        .clone()
        .map(|c| scope.timeout(SMALL_TIMEOUT_MS, move || c.abort()));
    match JsFuture::from(scope.fetch(url, &init)).await {
        Ok(response) => {
            if let Some(body) = response.unchecked_into::<web_sys::Response>().body() {
                let _ = body.cancel();
            }
            true
        }
        Err(_) => false,
    }
}
