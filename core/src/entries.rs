//! Which Resource Timing entry is which request's, among requests to one URL.
//!
//! Requests of a concurrency batch share one URL and start within one step of the
//! browser's clock (0.1 ms in Chromium, 1 ms in Firefox and WebKit), so start times often
//! tie. Browsers then list tied entries in the order they were *made*, which is the order
//! their responses completed, not the order the requests started: pairing the i-th
//! request with the i-th entry would hand one request another's connection details and
//! `Server-Timing` whenever a later request finished first (on a real network, with
//! jitter or answers of different lengths, often). So within a tie, entries are paired by
//! when they ended (`responseEnd`) against when each request's own reader saw its body
//! end, which differ by far more than a clock step; where ends tie too, those requests
//! get no entry rather than a guess.

/// One request, on the page's clock (`performance.now()`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Asked {
    /// Just before its `fetch()`.
    pub start: f64,
    /// When its body was read to the end; `None` if it never was (no entry is made for
    /// it then).
    pub end: Option<f64>,
}

/// One Resource Timing entry: its `startTime` and `responseEnd`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Entry {
    pub start: f64,
    pub end: f64,
}

/// For each request (in the order given, which must be by start), the index of its entry
/// in `entries`, or `None` where it cannot be told. `clock_step_ms` is the browser
/// clock's grain: starts or ends closer than that tie.
///
/// Each request with an end has one entry (the requests that never completed have none),
/// so the counts must match; any other count pairs nothing.
pub fn pair(asked: &[Asked], entries: &[Entry], clock_step_ms: f64) -> Vec<Option<usize>> {
    let mut out = vec![None; asked.len()];
    let owners: Vec<usize> = if entries.len() == asked.len() {
        (0..asked.len()).collect()
    } else {
        (0..asked.len())
            .filter(|&i| asked[i].end.is_some())
            .collect()
    };
    if owners.len() != entries.len() {
        return out;
    }
    let mut by_start: Vec<usize> = (0..entries.len()).collect();
    by_start.sort_by(|&a, &b| entries[a].start.total_cmp(&entries[b].start));
    let tie = clock_step_ms.max(0.0) + 1e-9;
    let mut first = 0;
    while first < by_start.len() {
        // A run of entries whose starts tie, and the requests in the same places.
        let mut last = first + 1;
        while last < by_start.len()
            && entries[by_start[last]].start - entries[by_start[last - 1]].start <= tie
        {
            last += 1;
        }
        let group = &by_start[first..last];
        let requests = &owners[first..last];
        if group.len() == 1 {
            out[requests[0]] = Some(group[0]);
        } else {
            let mut ends: Vec<usize> = group.to_vec();
            ends.sort_by(|&a, &b| entries[a].end.total_cmp(&entries[b].end));
            let mut asked_ends: Vec<usize> = requests.to_vec();
            asked_ends.sort_by(|&a, &b| {
                let end = |i: usize| asked[i].end.unwrap_or(f64::INFINITY);
                end(a).total_cmp(&end(b))
            });
            let distinct = |values: Vec<f64>| values.windows(2).all(|w| w[1] - w[0] > tie);
            let entry_ends = distinct(ends.iter().map(|&e| entries[e].end).collect());
            let request_ends = asked_ends.iter().all(|&i| asked[i].end.is_some())
                && distinct(asked_ends.iter().filter_map(|&i| asked[i].end).collect());
            if entry_ends && request_ends {
                for (&request, &entry) in asked_ends.iter().zip(&ends) {
                    out[request] = Some(entry);
                }
            }
        }
        first = last;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(start: f64, end: f64) -> Asked {
        Asked {
            start,
            end: Some(end),
        }
    }

    /// A batch of 3 starting in one clock step, answering in 3 s, 1 s and 2 s: the
    /// browser lists the entries in the order they completed. Pairing by position gave
    /// the first request the second one's entry.
    #[test]
    fn tied_starts_are_paired_by_their_ends() {
        let asked = [
            asked(100.0, 3_100.0),
            asked(100.0, 1_100.0),
            asked(100.0, 2_100.0),
        ];
        // Completion order: the 1 s one, the 2 s one, the 3 s one.
        let entries = [
            Entry {
                start: 100.0,
                end: 1_099.6,
            },
            Entry {
                start: 100.0,
                end: 2_099.8,
            },
            Entry {
                start: 100.0,
                end: 3_099.7,
            },
        ];
        assert_eq!(pair(&asked, &entries, 0.1), [Some(2), Some(0), Some(1)]);
    }

    #[test]
    fn distinct_starts_pair_in_start_order() {
        let asked = [asked(10.0, 50.0), asked(20.0, 30.0)];
        let entries = [
            Entry {
                start: 20.0,
                end: 30.0,
            },
            Entry {
                start: 10.0,
                end: 50.0,
            },
        ];
        assert_eq!(pair(&asked, &entries, 1.0), [Some(1), Some(0)]);
    }

    #[test]
    fn ends_that_tie_too_give_no_entry() {
        let asked = [asked(5.0, 900.0), asked(5.0, 900.0)];
        let entries = [
            Entry {
                start: 5.0,
                end: 899.9,
            },
            Entry {
                start: 5.0,
                end: 900.0,
            },
        ];
        assert_eq!(pair(&asked, &entries, 1.0), [None, None]);
    }

    #[test]
    fn only_completed_requests_have_entries_and_other_counts_pair_nothing() {
        let cut = Asked {
            start: 5.0,
            end: None,
        };
        let asked = [asked(1.0, 40.0), cut];
        let entries = [Entry {
            start: 1.0,
            end: 40.0,
        }];
        assert_eq!(pair(&asked, &entries, 1.0), [Some(0), None]);
        assert_eq!(pair(&asked, &[], 1.0), [None, None]);
        let three = [entries[0], entries[0], entries[0]];
        assert_eq!(pair(&asked, &three, 1.0), [None, None]);
    }
}
