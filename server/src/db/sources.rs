//! Where runs came from, for two days at most: a tag per run, so an operator can purge
//! one source's runs (a flood of made-up uploads) while the collector never keeps an
//! address (migration 0013).
//!
//! A run's tag is HMAC-SHA256 of its uploader's network block (the /24 of an IPv4
//! address, the /48 of an IPv6 one) under a random key of the day it arrived (UTC),
//! cut to 16 hex digits. Whichever instance needs a day's key first makes it; every
//! instance on one database reads the same. A key is forgotten once the day after its
//! own has ended, and a tag once [`KEPT_MS`] old: from then on no one, the operator with
//! the database included, can tell which network a tag was or that two days' runs came
//! from one.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use sqlx::QueryBuilder;

use std::time::Duration;

use super::{DAY_MS, Db, Pool, day_of, now_ms};

/// How long a run's tag is kept: 47 hours, so that forgetting every
/// [`FORGET_EVERY_MS`] never keeps one past two days.
pub const KEPT_MS: i64 = 47 * 3_600_000;
const _: () = assert!(KEPT_MS + FORGET_EVERY_MS <= 2 * DAY_MS);
/// How often tags and keys past their time are forgotten (with the folding of days).
pub const FORGET_EVERY_MS: i64 = 10 * 60_000;

/// The tag of the network block `block` (its address bytes: 3 for a /24, 6 for a /48)
/// under a day's `key`.
pub fn tag(key: &[u8; 32], block: &[u8]) -> String {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("HMAC takes any key");
    mac.update(b"firsttoken run source\n");
    mac.update(block);
    super::hex(&mac.finalize().into_bytes()[..8])
}

/// Whether `text` has the shape of a tag (16 lowercase hex digits).
pub fn is_tag(text: &str) -> bool {
    text.len() == 16
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The key of the day `day_ms` (UTC midnight), made now when no instance has made it.
pub(super) async fn day_key(pool: &Pool, day_ms: i64) -> anyhow::Result<[u8; 32]> {
    let mut fresh = [0u8; 32];
    getrandom::fill(&mut fresh).map_err(|e| anyhow::anyhow!("no random bytes for a key: {e}"))?;
    with_pool!(pool, |pool| {
        let mut insert = QueryBuilder::new("INSERT INTO source_keys (day_ms, key) VALUES (");
        insert.push_bind(day_ms);
        insert.push(", ");
        insert.push_bind(fresh.to_vec());
        insert.push(") ON CONFLICT (day_ms) DO NOTHING");
        insert.build().execute(pool).await?;
        let mut select = QueryBuilder::new("SELECT key FROM source_keys WHERE day_ms = ");
        select.push_bind(day_ms);
        let (key,): (Vec<u8>,) = select.build_query_as().fetch_one(pool).await?;
        key.try_into().map_err(|k: Vec<u8>| {
            anyhow::anyhow!("the stored source key has {} bytes, not 32", k.len())
        })
    })
}

/// Every key still kept at `now_ms`: today's and yesterday's, where made.
pub(super) async fn kept_keys(pool: &Pool, now_ms: i64) -> anyhow::Result<Vec<[u8; 32]>> {
    with_pool!(pool, |pool| {
        let mut select = QueryBuilder::new("SELECT key FROM source_keys WHERE day_ms >= ");
        select.push_bind(day_of(now_ms) - DAY_MS);
        select.push(" ORDER BY day_ms");
        let keys: Vec<Vec<u8>> = select.build_query_scalar().fetch_all(pool).await?;
        Ok(keys.into_iter().filter_map(|k| k.try_into().ok()).collect())
    })
}

/// What [`forget`] removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    pub keys: u64,
    pub tags: u64,
}

/// Forgets the keys of days before yesterday and the tags older than [`KEPT_MS`].
pub(super) async fn forget(pool: &Pool, now_ms: i64) -> anyhow::Result<Forgotten> {
    with_pool!(pool, |pool| {
        let mut keys = QueryBuilder::new("DELETE FROM source_keys WHERE day_ms < ");
        keys.push_bind(day_of(now_ms) - DAY_MS);
        let keys = keys.build().execute(pool).await?.rows_affected();
        let mut tags = QueryBuilder::new("DELETE FROM run_sources WHERE received_at_ms < ");
        tags.push_bind(now_ms - KEPT_MS);
        let tags = tags.build().execute(pool).await?.rows_affected();
        Ok(Forgotten { keys, tags })
    })
}

