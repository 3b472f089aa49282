//! The query parameters summaries, exports and purges share: which samples
//! (`network=cellular&phase=steady&from=2026-11-01`), and for summaries how to group them.

use firsttoken_core::plan::Phase;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use time::macros::format_description;

use crate::db::{DemoSamples, Dimension, Filter, Value};
use crate::error::AppError;

/// What a route reads from its query string.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    pub filter: Filter,
    pub group_by: Vec<Dimension>,
    pub min_samples: Option<usize>,
    pub min_runs: Option<usize>,
    pub format: Option<Format>,
    /// A purge's source (`source=` or `source_tag=`).
    pub source: Option<Source>,
}

/// Whose runs a purge takes: a network's (found by its tags under the keys still kept)
/// or a tag's from `GET /api/v1/admin/sources`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A /24's or /48's address bytes.
    Block(Vec<u8>),
    Tag(String),
}

/// An export's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Csv,
    Ndjson,
}

/// Which route reads the query: each takes a few parameters of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// `group_by`, `min_samples`; the phase is `steady` unless the query says (`any`:
    /// every phase), since pooling phases mixes what should be compared, and a summary of
    /// cold or fresh requests (or of any phase) is grouped by `condition` too.
    Summary,
    /// `format`.
    Export,
    Purge,
}

const COMMON: [&str; 4] = ["from", "to", "include_demo", "phase"];

/// Reads a query string's parameters; a parameter it does not know, or a bad value, is an
/// error that names it.
pub fn parse(params: &[(String, String)], purpose: Purpose) -> Result<Selection, AppError> {
    let bad = |message: String| AppError::BadRequest(message);
    let mut selection = Selection {
        filter: Filter::default(),
        group_by: Vec::new(),
        min_samples: None,
        min_runs: None,
        format: (purpose == Purpose::Export).then_some(Format::Ndjson),
        source: None,
    };
    let mut phase_given = false;
    for (name, value) in params {
        if params.iter().filter(|(n, _)| n == name).count() > 1 {
            return Err(bad(format!("query parameter {name} is given twice")));
        }
        match (name.as_str(), purpose) {
            ("phase", _) => {
                phase_given = true;
                if value != "any" {
                    if Phase::from_name(value).is_none() {
                        return Err(bad(format!(
                            "phase must be one of probe, warmup, steady, fresh, concurrency, cold, compare or any, got {value:?}"
                        )));
                    }
                    selection
                        .filter
                        .equals
                        .push((Dimension::Phase, Value::Text(value.clone())));
                }
            }
            ("from", _) => selection.filter.from_ms = Some(time_ms(name, value)?),
            ("to", _) => selection.filter.to_ms = Some(time_ms(name, value)?),
            ("include_demo", _) => {
                selection.filter.demo = match value.as_str() {
                    "true" => DemoSamples::Include,
                    "false" => DemoSamples::Exclude,
                    "only" => DemoSamples::Only,
                    _ => {
                        return Err(bad(format!(
                            "include_demo must be true, false or only, got {value:?}"
                        )));
                    }
                }
            }
            ("group_by", Purpose::Summary) => {
                for part in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                    let dimension = Dimension::from_name(part).ok_or_else(|| {
                        bad(format!(
                            "cannot group by {part:?}; choose from {}",
                            dimension_names()
                        ))
                    })?;
                    if selection.group_by.contains(&dimension) {
                        return Err(bad(format!("group_by names {part} twice")));
                    }
                    selection.group_by.push(dimension);
                }
            }
            ("min_samples", Purpose::Summary) => {
                selection.min_samples = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or_else(|| bad(format!("min_samples must be a whole number from 1 to 1000000, got {value:?}")))?,
                );
            }
            ("min_runs", Purpose::Summary) => {
                selection.min_runs = Some(
                    value
                        .parse()
                        .ok()
                        .filter(|n| (1..=1_000_000).contains(n))
                        .ok_or_else(|| {
                            bad(format!(
                                "min_runs must be a whole number from 1 to 1000000, got {value:?}"
                            ))
                        })?,
                );
            }
            ("format", Purpose::Export) => {
                selection.format = Some(match value.as_str() {
                    "csv" => Format::Csv,
                    "ndjson" => Format::Ndjson,
                    _ => return Err(bad(format!("format must be csv or ndjson, got {value:?}"))),
                });
            }
            ("source" | "source_tag", Purpose::Purge) => {
                if selection.source.is_some() {
                    return Err(bad("give source or source_tag, not both".into()));
                }
                selection.source = Some(if name == "source" {
                    Source::Block(source_block(value)?)
                } else if crate::db::sources::is_tag(value) {
                    Source::Tag(value.clone())
                } else {
                    return Err(bad(format!(
                        "source_tag must be 16 lowercase hex digits (a tag from GET /api/v1/admin/sources), got {value:?}"
                    )));
                });
            }
            (other, _) => match Dimension::from_name(other) {
                Some(dimension) => {
                    let value = Value::parse(dimension, value).map_err(|e| bad(e.to_string()))?;
                    selection.filter.equals.push((dimension, value));
                }
                None => {
                    let own = match purpose {
                        Purpose::Summary => ", group_by, min_samples, min_runs",
                        Purpose::Export => ", format",
                        Purpose::Purge => ", source, source_tag",
                    };
                    return Err(bad(format!(
                        "unknown query parameter {other:?}; known: {}, {}{own}",
                        COMMON.join(", "),
                        dimension_names()
                    )));
                }
            },
        }
    }
    if purpose == Purpose::Summary && !phase_given {
        selection
            .filter
            .equals
            .push((Dimension::Phase, Value::Text("steady".into())));
    }
    // Cold requests after different idle times, and fresh requests on connections proved
    // new or not, are unlike: a summary that can hold either is grouped by its condition
    // too, unless it filters to one.
    let phase = selection.filter.equals.iter().find_map(|(d, v)| match v {
        Value::Text(name) if *d == Dimension::Phase => Some(name.as_str()),
        _ => None,
    });
    let unlike = matches!(phase, None | Some("cold" | "fresh"));
    let condition_named = selection.group_by.contains(&Dimension::Condition)
        || selection
            .filter
            .equals
            .iter()
            .any(|(d, _)| *d == Dimension::Condition);
    if purpose == Purpose::Summary && unlike && !condition_named {
        selection.group_by.push(Dimension::Condition);
    }
    if let (Some(from), Some(to)) = (selection.filter.from_ms, selection.filter.to_ms)
        && from >= to
    {
        return Err(bad("from must be before to".into()));
    }
    if purpose == Purpose::Summary {
        // Whole hours only: windows a millisecond wide once picked out single runs.
        selection.filter.from_ms = selection.filter.from_ms.map(|ms| ms - ms % HOUR_MS);
        selection.filter.to_ms = selection
            .filter
            .to_ms
            .map(|ms| (ms + (HOUR_MS - ms % HOUR_MS) % HOUR_MS).min(LATEST_MS + 1));
    }
    Ok(selection)
}

