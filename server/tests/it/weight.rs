//! One upload cannot buy outsized weight in the crowd's figures: a run counts at most
//! 120 requests of each phase (evenly spread over it), however many it carries, and the
//! export still holds every one. On SQLite and PostgreSQL.

use firsttoken_crowd::summary::REQUESTS_PER_RUN_PHASE;
use serde_json::{Value, json};

use crate::common::{self, App};

/// A non-demo run of `requests` steady requests, each with a TTFT of `ttft_ms`.
fn run_of(n: u64, requests: usize, ttft_ms: f64) -> Value {
    common::run_with(n, |r| {
        r["targets"][0]["demo"] = json!(false);
        r["plan"]["phases"] = json!([{"phase": "steady", "requests": requests}]);
        let first = r["samples"][0].clone();
        let samples: Vec<Value> = (0..requests)
            .map(|i| {
                let mut s = first.clone();
                s["index"] = json!(i);
                s["start_ms"] = json!(i as f64 * 2000.0);
                s["ttft_ms"] = json!(ttft_ms);
                s["ttft_any_ms"] = json!(ttft_ms);
                s["last_token_ms"] = json!(ttft_ms + 900.0);
                s["e2e_ms"] = json!(ttft_ms + 1000.0);
                s
            })
            .collect();
        r["samples"] = json!(samples);
    })
}

/// The review's attack (M6/M3): one run of 1,200 slow requests beside 20 honest runs of
/// 10 fast ones. Counted by request, the one run was 86% of the pool and the crowd's
/// median was its 5 s; counted at 120 requests, it is 38%, and the median is the crowd's.
#[tokio::test]
async fn one_run_counts_at_most_120_requests_of_a_phase() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        let upload = |run: Value| {
            let app = app.clone();
            async move {
                let answer = app.post("/api/v1/runs").json(&run).send().await;
                assert_eq!(answer.status, 201, "{}", answer.text());
            }
        };
        upload(run_of(1, 1200, 5000.0)).await;
        for n in 2..22 {
            upload(run_of(n, 10, 300.0)).await;
        }
        let summary = app.get("/api/v1/summary").send().await.json();
        assert_eq!(summary["requests_per_run_phase"], REQUESTS_PER_RUN_PHASE);
        let all = &summary["groups"][0];
        assert_eq!(all["runs"], 21, "{}: {summary}", t.name);
        assert_eq!(all["samples"], 120 + 200, "{}: {summary}", t.name);
        let p50 = all["ttft_ms"]["p50"]["value"].as_f64().expect("a median");
        assert!((p50 - 300.0).abs() < 3.0, "{}: median {p50}", t.name);
        assert_eq!(all["ttft_ms"]["max"], 5000.0, "{}", t.name);

        // The export, and the run's own record, keep every request.
        let export = app
            .get("/api/v1/export")
            .bearer_auth(common::ADMIN_TOKEN)
            .send()
            .await
            .text();
        assert_eq!(export.lines().count(), 1200 + 200, "{}", t.name);
        t.cleanup().await;
    }
}

/// Past the cap, the requests counted are spread over the whole phase: the first and
/// then every few, exactly the cap's number.
#[test]
fn the_requests_counted_are_spread_evenly() {
    use firsttoken_crowd::summary::counted_in_crowd;
    for of in [1, 119, 120, 121, 240, 1000, 10_000] {
        let kept: Vec<usize> = (0..of).filter(|&r| counted_in_crowd(r, of)).collect();
        assert_eq!(kept.len(), of.min(REQUESTS_PER_RUN_PHASE), "{of}");
        assert_eq!(kept[0], 0);
        if of > REQUESTS_PER_RUN_PHASE {
            let widest = kept.windows(2).map(|w| w[1] - w[0]).max().expect("gaps");
            assert!(
                widest <= of.div_ceil(REQUESTS_PER_RUN_PHASE),
                "{of}: gap {widest}"
            );
            assert!(*kept.last().expect("kept") >= of - of.div_ceil(REQUESTS_PER_RUN_PHASE));
        }
    }
}
