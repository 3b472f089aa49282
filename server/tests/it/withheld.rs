//! Crowd cells protect individuals: a summary group from fewer than k runs (5, or the
//! server's `--min-runs`) publishes its key and nothing else, the smallest other group is
//! withheld with it, and time windows are whole hours. On SQLite and PostgreSQL.

use serde_json::{Value, json};

use crate::common::{self, App};

/// 2026-12-01T10:20:00Z: inside an hour, not on its edge.
const T1: i64 = 1_796_120_400_000;
const HOUR: i64 = 3_600_000;

/// Stores a non-demo run on `network` that arrived at `at_ms`.
async fn store(db: &firsttoken_server::Db, n: u64, network: &str, at_ms: i64) {
    let record = common::run_with(n, |r| {
        r["client"]["network"] = json!(network);
        r["targets"][0]["demo"] = json!(false);
    });
    let run: firsttoken_core::schema::Run = serde_json::from_value(record.clone()).expect("a run");
    db.insert_run(&run, &record.to_string(), at_ms, None)
        .await
        .expect("stored");
}

async fn summary(app: &App, query: &str) -> Value {
    let answer = app.get(&format!("/api/v1/summary?{query}")).send().await;
    assert_eq!(answer.status, 200, "{query}: {}", answer.text());
    answer.json()
}

fn group<'a>(summary: &'a Value, network: &str) -> &'a Value {
    summary["groups"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["key"]["network"] == network))
        .unwrap_or_else(|| panic!("no {network} group in {summary}"))
}

/// The review's attack: three runs a second apart, and a window a millisecond wide
/// around one of them. Before, the answer showed `runs: 1` with its percentiles.
#[tokio::test]
async fn a_narrow_window_cannot_single_out_a_run() {
    for t in common::databases().await {
        let config = firsttoken_server::Config {
            min_runs: firsttoken_crowd::summary::DEFAULT_MIN_RUNS,
            ..common::config()
        };
        let app = App::new(common::state_with(&t.db, config));
        for i in 0..3 {
            store(&t.db, i, "cellular", T1 + 1000 * i as i64).await;
        }
        for i in 0..6 {
            store(&t.db, 10 + i, "wifi", T1 - 600_000).await;
        }
        for i in 0..7 {
            store(&t.db, 20 + i, "fiber", T1 + 600_000).await;
        }

        let s = summary(&app, &format!("group_by=network&from={T1}&to={}", T1 + 1)).await;
        // The window is the whole hour around it.
        let hour = T1 - T1 % HOUR;
        assert_eq!(
            (s["from_ms"].as_i64(), s["to_ms"].as_i64()),
            (Some(hour), Some(hour + HOUR))
        );
        assert_eq!(s["min_runs"], 5);
        let cellular = group(&s, "cellular");
        assert_eq!(cellular["withheld"], true, "{}: {cellular}", t.name);
        for field in [
            "runs",
            "samples",
            "answered",
            "error_rate",
            "ttft_ms",
            "e2e_ms",
        ] {
            assert_eq!(
                cellular[field],
                Value::Null,
                "{}: {field} of {cellular}",
                t.name
            );
        }
        assert_eq!(cellular["ttft_cdf"], json!([]));
        assert_eq!(cellular["errors"], json!({}));
        // Wifi (6 runs) is the smallest published group: withheld with it, so the hour's
        // total minus fiber is not cellular's alone.
        let wifi = group(&s, "wifi");
        assert_eq!(
            (wifi["withheld"].clone(), wifi["runs"].clone()),
            (json!(true), Value::Null)
        );
        let fiber = group(&s, "fiber");
        assert_eq!(
            (fiber["withheld"].clone(), fiber["runs"].clone()),
            (json!(false), json!(7))
        );
        assert!(fiber["ttft_ms"].is_object(), "{fiber}");

        // A query may raise k, never lower it.
        let s = summary(&app, "group_by=network&min_runs=2").await;
        assert_eq!(group(&s, "cellular")["withheld"], true);
        let s = summary(&app, "group_by=network&min_runs=8").await;
        assert_eq!(group(&s, "fiber")["withheld"], true);
        assert_eq!(s["min_runs"], 8);
        t.cleanup().await;
    }
}

#[test]
fn the_server_refuses_a_k_below_five() {
    let config = firsttoken_server::Config {
        min_runs: 4,
        ..firsttoken_server::Config::defaults()
    };
    let refused = config.check().expect_err("k of 4");
    assert_eq!(refused.flag, "--min-runs (FIRSTTOKEN_MIN_RUNS)");
}
