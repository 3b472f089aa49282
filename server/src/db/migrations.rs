//! The schema's migrations, built into the binary: each backend's files under
//! `migrations/`, listed by `build.rs`, made into sqlx `Migration`s exactly as
//! `sqlx::migrate!` makes them (version, description, type, checksum and the
//! `-- no-transaction` mark, from the file's name and text), so a database migrated by
//! either finds every applied migration unchanged.
//!
//! Why not the macro: sqlx's `macros` feature compiles the database drivers, tokio and
//! their dependencies a second time, for the compiler, in every build of the collector
//! (about 50 s of CPU in a test build on 2 cores).

use std::borrow::Cow;

use futures_util::future::BoxFuture;
use sqlx::migrate::{Migration, MigrationSource, MigrationType, Migrator};

mod files {
    include!(concat!(env!("OUT_DIR"), "/migrations.rs"));
}

/// SQLite's migrations.
pub async fn sqlite() -> anyhow::Result<Migrator> {
    migrator(files::SQLITE).await
}

/// PostgreSQL's migrations.
pub async fn postgres() -> anyhow::Result<Migrator> {
    migrator(files::POSTGRES).await
}

async fn migrator(files: &'static [(&'static str, &'static str)]) -> anyhow::Result<Migrator> {
    Ok(Migrator::new(Embedded(files)).await?)
}

/// Migration files built into the binary, `(file name, SQL)`.
#[derive(Debug)]
struct Embedded(&'static [(&'static str, &'static str)]);

impl<'s> MigrationSource<'s> for Embedded {
    fn resolve(
        self,
    ) -> BoxFuture<'s, Result<Vec<Migration>, Box<dyn std::error::Error + Send + Sync>>> {
        Box::pin(async move {
            let mut migrations = Vec::new();
            for &(file_name, sql) in self.0 {
                migrations.push(migration(file_name, sql)?);
            }
            migrations.sort_by_key(|m| m.version);
            Ok(migrations)
        })
    }
}

/// One file as sqlx reads one from a folder (`sqlx::migrate::resolve_blocking`, which
/// `sqlx::migrate!` calls): `<version>_<description>.sql`, underscores in the description
/// read as spaces, `.up.sql`/`.down.sql` for reversible ones.
fn migration(file_name: &str, sql: &'static str) -> anyhow::Result<Migration> {
    let Some((version, rest)) = file_name
        .split_once('_')
        .filter(|(_, r)| r.ends_with(".sql"))
    else {
        anyhow::bail!("the migration {file_name:?} is not named <version>_<description>.sql");
    };
    let version: i64 = version.parse().map_err(|_| {
        anyhow::anyhow!("the migration {file_name:?} does not start with a whole number")
    })?;
    let migration_type = MigrationType::from_filename(rest);
    let description = rest
        .trim_end_matches(migration_type.suffix())
        .replace('_', " ");
    Ok(Migration::new(
        version,
        Cow::Owned(description),
        migration_type,
        Cow::Borrowed(sql),
        sql.starts_with("-- no-transaction"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reference: what sqlx itself reads from each folder, the function
    /// `sqlx::migrate!` expands from. Every field a database records or checks agrees.
    #[tokio::test]
    async fn built_in_migrations_are_what_sqlx_reads_from_the_folders() {
        for (folder, migrator) in [
            ("sqlite", sqlite().await.expect("sqlite")),
            ("postgres", postgres().await.expect("postgres")),
        ] {
            let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("migrations")
                .join(folder);
            let reference = sqlx::migrate::resolve_blocking(&dir).expect("the folder reads");
            let ours: Vec<&Migration> = migrator.iter().collect();
            assert_eq!(ours.len(), reference.len(), "{folder}");
            assert!(ours.len() >= 16, "{folder}: {} migrations", ours.len());
            for (ours, (theirs, path)) in ours.iter().zip(&reference) {
                let at = format!("{folder}: {}", path.display());
                assert_eq!(ours.version, theirs.version, "{at}");
                assert_eq!(ours.description, theirs.description, "{at}");
                assert_eq!(ours.migration_type, theirs.migration_type, "{at}");
                assert_eq!(ours.checksum, theirs.checksum, "{at}");
                assert_eq!(ours.no_tx, theirs.no_tx, "{at}");
                assert_eq!(ours.sql, theirs.sql, "{at}");
            }
        }
    }

    #[test]
    fn a_badly_named_file_is_refused_by_name() {
        for (name, says) in [("runs.sql", "runs.sql"), ("first_runs.sql", "whole number")] {
            match migration(name, "SELECT 1") {
                Ok(m) => panic!("{name} was read as version {}", m.version),
                Err(err) => assert!(err.to_string().contains(says), "{name}: {err}"),
            }
        }
    }
}
