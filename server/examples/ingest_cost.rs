//! What one upload of a 100-sample run costs the collector in CPU, stage by stage, and so
//! how many uploads a second the machine's cores could take at best. Prints figures, never
//! assertions. The stages are the upload route's own, in its order: the typed parse (a
//! malformed body then pays two more passes, timed apart), `Run::validate`, the
//! record the collector stores (serialized again, and its SHA-256), and storing (the
//! record compressed and the run's cells counted, then the group-commit writer: the
//! run, its 100 sample rows and its cells), on SQLite and on
//! PostgreSQL. What it leaves out is HTTP (hyper, axum, reading the body), which the load
//! benchmark includes.
//!
//! The parse, validate and record stages run on one thread, so their time is CPU time.
//! Storing is measured as CPU time of this process (SQLite runs inside it) plus, on
//! PostgreSQL, of the server's processes, read from `/proc` (Linux).
//!
//! It keeps the system allocator, unlike the server's binary (mimalloc): it holds every
//! run of a stage at once (3,000 runs, hundreds of megabytes with their bodies and
//! records), which no server does, and under mimalloc that pattern spent 42% of its time
//! in the kernel zeroing pages that mimalloc had given back and took again, doubling
//! every stage. The load benchmark, which serves uploads as the server does, uses the
//! binary's allocator.
//!
//! Run with `cargo run --release -p firsttoken-server --example ingest_cost`.
//! PostgreSQL is `postgres://postgres@127.0.0.1:5432/test` unless FIRSTTOKEN_TEST_POSTGRES
//! says otherwise; it works in a schema of its own and drops it.

use std::time::{Duration, Instant};

use anyhow::Context;
use firsttoken_core::schema::Run;
use firsttoken_server::Db;
use firsttoken_server::db::sha256_hex;

mod support;
use support::{drop_schema, postgres, postgres_url, template, varied};

/// Uploads per stage: enough for a few seconds of each.
const RUNS: u64 = 3_000;
/// Uploads storing at once, as concurrent requests would (the writer commits them together).
const AT_ONCE: usize = 16;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let template = template()?;
    let bodies: Vec<Vec<u8>> = (0..RUNS)
        .map(|n| serde_json::to_vec(&varied(&template, n)))
        .collect::<Result<_, _>>()?;
    let body_kb = bodies.iter().map(Vec::len).sum::<usize>() as f64 / RUNS as f64 / 1024.0;
    println!(
        "\nOne upload: a run of {} samples, {body_kb:.1} KiB of JSON; {RUNS} uploads per stage\n",
        template.samples.len()
    );
    println!("{:<52} {:>12}", "stage", "µs per run");
    let mut total = 0.0;
    let mut row = |stage: &str, micros: f64| {
        total += micros;
        println!("{stage:<52} {micros:>12.0}");
    };

    let start = Instant::now();
    let mut runs = Vec::with_capacity(bodies.len());
    for body in &bodies {
        runs.push(serde_json::from_slice::<Run>(body)?);
    }
    row("typed parse (serde_json)", per_run(start.elapsed()));

    let start = Instant::now();
    for run in &runs {
        run.validate()?;
    }
    row("Run::validate", per_run(start.elapsed()));

    let start = Instant::now();
    let mut records = Vec::with_capacity(runs.len());
    for run in &runs {
        let record = serde_json::to_string(run)?;
        let sha = sha256_hex(record.as_bytes());
        records.push((record, sha));
    }
    row(
        "the stored record: serialized again, SHA-256",
        per_run(start.elapsed()),
    );
    let before_storing = total;

    let sqlite_dir = tempfile::tempdir()?;
    let sqlite_url = format!("sqlite://{}", sqlite_dir.path().join("cost.db").display());
    let sqlite = Db::connect(&sqlite_url).await?;
    let (cpu, wall) = store(&sqlite, &runs, &records).await?;
    println!(
        "{:<52} {:>12.0}   ({:.0} runs/s on the clock)",
        "storing on SQLite (compress, cells, writer; CPU)",
        cpu,
        RUNS as f64 / wall.as_secs_f64()
    );
    let sqlite_total = before_storing + cpu;

    let pg_url = postgres_url();
    let pg_total = match postgres(&pg_url, "ft_cost").await {
        Ok((db, schema)) => {
            let postgres_before = postgres_cpu_seconds();
            let (cpu, wall) = store(&db, &runs, &records).await?;
            let server = (postgres_cpu_seconds() - postgres_before) * 1e6 / RUNS as f64;
            println!(
                "{:<52} {:>12.0}   ({:.0} runs/s on the clock)",
                "storing on PostgreSQL, the collector's CPU",
                cpu,
                RUNS as f64 / wall.as_secs_f64()
            );
            println!(
                "{:<52} {:>12.0}",
                "storing on PostgreSQL, PostgreSQL's own CPU", server
            );
            drop_schema(&pg_url, &schema).await?;
            Some(before_storing + cpu + server)
        }
        Err(e) => {
            println!("PostgreSQL left out: {e:#}");
            None
        }
    };

    // What a malformed upload costs on top: the passes that say what is wrong.
    let start = Instant::now();
    for body in &bodies {
        serde_json::from_slice::<serde::de::IgnoredAny>(body)?;
        let mut deserializer = serde_json::Deserializer::from_slice(body);
        let _: Run = serde_path_to_error::deserialize(&mut deserializer)?;
    }
    println!(
        "\nNot counted, as a well-formed upload does not pay it: a malformed one's syntax \
         pass and parse with the field path, {:.0} µs (for a body this size).",
        per_run(start.elapsed())
    );

    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    println!("\nAt best, with every core doing nothing but this ({cores} cores):");
    println!(
        "  SQLite      {sqlite_total:>6.0} µs a run → {:>5.0} uploads/s, before HTTP",
        cores * 1e6 / sqlite_total
    );
    if let Some(pg_total) = pg_total {
        println!(
            "  PostgreSQL  {pg_total:>6.0} µs a run → {:>5.0} uploads/s, before HTTP",
            cores * 1e6 / pg_total
        );
    }
    Ok(())
}

