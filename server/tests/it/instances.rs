//! Two collector instances, each with its own connection pool, write to one database at
//! once: every run arrives exactly once, duplicates sent to both included.

use crate::common;

use firsttoken_server::db::Table;

// Real ports: two servers side by side, as deployed, each with its own pool.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_instances_on_one_database_lose_nothing_and_store_nothing_twice() {
    for t in common::databases().await {
        // The second instance opens the same database through a pool of its own.
        let second = t.second_instance().await;
        let instances = [
            common::serve(common::state(&t.db)).await,
            common::serve(common::state(&second)).await,
        ];
        const RUNS: u64 = 60;
        let client = reqwest::Client::new();
        // Every run goes to one instance, and every third also to the other at once.
        let uploads = (0..RUNS).flat_map(|n| {
            let run = common::run_with(n, |_| {});
            let twice = n % 3 == 0;
            let first = instances[(n % 2) as usize];
            let other = instances[((n + 1) % 2) as usize];
            let targets = if twice {
                vec![first, other]
            } else {
                vec![first]
            };
            targets
                .into_iter()
                .map(move |address| (address, run.clone()))
        });
        let statuses = futures_util::future::join_all(uploads.map(|(address, run)| {
            let client = client.clone();
            async move {
                client
                    .post(format!("http://{address}/api/v1/runs"))
                    .json(&run)
                    .send()
                    .await
                    .expect("upload")
                    .status()
                    .as_u16()
            }
        }))
        .await;
        assert!(
            statuses.iter().all(|s| *s == 201 || *s == 200),
            "{}: {statuses:?}",
            t.name
        );
        assert_eq!(
            statuses.iter().filter(|s| **s == 201).count() as u64,
            RUNS,
            "{}: each run created once",
            t.name
        );
        assert_eq!(
            t.db.count(Table::Runs).await.expect("count"),
            RUNS as i64,
            "{}",
            t.name
        );
        assert_eq!(
            t.db.stored_samples().await.expect("count"),
            3 * RUNS as i64,
            "{}",
            t.name
        );
        t.cleanup().await;
    }
}
