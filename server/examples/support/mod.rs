//! What the collector benchmarks share: runs that look like a crowd's, a database filled
//! with them, and a PostgreSQL schema of their own.
#![allow(dead_code)] // each benchmark uses part of this

use std::str::FromStr;
use std::time::{Duration, Instant};

use anyhow::Context;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};

use firsttoken_core::plan::Phase;
use firsttoken_core::plan::PhasePlan;
use firsttoken_core::schema::NetworkLabel;
use firsttoken_core::schema::{Run, Sample};
use firsttoken_crowd::stats::SplitMix64;
use firsttoken_server::Db;

pub const SAMPLES_PER_RUN: u32 = 100;

/// The example run, turned into a 100-sample steady run.
pub fn template() -> anyhow::Result<Run> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../core/schema/example-run.v1.json");
    let mut run: Run = serde_json::from_slice(&std::fs::read(path)?)?;
    run.targets[0].demo = false;
    let sample = run.samples[0].clone();
    run.samples = (0..SAMPLES_PER_RUN)
        .map(|i| Sample {
            index: i,
            ..sample.clone()
        })
        .collect();
    run.plan.phases = vec![PhasePlan::Steady {
        requests: SAMPLES_PER_RUN,
    }];
    Ok(run)
}

/// Run `n`: a fresh id, a network, a browser and a version, and TTFTs drawn around a
/// network-dependent median, each split whole into layers (a time before sending, the
/// server's own time to its first token, a network part), as a target that reports its
/// time gives them: the summaries' most work.
pub fn varied(template: &Run, n: u64) -> Run {
    let mut run = template.clone();
    let mut rng = SplitMix64::new(n);
    run.run_id = format!(
        "{:08x}-0000-4000-8000-{:012x}",
        n >> 48,
        n & 0xffff_ffff_ffff
    );
    run.client.network = NetworkLabel::ALL[(n % 6) as usize];
    run.client.browser =
        Some(["Chrome", "Safari", "Firefox", "Edge"][(n / 6 % 4) as usize].to_owned());
    run.targets[0].version = Some(format!("v{}", n % 3));
    let base = 250.0 + 100.0 * (n % 6) as f64;
    for s in &mut run.samples {
        let ttft = base + (rng.next_u64() % 400) as f64;
        s.phase = Phase::Steady;
        s.ttft_any_ms = Some(ttft);
        s.ttft_ms = Some(ttft);
        s.last_token_ms = Some(ttft + 900.0);
        s.e2e_ms = Some(ttft + 910.0);
        let sent = (rng.next_u64() % 40) as f64;
        if let Some(conn) = &mut s.conn {
            conn.sent_ms = Some(sent);
        }
        let server = ttft - sent - 0.3 * base;
        s.stream_timings = Some([("first_token_written_ms".to_owned(), server)].into());
    }
    run
}

/// Days the stored runs are spread over, today the last: an operator's season of data.
pub const DAYS: i64 = 90;

/// Stores runs until the database holds `samples` samples, straight through the
/// storage layer (the benchmarks measure the upload path on their own), received evenly
/// over the last [`DAYS`] days (on PostgreSQL into their months' partitions), then folds
/// the days that are over as the collector does in the background.
pub async fn fill(db: &Db, template: &Run, samples: u64) -> anyhow::Result<()> {
    let began = Instant::now();
    let have = db.stored_samples().await? as u64;
    let runs = samples
        .saturating_sub(have)
        .div_ceil(u64::from(SAMPLES_PER_RUN));
    let now = now_ms();
    let start = firsttoken_server::db::day_of(now) - (DAYS - 1) * firsttoken_server::db::DAY_MS;
    let span = now - start;
    let mut month = start;
    while month <= now {
        db.prepare_partitions(month).await?;
        month += 28 * firsttoken_server::db::DAY_MS;
    }
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..4u64 {
        let (db, template) = (db.clone(), template.clone());
        tasks.spawn(async move {
            let mut n = (1u64 << 40) + worker;
            for i in 0..runs.div_ceil(4) {
                let run = varied(&template, n);
                n += 4;
                let record = serde_json::to_string(&run)?;
                // Spread by run number over the days, today's up to now.
                let position = (i * 4 + worker) as i64;
                let at = (start + position * span / (runs as i64).max(1)).min(now);
                db.insert_run(&run, &record, at, None).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let total = db.stored_samples().await?;
    if runs == 0 {
        println!(
            "  ({} holds {total} samples, all received today: nothing to fill)",
            db.backend()
        );
    } else {
        println!(
            "  ({} now holds {total} samples, {runs} runs of them over {DAYS} days; filling took {:.0} s)",
            db.backend(),
            began.elapsed().as_secs_f64()
        );
    }
    let folding = Instant::now();
    let folded = db.fold_closed_days(now_ms()).await?;
    println!(
        "  ({} days folded into {} rows in {:.1} s)",
        folded.days,
        folded.rows,
        folding.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Unix milliseconds now: filled runs are received now, so on PostgreSQL they land in
/// this month's partitions as uploads do.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// PostgreSQL at FIRSTTOKEN_TEST_POSTGRES, or the local test database.
pub fn postgres_url() -> String {
    std::env::var("FIRSTTOKEN_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

/// A fresh schema on PostgreSQL, named `{prefix}_{process id}`, and the collector's
/// database in it.
pub async fn postgres(url: &str, prefix: &str) -> anyhow::Result<(Db, String)> {
    let base = PgConnectOptions::from_str(url)?;
    let admin = PgPoolOptions::new()
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(base.clone())
        .await
        .with_context(|| format!("cannot connect to {url}"))?;
    let schema = format!("{prefix}_{}", std::process::id());
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&admin)
        .await?;
    sqlx::query(&format!("CREATE SCHEMA {schema}"))
        .execute(&admin)
        .await?;
    let db = Db::connect_postgres(base.options([("search_path", schema.as_str())])).await?;
    Ok((db, schema))
}

/// Drops what [`postgres`] made.
pub async fn drop_schema(url: &str, schema: &str) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .connect_with(PgConnectOptions::from_str(url)?)
        .await?;
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&pool)
        .await?;
    Ok(())
}
