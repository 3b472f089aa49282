//! A filtered purge while matching runs are being uploaded leaves every run whole or
//! wholly gone, on SQLite and PostgreSQL. On PostgreSQL the purge once chose its runs
//! again in each of its three statements (read committed): an upload that committed in
//! between lost its id but kept its record (a re-upload then answered 200 and the run
//! was silently lost), or kept its record without its cells.

use firsttoken_server::db::Pool;
use serde_json::json;

use crate::common::{self, App};

/// Runs `$body` with `$p` bound to the test database's pool, whichever backend it is.
macro_rules! with_pool {
    ($db:expr, |$p:ident| $body:expr) => {
        match $db.pool() {
            Pool::Sqlite($p) => $body,
            Pool::Postgres($p) => $body,
        }
    };
}

const ORPHANS: [(&str, &str); 3] = [
    (
        "an id without its record",
        "SELECT COUNT(*) FROM run_ids i WHERE i.deleted_at_ms IS NULL \
         AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.run_id = i.run_id)",
    ),
    (
        "a record without its id",
        "SELECT COUNT(*) FROM runs r \
         WHERE NOT EXISTS (SELECT 1 FROM run_ids i WHERE i.run_id = r.run_id)",
    ),
    (
        "a record without its cells",
        "SELECT COUNT(*) FROM runs r \
         WHERE NOT EXISTS (SELECT 1 FROM cells c WHERE c.run_id = r.run_id)",
    ),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filtered_purge_under_uploads_leaves_no_half_run() {
    for t in common::databases().await {
        let state = common::state(&t.db);
        // Four uploaders of 100 matching runs each, and purges back to back until they
        // are done: commits land between a purge's statements.
        let uploads: Vec<_> = (0..4u64)
            .map(|u| {
                let app = App::new(state.clone());
                tokio::spawn(async move {
                    for n in 0..100 {
                        let run = common::run_with(u * 1000 + n, |r| {
                            r["client"]["network"] = json!("cellular");
                            r["targets"][0]["demo"] = json!(false);
                        });
                        let status = app.post("/api/v1/runs").json(&run).send().await.status;
                        assert_eq!(status, 201, "upload {u}/{n}");
                    }
                })
            })
            .collect();
        let app = App::new(state);
        let mut purges = 0;
        while uploads.iter().any(|u| !u.is_finished()) {
            let purged = app
                .post("/api/v1/admin/purge?network=cellular")
                .bearer_auth(common::ADMIN_TOKEN)
                .send()
                .await;
            assert_eq!(purged.status, 200, "{}: {}", t.name, purged.text());
            purges += 1;
            tokio::task::yield_now().await;
        }
        for upload in uploads {
            upload.await.expect("uploads");
        }
        assert!(purges > 10, "{}: {purges} purges", t.name);
        for (what, count) in ORPHANS {
            let orphans: i64 = with_pool!(t.db, |pool| sqlx::query_scalar(count)
                .fetch_one(pool)
                .await
                .expect("counted"));
            assert_eq!(orphans, 0, "{}: {what}", t.name);
        }
        t.cleanup().await;
    }
}
