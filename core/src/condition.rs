//! What makes a request unlike the others of its phase, for the crowd's cells: its
//! [`condition`], the one crowd dimension read from the record rather than copied.

/// What made a request unlike the others of its phase, for the crowd's cells: pooled
/// together they would make a figure no request had. A cold request's idle time
/// (`idle 15 s`, `idle 10 min`: one after a minute and one after ten do not wait alike),
/// and a fresh request's connection as the run verified it (`new connection`, `reused
/// connection`: the browser coalesced or reused one, `connection not verified`). `None`
/// for every other request.
pub fn condition(sample: &crate::schema::Sample) -> Option<String> {
    match sample.phase {
        crate::plan::Phase::Cold => sample.idle_ms.map(|ms| {
            if ms % 60_000 == 0 {
                format!("idle {} min", ms / 60_000)
            } else if ms % 1000 == 0 {
                format!("idle {} s", ms / 1000)
            } else {
                format!("idle {ms} ms")
            }
        }),
        crate::plan::Phase::Fresh => Some(
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
