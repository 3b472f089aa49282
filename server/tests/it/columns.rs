//! The `samples` table, as each database's migrations leave it, has exactly the stored
//! columns of core's one sample row (`firsttoken_core::export::COLUMNS`), so the INSERT
//! made from that list can never name a column the table lacks, and no column of the
//! table is left unwritten.

use crate::common;

use firsttoken_server::db::Pool;

#[tokio::test]
async fn the_samples_table_is_the_stored_columns_of_the_row() {
    let mut stored: Vec<String> = firsttoken_core::export::stored_columns()
        .filter_map(|c| c.stored_as.map(str::to_owned))
        .collect();
    stored.sort();
    for t in common::databases().await {
        let mut table: Vec<String> = match t.db.pool() {
            Pool::Sqlite(pool) => {
                sqlx::query_scalar("SELECT name FROM pragma_table_info('samples')")
                    .fetch_all(pool)
                    .await
                    .expect("SQLite's columns")
            }
            Pool::Postgres(pool) => sqlx::query_scalar(
                "SELECT column_name::text FROM information_schema.columns \
                 WHERE table_name = 'samples' AND table_schema = current_schema()",
            )
            .fetch_all(pool)
            .await
            .expect("PostgreSQL's columns"),
        };
        table.sort();
        assert_eq!(table, stored, "{}", t.name);
        t.cleanup().await;
    }
}
