//! How much one run weighs in the crowd's figures: at most [`REQUESTS_PER_RUN_PHASE`]
//! requests of each phase, spread evenly over a longer phase ([`counted_in_crowd`]).

/// The most requests of each phase one run counts with in the crowd's figures: as many as
/// the longest phase of the built-in plans (the session plan's 120 steady requests). A run
/// with more counts that many, evenly spread over the phase ([`counted_in_crowd`]), so one
/// upload of 10,000 requests weighs as much as one session, not as eighty. Its every
/// request is still stored, exported and shown to the user who ran it.
pub const REQUESTS_PER_RUN_PHASE: usize = 120;

/// Whether the crowd's figures count the `rank`-th (from 0) of a run's `of` requests of
/// one phase: all of them up to [`REQUESTS_PER_RUN_PHASE`], past it that many spread
/// evenly (the first, and then each one where `rank × cap / of` steps up).
pub fn counted_in_crowd(rank: usize, of: usize) -> bool {
    let cap = REQUESTS_PER_RUN_PHASE;
    of <= cap || rank == 0 || (rank * cap) / of != ((rank - 1) * cap) / of
}
