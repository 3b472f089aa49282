//! Rebuilds the server when a migration is added or changed: `sqlx::migrate!` embeds
//! `migrations/` when the crate compiles, and cargo does not otherwise watch that folder.

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
