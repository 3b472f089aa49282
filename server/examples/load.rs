//! Loads the collector on loopback and prints figures (never assertions): uploads per
//! second and upload latency for 100-sample runs from concurrent clients, on SQLite and on
//! PostgreSQL, then the summary's latency over 1,000,000 stored samples (or as many as
//! FIRSTTOKEN_STORED_SAMPLES says).
//!
//! Run with `cargo xtask bench` (release build). PostgreSQL is
//! `postgres://postgres@127.0.0.1:5432/test` unless FIRSTTOKEN_TEST_POSTGRES says otherwise;
//! the benchmark works in a schema of its own and drops it. FIRSTTOKEN_LOAD_DATABASES
//! (`sqlite`, `postgres`, or both comma-separated, the default) picks the databases: 100
//! million samples are for PostgreSQL alone. FIRSTTOKEN_LOAD_REBUILD=1 also times what an
//! upgrade from a version with a row per sample does: every run's cells made again from
//! its record.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use firsttoken_core::schema::Run;
use firsttoken_crowd::stats::percentile;
use firsttoken_server::db::Pool;
use firsttoken_server::{AppState, Config, Db, serve as serve_app};

mod support;
use support::{drop_schema, fill, now_ms, postgres, postgres_url, template, varied};

/// The allocator the server's binary uses (server/src/main.rs), so the collector measured
/// here allocates as the one that ships.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const CLIENTS: usize = 16;