fn per_run(elapsed: Duration) -> f64 {
    elapsed.as_secs_f64() * 1e6 / RUNS as f64
}

/// Stores every run, `AT_ONCE` at a time; returns this process's CPU µs per run and the
/// time on the clock.
async fn store(
    db: &Db,
    runs: &[Run],
    records: &[(String, String)],
) -> anyhow::Result<(f64, Duration)> {
    let cpu_before = process_cpu_seconds(std::process::id())?;
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for lane in 0..AT_ONCE {
        let db = db.clone();
        let work: Vec<(Run, String)> = runs
            .iter()
            .zip(records)
            .skip(lane)
            .step_by(AT_ONCE)
            .map(|(run, (record, _))| (run.clone(), record.clone()))
            .collect();
        tasks.spawn(async move {
            for (run, record) in work {
                db.insert_run(&run, &record, 1_796_000_000_000, None)
                    .await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let wall = start.elapsed();
    let cpu = process_cpu_seconds(std::process::id())? - cpu_before;
    Ok((cpu * 1e6 / runs.len() as f64, wall))
}

/// User and system CPU seconds of a process, all its threads, from `/proc/<pid>/stat`
/// (clock ticks of 1/100 s, Linux's `USER_HZ`).
fn process_cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // The command name may hold spaces; the fields after it are space-separated.
    let after_name = stat.rsplit_once(')').context("a stat line")?.1;
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let ticks = |i: usize| -> anyhow::Result<f64> {
        Ok(fields.get(i).context("a stat field")?.parse::<f64>()?)
    };
    // utime and stime are the 14th and 15th fields; the name was the 2nd and state the 3rd.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// CPU seconds of every process named `postgres` on this machine (the server and its
/// backends), summed; 0 where none can be read.
fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|name| name.trim() == "postgres")
        })
        .filter_map(|pid| process_cpu_seconds(pid).ok())
        .sum()
}
