//! Group commit: uploads that arrive together share one transaction, each still gets its
//! own answer, and one that the database refuses does not take the others with it.
//!
//! The tests run on Tokio's single-threaded runtime, where every upload is queued before
//! the writer task first runs: so "together" is certain, not a matter of timing.

use firsttoken_core::schema::Run;
use firsttoken_server::db::{Stored, Table};
use futures_util::future::join_all;

use crate::common;

fn run(n: u64) -> Run {
    serde_json::from_value(common::run_with(n, |_| {})).expect("a valid run")
}

#[tokio::test]
async fn uploads_that_arrive_together_share_one_commit_and_each_gets_its_own_answer() {
    for t in common::databases().await {
        let runs: Vec<Run> = (0..40).map(run).collect();
        // The same run twice, and a different record under a taken id, in the same batch.
        let again = runs[3].clone();
        let mut other = runs[5].clone();
        other.app_version = "another-build".into();
        let uploads: Vec<(&Run, String)> = runs
            .iter()
            .chain([&again, &other])
            .map(|r| (r, serde_json::to_string(r).expect("serializes")))
            .collect();

        let commits = t.db.commits();
        let stored = join_all(
            uploads
                .iter()
                .map(|(r, record)| t.db.insert_run(r, record, 1_796_000_000_000, None)),
        )
        .await;

        assert_eq!(
            t.db.commits() - commits,
            1,
            "{}: 42 uploads queued together are one transaction",
            t.name
        );
        for (i, outcome) in stored.iter().enumerate() {
            let outcome = outcome.as_ref().expect("stored");
            match i {
                0..40 => assert!(
                    matches!(outcome, Stored::Created { delete_token: Some(token) } if token.len() == 64),
                    "{}: upload {i} is created with its own token: {outcome:?}",
                    t.name
                ),
                40 => assert_eq!(outcome, &Stored::AlreadyStored, "{}", t.name),
                _ => assert_eq!(outcome, &Stored::IdTaken, "{}", t.name),
            }
        }
        let tokens: std::collections::HashSet<_> = stored
            .iter()
            .filter_map(|s| match s {
                Ok(Stored::Created { delete_token }) => delete_token.clone(),
                _ => None,
            })
            .collect();
        assert_eq!(tokens.len(), 40, "{}: every token differs", t.name);
        assert_eq!(
            t.db.count(Table::Runs).await.expect("counts runs"),
            40,
            "{}",
            t.name
        );
        let per_run = runs[0].samples.len() as i64;
        assert_eq!(
            t.db.stored_samples().await.expect("counts samples"),
            40 * per_run,
            "{}",
            t.name
        );
        // The stored record is the first upload's, not the different one's.
        let kept =
            t.db.run_record(&other.run_id)
                .await
                .expect("reads")
                .expect("the first record is kept");
        assert_eq!(kept, uploads[5].1, "{}", t.name);
        t.cleanup().await;
    }
}

#[tokio::test]
async fn an_upload_the_database_refuses_fails_alone() {
    for t in common::databases().await {
        let runs: Vec<Run> = (100..110).map(run).collect();
        // A run the database refuses: a trigger in each raises on its id.
        let poisoned = run(200);
        refuse(&t.db, &poisoned.run_id).await;
        let mut all: Vec<&Run> = runs.iter().collect();
        all.insert(4, &poisoned);
        let records: Vec<String> = all
            .iter()
            .map(|r| serde_json::to_string(r).unwrap_or_default())
            .collect();

        let stored = join_all(
            all.iter()
                .zip(&records)
                .map(|(r, record)| t.db.insert_run(r, record, 1_796_000_000_000, None)),
        )
        .await;

        for (i, outcome) in stored.iter().enumerate() {
            if i == 4 {
                assert!(outcome.is_err(), "{}: the poisoned upload fails", t.name);
            } else {
                assert!(
                    matches!(outcome, Ok(Stored::Created { .. })),
                    "{}: upload {i} is stored despite its neighbour: {outcome:?}",
                    t.name
                );
            }
        }
        assert_eq!(
            t.db.count(Table::Runs).await.expect("counts runs"),
            10,
            "{}",
            t.name
        );
        assert!(
            t.db.run_record(&poisoned.run_id)
                .await
                .expect("reads")
                .is_none(),
            "{}: nothing of the refused upload is kept",
            t.name
        );
        t.cleanup().await;
    }
}

/// Makes the database refuse to store the run `run_id`, as it would refuse a row it
/// cannot take: a trigger raises an error when that run's row is inserted.
async fn refuse(db: &firsttoken_server::Db, run_id: &str) {
    use firsttoken_server::db::Pool;
    match db.pool() {
        Pool::Sqlite(pool) => {
            let sql = format!(
                "CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.run_id = '{run_id}' \
                 BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            );
            sqlx::query(&sql).execute(pool).await.expect("a trigger");
        }
        Pool::Postgres(pool) => {
            let function = format!(
                "CREATE FUNCTION refuse() RETURNS trigger AS $$ BEGIN \
                 IF NEW.run_id = '{run_id}' THEN RAISE EXCEPTION 'refused by the test'; \
                 END IF; RETURN NEW; END $$ LANGUAGE plpgsql"
            );
            sqlx::query(&function)
                .execute(pool)
                .await
                .expect("a function");
            sqlx::query(
                "CREATE TRIGGER refuse BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION refuse()",
            )
            .execute(pool)
            .await
            .expect("a trigger");
        }
    }
}
