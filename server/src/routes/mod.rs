//! The collector's HTTP API under `/api/v1`, and the operations endpoints.

pub mod access;
pub mod admin;
pub mod ops;
pub mod runs;
pub mod selection;
pub mod studies;
pub mod summary;