/// How many samples the summaries read (FIRSTTOKEN_STORED_SAMPLES overrides, to see how
/// summaries grow with the data).
fn stored_samples() -> u64 {
    std::env::var("FIRSTTOKEN_STORED_SAMPLES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000_000)
}

/// How long each backend is loaded (FIRSTTOKEN_LOAD_SECONDS overrides, for a quick look).
fn upload_seconds() -> u64 {
    std::env::var("FIRSTTOKEN_LOAD_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let template = template()?;
    let databases =
        std::env::var("FIRSTTOKEN_LOAD_DATABASES").unwrap_or_else(|_| "sqlite,postgres".into());
    let wanted = |name: &str| databases.split(',').any(|d| d.trim() == name);
    let sqlite_dir = tempfile::tempdir()?;
    let sqlite_url = format!("sqlite://{}", sqlite_dir.path().join("load.db").display());
    let mut backends: Vec<(&str, Db, Option<String>)> = Vec::new();
    if wanted("sqlite") {
        backends.push(("SQLite", Db::connect(&sqlite_url).await?, None));
    }
    let pg_url = postgres_url();
    if wanted("postgres") {
        match postgres(&pg_url, "ft_bench").await {
            Ok((db, schema)) => backends.push(("PostgreSQL", db, Some(schema))),
            Err(e) => println!("PostgreSQL left out: {e:#}"),
        }
    }
    anyhow::ensure!(
        !backends.is_empty(),
        "FIRSTTOKEN_LOAD_DATABASES={databases:?} names neither sqlite nor postgres"
    );

    let seconds = upload_seconds();
    println!(
        "\nUploads: {CLIENTS} clients, each sending 100-sample runs back to back for {seconds} s \
         (loopback, client and server on the same 2 cores)\n"
    );
    println!(
        "{:<12} {:>8} {:>10} {:>8} {:>8} {:>8} {:>11}  other answers",
        "database", "stored", "per second", "p50 ms", "p99 ms", "max ms", "per commit"
    );
    for (name, db, _) in &backends {
        let commits = db.commits();
        let (latencies, other) = uploads(db, &template, seconds).await?;
        let commits = db.commits() - commits;
        println!(
            "{name:<12} {:>8} {:>10.0} {:>8.1} {:>8.1} {:>8.1} {:>11.1}  {}",
            latencies.len(),
            latencies.len() as f64 / seconds as f64,
            percentile(&latencies, 50.0).unwrap_or(f64::NAN),
            percentile(&latencies, 99.0).unwrap_or(f64::NAN),
            latencies.iter().copied().fold(f64::NAN, f64::max),
            latencies.len() as f64 / commits.max(1) as f64,
            if other.is_empty() {
                "none".to_owned()
            } else {
                format!("{other:?}")
            },
        );
    }

    let stored = stored_samples();
    println!("\nSummaries over {stored} stored samples (median of 5 requests each)\n");
    println!(
        "{:<24} {:<44} {:>7} {:>8}",
        "database", "summary", "groups", "ms"
    );
    for (name, db, _) in &backends {
        fill(db, &template, stored).await?;
        let (on_disk, counted) = bytes_per_sample(db).await?;
        println!(
            "  ({name} stores {on_disk:.0} bytes per sample on disk, run records and indexes included; its storage limit counts {counted:.0})"
        );
        let address = serve(db).await?;
        let from_cells = summaries(name, address, "").await?;
        // Today's runs (the uploads above, and the last of the filled ones) are read from
        // their cells until the day is over; as the collector does then, fold it too.
        let tomorrow = firsttoken_server::db::day_of(now_ms())
            + firsttoken_server::db::DAY_MS
            + firsttoken_server::db::SETTLE_MS;
        let folding = Instant::now();
        let folded = db.fold_closed_days(tomorrow).await?;
        println!(
            "  (today folded too, as after midnight: {} rows in {:.1} s)",
            folded.rows,
            folding.elapsed().as_secs_f64()
        );
        let folded = summaries(name, address, ", all folded").await?;
        anyhow::ensure!(
            folded == from_cells,
            "{name}: the groups' counts differ once today is folded:\n{from_cells:?}\n{folded:?}"
        );
    }

    // What an upgrade from a version that kept a row per sample does before it serves:
    // every run's cells made again from its record.
    if std::env::var("FIRSTTOKEN_LOAD_REBUILD").is_ok_and(|v| v == "1") {
        println!("\nCells made again from every run's record, as an upgrade does\n");
        for (name, db, _) in &backends {
            let runs = db.count(firsttoken_server::db::Table::Runs).await?;
            let deleted = match db.pool() {
                firsttoken_server::db::Pool::Sqlite(p) => sqlx::query("DELETE FROM cells")
                    .execute(p)
                    .await?
                    .rows_affected(),
                firsttoken_server::db::Pool::Postgres(p) => sqlx::query("DELETE FROM cells")
                    .execute(p)
                    .await?
                    .rows_affected(),
            };
            let start = Instant::now();
            let rebuilt = db.rebuild_cells().await?;
            let took = start.elapsed().as_secs_f64();
            anyhow::ensure!(rebuilt as i64 == runs, "{rebuilt} of {runs} runs rebuilt");
            println!(
                "{name:<12} {runs} runs ({deleted} cells) in {took:.1} s: {:.0} µs a run",
                took * 1e6 / runs.max(1) as f64
            );
        }
    }

    for (_, _, schema) in backends {
        if let Some(schema) = schema {
            drop_schema(&pg_url, &schema).await?;
        }
    }
    Ok(())
}

/// Times each of the benchmark's summaries (median of 5, each computed) and prints a row
/// for it, `label` after the database's name; returns each query's groups' counts (key,
/// runs, samples, answered), for the next pass to be checked against.
async fn summaries(
    name: &str,
    address: std::net::SocketAddr,
    label: &str,
) -> anyhow::Result<Vec<Vec<String>>> {
    // The collector reuses an answer for the same query for 10 s: an end date far in the
    // future, different for every request of the benchmark, makes each a query of its own.
    static ASKED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let name = format!("{name}{label}");
    let mut counts = Vec::new();
    for query in [
        "phase=any",
        "group_by=network",
        "group_by=network,browser,target_version",
        "group_by=network&network=cellular&phase=steady",
    ] {
        let mut times = Vec::new();
        let mut groups = Vec::new();
        let mut refused = None;
        for _ in 1..=5 {
            let year = 2100 + ASKED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let start = Instant::now();
            let response = reqwest::get(format!(
                "http://{address}/api/v1/summary?{query}&to={year}-01-01"
            ))
            .await?;
            let status = response.status();
            let summary: serde_json::Value = response.json().await?;
            times.push(start.elapsed().as_secs_f64() * 1000.0);
            if !status.is_success() {
                // Past the collector's time limit: the figure is that it was refused.
                refused = Some(format!("{status}: {}", summary["error"]["message"]));
                break;
            }
            groups = summary["groups"]
                .as_array()
                .map(|groups| {
                    groups
                        .iter()
                        .map(|g| {
                            format!(
                                "{} {} {} {}",
                                g["key"], g["runs"], g["samples"], g["answered"]
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
        }
        match refused.take() {
            Some(why) => println!(
                "{name:<24} {query:<44} {:>7} {:>8.0}  refused after that: {why}",
                "-",
                times.last().copied().unwrap_or(f64::NAN)
            ),
            None => println!(
                "{name:<24} {query:<44} {:>7} {:>8.0}",
                groups.len(),
                percentile(&times, 50.0).unwrap_or(f64::NAN)
            ),
        }
        counts.push(groups);
    }
    Ok(counts)
}

async fn serve(db: &Db) -> anyhow::Result<std::net::SocketAddr> {
    // What is measured is the storing path, so the per-network budgets (every client here
    // is 127.0.0.1, one network) are out of the way; the attack benchmark measures them.
    let config = Config {
        uploads_per_minute: 1_000_000,
        samples_per_hour: 0,
        upload_bytes_per_hour: 0,
        max_storage_bytes: 0,
        // Summaries over 100 million samples take longer than the default 15 s, and the
        // benchmark is there to say how long.
        summary_time_limit_secs: 600,
        ..Config::defaults()
    };
    let state = AppState::new(db.clone(), config);
    let tcp = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = tcp.local_addr()?;
    tokio::spawn(serve_app(tcp, state, std::future::pending()));
    Ok(address)
}

/// `CLIENTS` clients upload runs back to back for `seconds`; returns each stored
/// upload's latency in ms, and how many answers were anything else, by status.
async fn uploads(
    db: &Db,
    template: &Run,
    seconds: u64,
) -> anyhow::Result<(Vec<f64>, BTreeMap<String, usize>)> {
    let address = serve(db).await?;
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let client = reqwest::Client::new();
    let workers: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (client, template) = (client.clone(), template.clone());
            tokio::spawn(async move {
                let mut latencies = Vec::new();
                let mut other = BTreeMap::<String, usize>::new();
                let mut n = (c as u64) << 32;
                while Instant::now() < deadline {
                    let body = serde_json::to_vec(&varied(&template, n)).expect("serializes");
                    n += 1;
                    let start = Instant::now();
                    let response = client
                        .post(format!("http://{address}/api/v1/runs"))
                        .header("content-type", "application/json")
                        .body(body)
                        .send()
                        .await;
                    let elapsed = start.elapsed().as_secs_f64() * 1000.0;
                    match response {
                        Ok(r) if r.status() == 201 => latencies.push(elapsed),
                        Ok(r) => *other.entry(r.status().to_string()).or_default() += 1,
                        Err(e) => *other.entry(format!("error: {e}")).or_default() += 1,
                    }
                }
                (latencies, other)
            })
        })
        .collect();
    let (mut all, mut other) = (Vec::new(), BTreeMap::new());
    for worker in workers {
        let (latencies, refused) = worker.await?;
        all.extend(latencies);
        for (status, n) in refused {
            *other.entry(status).or_default() += n;
        }
    }
    Ok((all, other))
}

/// The database's size over its samples: what each request a beta user makes costs.
/// What the stored samples take: on disk (SQLite's pages in use; PostgreSQL's tables of
/// this schema with their indexes and TOAST), and as the storage limit counts them.
async fn bytes_per_sample(db: &Db) -> anyhow::Result<(f64, f64)> {
    let samples = db.stored_samples().await? as f64;
    let counted = db.storage_bytes().await? as f64;
    let on_disk =
        match db.pool() {
            Pool::Sqlite(_) => counted,
            Pool::Postgres(pool) => sqlx::query_scalar::<_, i64>(
                "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::BIGINT FROM pg_class c \
             JOIN pg_namespace n ON n.oid = c.relnamespace \
             WHERE n.nspname = current_schema() AND c.relkind = 'r'",
            )
            .fetch_one(pool)
            .await? as f64,
        };
    Ok((on_disk / samples, counted / samples))
}