/// One source's runs still tagged, for the operator's list.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Source {
    pub tag: String,
    pub runs: i64,
    pub samples: i64,
    /// When its latest run arrived (Unix ms).
    pub latest_ms: i64,
}

/// The sources with the most runs still tagged, most first (at most `limit`).
pub(super) async fn busiest(pool: &Pool, now_ms: i64, limit: i64) -> anyhow::Result<Vec<Source>> {
    with_pool!(pool, |pool| {
        let mut select = QueryBuilder::new(
            "SELECT s.tag, COUNT(*), CAST(SUM(r.sample_count) AS BIGINT), MAX(s.received_at_ms) \
             FROM run_sources s JOIN runs r \
             ON r.run_id = s.run_id AND r.received_at_ms = s.received_at_ms \
             WHERE s.received_at_ms >= ",
        );
        select.push_bind(now_ms - KEPT_MS);
        select.push(" GROUP BY s.tag ORDER BY COUNT(*) DESC, s.tag LIMIT ");
        select.push_bind(limit);
        let rows: Vec<(String, i64, Option<i64>, i64)> =
            select.build_query_as().fetch_all(pool).await?;
        Ok(rows
            .into_iter()
            .map(|(tag, runs, samples, latest_ms)| Source {
                tag,
                runs,
                samples: samples.unwrap_or(0),
                latest_ms,
            })
            .collect())
    })
}

impl Db {
    /// The tag of the network block `block` (3 bytes of a /24, 6 of a /48) under the key
    /// of the day `received_at_ms` is in, made when this day has none yet.
    pub async fn source_tag(&self, block: &[u8], received_at_ms: i64) -> anyhow::Result<String> {
        let day = day_of(received_at_ms);
        let cached = *self.source_key.lock().expect("source key lock");
        let key = match cached {
            Some((cached_day, key)) if cached_day == day => key,
            _ => {
                let key = day_key(&self.pool, day).await?;
                *self.source_key.lock().expect("source key lock") = Some((day, key));
                key
            }
        };
        Ok(tag(&key, block))
    }

    /// The tags the network block `block` has under the keys still kept (today's and
    /// yesterday's): what a purge of its runs looks for.
    pub async fn source_tags(&self, block: &[u8], now_ms: i64) -> anyhow::Result<Vec<String>> {
        let keys = kept_keys(&self.pool, now_ms).await?;
        Ok(keys.iter().map(|key| tag(key, block)).collect())
    }

    /// The sources with the most runs still tagged, most first.
    pub async fn busiest_sources(&self, now_ms: i64, limit: i64) -> anyhow::Result<Vec<Source>> {
        busiest(&self.pool, now_ms, limit).await
    }

    /// Forgets the source keys and tags past their time (the collector does this every
    /// [`FORGET_EVERY_MS`]).
    pub async fn forget_sources(&self, now_ms: i64) -> anyhow::Result<Forgotten> {
        forget(&self.pool, now_ms).await
    }

    /// Forgets the source keys and tags past their time now and every
    /// [`FORGET_EVERY_MS`], on the current Tokio runtime, until the pool closes.
    pub fn start_forgetting_sources(&self) {
        let db = self.clone();
        tokio::spawn(async move {
            loop {
                match db.forget_sources(now_ms()).await {
                    Ok(gone) if gone.keys + gone.tags > 0 => {
                        tracing::info!(keys = gone.keys, tags = gone.tags, "forgot run sources");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::error!(error = format!("{e:#}"), "cannot forget sources"),
                }
                let every = FORGET_EVERY_MS as u64;
                tokio::time::sleep(Duration::from_millis(every)).await;
                if db.is_closed() {
                    return;
                }
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_differ_by_block_and_by_key() {
        let (monday, tuesday) = ([1u8; 32], [2u8; 32]);
        let block = [203, 0, 113];
        let t = tag(&monday, &block);
        assert!(is_tag(&t), "{t}");
        assert_eq!(t, tag(&monday, &block));
        assert_ne!(t, tag(&tuesday, &block), "a new day, a new tag");
        assert_ne!(t, tag(&monday, &[203, 0, 114]));
        assert!(!is_tag("203.0.113.0"));
        assert!(!is_tag("ABCDEF0123456789"));
    }
}