/// The block a purge's `source` names: an address, or a network written as a /24
/// (IPv4) or /48 (IPv6).
fn source_block(value: &str) -> Result<Vec<u8>, AppError> {
    let bad = |why: &str| {
        AppError::BadRequest(format!(
            "source must be an address or a /24 (IPv4) or /48 (IPv6) network, got {value:?}: {why}"
        ))
    };
    let (address, bits) = match value.split_once('/') {
        Some((address, bits)) => (address, Some(bits)),
        None => (value, None),
    };
    let address: std::net::IpAddr = address.parse().map_err(|_| bad("not an address"))?;
    let prefix = crate::limit::Prefix::from(address);
    let whole = match prefix {
        crate::limit::Prefix::V4(_) => "24",
        _ => "48",
    };
    if bits.is_some_and(|bits| bits != whole) {
        return Err(bad(&format!(
            "runs are told apart by /24 and /48 only, so this network would be /{whole}"
        )));
    }
    let block = prefix.block().ok_or_else(|| bad("not an address"))?;
    Ok(block.octets().to_vec())
}

fn dimension_names() -> String {
    Dimension::ALL.map(Dimension::name).join(", ")
}

/// `2026-11-29`, `2026-11-29T12:00:00Z` (RFC 3339) or Unix milliseconds.
/// The latest time a filter may name: the end of year 9999, in Unix milliseconds. Past
/// it a day's arithmetic overflowed, and a far-future `from` once matched every day.
const LATEST_MS: i64 = 253_402_300_799_999;
/// A summary's time window is widened to whole hours (UTC): `from` down, `to` up.
pub const HOUR_MS: i64 = 3_600_000;

