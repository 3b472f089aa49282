//! Multi-row statements of a few fixed sizes, so they stay prepared.
//!
//! sqlx keeps a prepared statement per distinct SQL text on each connection. A multi-row
//! `INSERT` of as many rows as the transaction happens to have is a new text nearly every
//! time: compiled again (by `perf`, about a quarter of SQLite's one writer thread went to
//! its parser and code generator) and, if kept, a program that grows with its rows (a
//! thousand rows of 33 values was about a megabyte). So rows go in statements of `max`
//! rows while that many are left, then of the powers of two below it: 100 rows are 64 +
//! 32 + 4. A table's inserts then have at most log2(`max`) + 1 texts per connection, each
//! compiled once.

/// `rows` cut into the statements that write them, largest first: at most `max` (a power
/// of two) rows each, every one a power of two.
pub(super) fn chunks<T>(rows: &[T], max: usize) -> impl Iterator<Item = &[T]> {
    let mut rest = rows;
    sizes(rows.len(), max).map(move |size| {
        let (chunk, after) = rest.split_at(size);
        rest = after;
        chunk
    })
}

/// The sizes, largest first, of the statements that write `rows` rows, at most `max` (a
/// power of two) each.
fn sizes(mut rows: usize, max: usize) -> impl Iterator<Item = usize> {
    debug_assert!(max.is_power_of_two());
    std::iter::from_fn(move || {
        let size = match rows {
            0 => return None,
            n if n >= max => max,
            n => 1 << n.ilog2(),
        };
        rows -= size;
        Some(size)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_goes_in_a_statement_of_few_sizes() {
        for max in [1, 64, 128] {
            for rows in 0..2_000 {
                let sizes: Vec<usize> = sizes(rows, max).collect();
                assert_eq!(sizes.iter().sum::<usize>(), rows, "{rows}");
                assert!(
                    sizes.iter().all(|s| s.is_power_of_two() && *s <= max),
                    "{rows}: {sizes:?}"
                );
                assert!(sizes.windows(2).all(|w| w[0] >= w[1]), "{rows}: {sizes:?}");
                // Each size below the largest at most once.
                let small: Vec<&usize> = sizes.iter().filter(|s| **s < max).collect();
                assert!(small.windows(2).all(|w| w[0] > w[1]), "{rows}: {sizes:?}");
            }
        }
        assert_eq!(sizes(100, 128).collect::<Vec<_>>(), [64, 32, 4]);
        let rows: Vec<usize> = (0..100).collect();
        let cut: Vec<&[usize]> = chunks(&rows, 128).collect();
        assert_eq!(cut.iter().map(|c| c.len()).collect::<Vec<_>>(), [64, 32, 4]);
        assert_eq!(cut.concat(), rows);
        assert_eq!(
            sizes(800, 128).collect::<Vec<_>>(),
            [128, 128, 128, 128, 128, 128, 32]
        );
    }
}
