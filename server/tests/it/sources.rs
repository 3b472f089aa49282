//! Where runs came from, kept as a tag of the uploader's /24 or /48 under a key of the
//! day, two days at most: the operator lists the busiest sources and purges one, and
//! the collector never keeps an address. On SQLite and PostgreSQL.

use std::net::SocketAddr;

use firsttoken_server::db::{DAY_MS, Db, sources};

use crate::common;
use crate::common::App;

async fn upload_from(app: &App, n: u64, address: &str) {
    let peer: SocketAddr = SocketAddr::new(address.parse().expect("an address"), 40000);
    let run = common::run_with(n, |_| {});
    let response = app.post("/api/v1/runs").peer(peer).json(&run).send().await;
    assert_eq!(response.status, 201, "{}", response.text());
}

fn admin(request: common::Call) -> common::Call {
    request.bearer_auth(common::ADMIN_TOKEN)
}

async fn stored(db: &Db) -> Vec<String> {
    let mut ids = db.run_ids().await.expect("run ids");
    ids.sort();
    ids
}

fn id(n: u64) -> String {
    format!("00000000-0000-4000-8000-{n:012x}")
}

#[tokio::test]
async fn an_operator_purges_one_sources_runs_and_no_address_is_kept() {
    for t in common::databases().await {
        let app = App::new(common::state(&t.db));
        // Two addresses of one /24, one of another; two /64s of one /48.
        upload_from(&app, 1, "198.51.100.7").await;
        upload_from(&app, 2, "198.51.100.200").await;
        upload_from(&app, 3, "203.0.113.9").await;
        upload_from(&app, 4, "2001:db8:5:1::1").await;
        upload_from(&app, 5, "2001:db8:5:2::9").await;
        upload_from(&app, 6, "2001:db8:5:3::9").await;

        let listed = admin(app.get("/api/v1/admin/sources")).send().await;
        assert_eq!(listed.status, 200, "{}: {}", t.name, listed.text());
        let text = listed.text();
        for address in ["198.51.100", "203.0.113", "2001:db8", "20010db8"] {
            assert!(!text.contains(address), "{}: {text}", t.name);
        }
        let body = listed.json();
        let sources = body["sources"].as_array().expect("sources");
        let runs: Vec<i64> = sources
            .iter()
            .map(|s| s["runs"].as_i64().expect("a count"))
            .collect();
        assert_eq!(runs, [3, 2, 1], "{}: busiest first, by /48 and /24", t.name);
        assert_eq!(sources[0]["samples"], 9, "{}: three runs of three", t.name);
        assert_eq!(body["kept_hours"], 47, "{}", t.name);
        let ipv6_tag = sources[0]["tag"].as_str().expect("a tag").to_owned();
        assert!(sources::is_tag(&ipv6_tag), "{ipv6_tag}");

        // A network by an address in it, or written as its /24.
        let purged = admin(app.post("/api/v1/admin/purge?source=198.51.100.0/24"))
            .send()
            .await;
        assert_eq!(purged.status, 200, "{}: {}", t.name, purged.text());
        assert_eq!(purged.json()["deleted_runs"], 2, "{}", t.name);
        assert_eq!(
            stored(&t.db).await,
            [id(3), id(4), id(5), id(6)],
            "{}",
            t.name
        );
        // A tag from the list.
        let purged = admin(app.post(&format!("/api/v1/admin/purge?source_tag={ipv6_tag}")))
            .send()
            .await;
        assert_eq!(purged.json()["deleted_runs"], 3, "{}", t.name);
        assert_eq!(stored(&t.db).await, [id(3)], "{}", t.name);
        // An address whose network sent nothing: nothing goes.
        let purged = admin(app.post("/api/v1/admin/purge?source=192.0.2.1"))
            .send()
            .await;
        assert_eq!(purged.json()["deleted_runs"], 0, "{}", t.name);
        let listed = admin(app.get("/api/v1/admin/sources")).send().await.json();
        assert_eq!(
            listed["sources"].as_array().map(Vec::len),
            Some(1),
            "{}",
            t.name
        );

        // Refusals name what is wrong; the list and the purge are the operator's only.
        for (query, names) in [
            ("source=198.51.100.0/16", "/24"),
            ("source=2001:db8::/64", "/48"),
            ("source=example.com", "not an address"),
            ("source_tag=198.51.100.7", "16 lowercase hex"),
            ("source=192.0.2.1&source_tag=0123456789abcdef", "not both"),
        ] {
            let refused = admin(app.post(&format!("/api/v1/admin/purge?{query}")))
                .send()
                .await;
            assert_eq!(refused.status, 400, "{}: {query}", t.name);
            assert!(
                refused.text().contains(names),
                "{query}: {}",
                refused.text()
            );
        }
        assert_eq!(app.get("/api/v1/admin/sources").send().await.status, 401);
        assert_eq!(stored(&t.db).await, [id(3)], "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn tags_change_every_day_and_are_forgotten_with_their_keys() {
    for t in common::databases().await {
        let db = &t.db;
        let now = firsttoken_server::db::now_ms();
        let block = [198, 51, 100];
        let today = db.source_tag(&block, now).await.expect("tag");
        assert_eq!(today, db.source_tag(&block, now).await.expect("tag"));
        let three_days_ago = db.source_tag(&block, now - 3 * DAY_MS).await.expect("tag");
        assert_ne!(today, three_days_ago, "{}: a day's key is its own", t.name);
        let run = |n: u64| {
            let value = common::run_with(n, |_| {});
            let run: firsttoken_core::schema::Run =
                serde_json::from_value(value.clone()).expect("a run");
            (run, value.to_string())
        };
        let (old, old_record) = run(1);
        db.store_run(
            old,
            &old_record,
            now - 3 * DAY_MS,
            None,
            Some(three_days_ago),
        )
        .await
        .expect("stored");
        let (new, new_record) = run(2);
        db.store_run(new, &new_record, now, None, Some(today.clone()))
            .await
            .expect("stored");

        let gone = db.forget_sources(now).await.expect("forget");
        assert_eq!((gone.keys, gone.tags), (1, 1), "{}", t.name);
        // Only today's key is left to look for the block's runs with.
        assert_eq!(
            db.source_tags(&block, now).await.expect("tags"),
            [today],
            "{}",
            t.name
        );
        // The run itself stays; only where it came from is forgotten.
        assert_eq!(stored(db).await, [id(1), id(2)], "{}", t.name);
        let again = db.forget_sources(now).await.expect("forget");
        assert_eq!((again.keys, again.tags), (0, 0), "{}", t.name);
        t.cleanup().await;
    }
}
