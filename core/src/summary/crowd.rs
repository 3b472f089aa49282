//! How a run's requests enter the crowd's cells: what makes a request unlike the others
//! of its phase (its [`condition`]), and how many of each phase a run counts with
//! ([`REQUESTS_PER_RUN_PHASE`]).

/// What made a request unlike the others of its phase, for the crowd's cells: pooled
/// together they would make a figure no request had. A cold request's idle time
/// (`idle 15 s`, `idle 10 min`: one after a minute and one after ten do not wait alike),
/// and a fresh request's connection as the run verified it (`new connection`, `reused
/// connection`: the browser coalesced or reused one, `connection not verified`). `None`
/// for every other request.
pub fn condition(sample: &crate::Sample) -> Option<String> {
    match sample.phase {
        crate::Phase::Cold => sample.idle_ms.map(|ms| {
            if ms % 60_000 == 0 {
                format!("idle {} min", ms / 60_000)
            } else if ms % 1000 == 0 {
                format!("idle {} s", ms / 1000)
            } else {
                format!("idle {ms} ms")
            }
        }),
        crate::Phase::Fresh => Some(
            match sample.conn.as_ref().and_then(|c| c.new_connection) {
                Some(true) => "new connection",
                Some(false) => "reused connection",
                None => "connection not verified",
            }
            .to_owned(),
        ),
        _ => None,
    }
}

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