fn time_ms(name: &str, value: &str) -> Result<i64, AppError> {
    if let Ok(ms) = value.parse::<i64>() {
        if !(0..=LATEST_MS).contains(&ms) {
            return Err(AppError::BadRequest(format!(
                "{name} must be Unix milliseconds from 0 to {LATEST_MS} (the end of 9999), got {value}"
            )));
        }
        return Ok(ms);
    }
    let at = OffsetDateTime::parse(value, &Rfc3339).ok().or_else(|| {
        time::Date::parse(value, format_description!("[year]-[month]-[day]"))
            .ok()
            .map(|d| d.midnight().assume_utc())
    });
    at.map(|t| (t.unix_timestamp_nanos() / 1_000_000) as i64).ok_or_else(|| {
        AppError::BadRequest(format!(
            "{name} must be a date (2026-11-29), a time (2026-11-29T12:00:00Z) or Unix milliseconds, got {value:?}"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn summaries_default_to_the_steady_phase() {
        let s = parse(&query(&[("group_by", "network,browser")]), Purpose::Summary).expect("valid");
        assert_eq!(s.group_by, vec![Dimension::Network, Dimension::Browser]);
        assert_eq!(
            s.filter.equals,
            vec![(Dimension::Phase, Value::Text("steady".into()))]
        );
        let any = parse(&query(&[("phase", "any")]), Purpose::Summary).expect("valid");
        assert!(any.filter.equals.is_empty());
        assert_eq!(any.group_by, vec![Dimension::Condition]);
    }

    /// Cold requests after a minute and after ten, fresh requests proved new and not:
    /// a summary that can hold them is grouped by their condition, unless it names one.
    #[test]
    fn cold_and_fresh_summaries_are_grouped_by_their_condition() {
        let of = |pairs: &[(&str, &str)]| {
            parse(&query(pairs), Purpose::Summary)
                .expect("valid")
                .group_by
        };
        assert_eq!(
            of(&[("phase", "cold"), ("group_by", "network")]),
            vec![Dimension::Network, Dimension::Condition]
        );
        assert_eq!(of(&[("phase", "fresh")]), vec![Dimension::Condition]);
        assert_eq!(
            of(&[("phase", "fresh"), ("condition", "new connection")]),
            Vec::<Dimension>::new()
        );
        assert_eq!(
            of(&[("phase", "cold"), ("group_by", "condition,os")]),
            vec![Dimension::Condition, Dimension::Os]
        );
        assert!(of(&[("phase", "steady")]).is_empty());
        let export = parse(&query(&[("phase", "cold")]), Purpose::Export).expect("valid");
        assert!(export.group_by.is_empty());
    }

    #[test]
    fn times_read_three_ways() {
        let s = parse(
            &query(&[("from", "2026-11-01"), ("to", "2026-11-29T12:00:00Z")]),
            Purpose::Export,
        )
        .expect("valid");
        assert_eq!(s.filter.from_ms, Some(1_793_491_200_000));
        assert_eq!(s.filter.to_ms, Some(1_795_953_600_000));
        let s = parse(&query(&[("from", "5")]), Purpose::Purge).expect("valid");
        assert_eq!(s.filter.from_ms, Some(5));
        // Out of range: refused, naming the range (a far-future `from` once overflowed
        // a day's arithmetic and matched every folded day).
        for far in ["9223372036854775807", "-1"] {
            let refused = parse(&query(&[("from", far)]), Purpose::Summary)
                .expect_err("refused")
                .to_string();
            assert!(
                refused.contains("from must be Unix milliseconds from 0"),
                "{refused}"
            );
        }
    }

    #[test]
    fn bad_queries_name_what_is_wrong() {
        let err = |pairs: &[(&str, &str)], purpose| {
            parse(&query(pairs), purpose)
                .expect_err("refused")
                .to_string()
        };
        assert!(
            err(&[("colour", "red")], Purpose::Summary)
                .contains("unknown query parameter \"colour\"")
        );
        assert!(err(&[("group_by", "ip")], Purpose::Summary).contains("cannot group by \"ip\""));
        assert!(
            err(&[("group_by", "os")], Purpose::Export)
                .contains("unknown query parameter \"group_by\"")
        );
        assert!(
            err(&[("mobile", "maybe")], Purpose::Summary).contains("mobile must be true or false")
        );
        assert!(err(&[("concurrency", "many")], Purpose::Summary).contains("whole number"));
        assert!(err(&[("phase", "soak")], Purpose::Summary).contains("phase must be one of"));
        assert!(err(&[("from", "yesterday")], Purpose::Summary).contains("from must be a date"));
        assert!(
            err(
                &[("from", "2026-11-02"), ("to", "2026-11-01")],
                Purpose::Summary
            )
            .contains("before")
        );
        assert!(err(&[("format", "xml")], Purpose::Export).contains("csv or ndjson"));
        assert!(
            err(
                &[("network", "wifi"), ("network", "fiber")],
                Purpose::Summary
            )
            .contains("twice")
        );
    }
}
