//! The key the collector signs its operator's share links with, and the studies it
//! signed (`routes/studies.rs` does the signing).

use sqlx::QueryBuilder;

use super::{Db, Pool};

/// The signing key: made (32 random bytes) by whichever instance asks first, then read
/// by all.
pub(super) async fn signing_key(pool: &Pool) -> anyhow::Result<[u8; 32]> {
    let mut fresh = [0u8; 32];
    getrandom::fill(&mut fresh).map_err(|e| anyhow::anyhow!("no random bytes for a key: {e}"))?;
    with_pool!(pool, |pool| {
        let mut insert =
            QueryBuilder::new("INSERT INTO signing_key (id, key, created_at_ms) VALUES (1, ");
        insert.push_bind(fresh.to_vec());
        insert.push(", ");
        insert.push_bind(super::now_ms());
        insert.push(") ON CONFLICT (id) DO NOTHING");
        insert.build().execute(pool).await?;
        let (key,): (Vec<u8>,) = sqlx::query_as("SELECT key FROM signing_key WHERE id = 1")
            .fetch_one(pool)
            .await?;
        key.try_into().map_err(|k: Vec<u8>| {
            anyhow::anyhow!("the stored signing key has {} bytes, not 32", k.len())
        })
    })
}

/// Records that the study `study_id` was signed now, unless it was before; when it was
/// first signed.
pub(super) async fn record_signed(pool: &Pool, study_id: &str, title: &str) -> anyhow::Result<i64> {
    with_pool!(pool, |pool| {
        let mut insert = QueryBuilder::new(
            "INSERT INTO signed_studies (study_id, title, signed_at_ms) VALUES (",
        );
        insert.push_bind(study_id.to_owned());
        insert.push(", ");
        insert.push_bind(title.to_owned());
        insert.push(", ");
        insert.push_bind(super::now_ms());
        insert.push(") ON CONFLICT (study_id) DO NOTHING");
        insert.build().execute(pool).await?;
        anyhow::Ok(())
    })?;
    Ok(signed(pool, study_id).await?.unwrap_or_default())
}

/// When the study `study_id` was signed, if this collector signed it.
pub(super) async fn signed(pool: &Pool, study_id: &str) -> anyhow::Result<Option<i64>> {
    with_pool!(pool, |pool| {
        let mut select =
            QueryBuilder::new("SELECT signed_at_ms FROM signed_studies WHERE study_id = ");
        select.push_bind(study_id.to_owned());
        let row: Option<(i64,)> = select.build_query_as().fetch_optional(pool).await?;
        Ok(row.map(|(at,)| at))
    })
}

impl Db {
    /// The key share links are signed with: made at the first call on a new database, the
    /// same for every instance after.
    pub async fn signing_key(&self) -> anyhow::Result<[u8; 32]> {
        signing_key(&self.pool).await
    }

    /// Records that the operator signed the study `study_id` (now, unless it was signed
    /// before); when it was first signed, in ms since 1970.
    pub async fn record_signed_study(&self, study_id: &str, title: &str) -> anyhow::Result<i64> {
        record_signed(&self.pool, study_id, title).await
    }

    /// When the study `study_id` was signed, if this collector signed it.
    pub async fn signed_study(&self, study_id: &str) -> anyhow::Result<Option<i64>> {
        signed(&self.pool, study_id).await
    }
}
