//! The crowd's dimensions, each defined once: its name (in query strings, answers and as
//! the collector's column), its title, how its values are kept, and whether a run's
//! samples may differ in it. The collector makes its columns, its cells' keys, its
//! inserts and selects, and the subsets its folds merge from [`Dimension::ALL`] alone,
//! so adding a dimension is a variant, a row of the table and the line that reads its
//! value from a sample (the collector's `db/cells.rs`); the collector adds its column
//! when it starts.

use serde::{Deserialize, Serialize};

/// What samples can be grouped and filtered by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Dimension {
    /// The network the user picked.
    Network,
    /// What the Network Information API reported.
    EffectiveType,
    Browser,
    Os,
    Mobile,
    TargetLabel,
    TargetVersion,
    Phase,
    /// What a request of a phase met that makes it unlike the phase's others: a cold
    /// request's idle time, a fresh request's connection as verified. `null` for the
    /// rest (`firsttoken_core::condition`).
    Condition,
    Concurrency,
    Scenario,
    /// The share link the run came from (its study id).
    Study,
    /// A dimension for the collector's tests only: whether a sample's index in its run is
    /// odd. It shows that a dimension added to [`TABLE`] alone reaches uploads, cells,
    /// folds, summaries and exports (`server/tests/it/dimensions.rs`).
    #[cfg(feature = "probe-dimension")]
    Probe,
}

/// How a dimension's values are kept: as text, a flag or a whole number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Text,
    Bool,
    Int,
}

/// A dimension's row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spec {
    /// The name in query strings and answers, and the collector's column.
    pub name: &'static str,
    /// What a person reads.
    pub title: &'static str,
    pub kind: Kind,
    /// Whether one run's samples may have different values (its phases, its targets);
    /// the others are the run's own (its network, its browser, its link). The collector
    /// folds a day once per subset of these that differ within some run of that day.
    pub within_run: bool,
}

const fn row(
    dimension: Dimension,
    name: &'static str,
    title: &'static str,
    kind: Kind,
    within_run: bool,
) -> (Dimension, Spec) {
    let spec = Spec {
        name,
        title,
        kind,
        within_run,
    };
    (dimension, spec)
}

const RUN: bool = false;
const SAMPLE: bool = true;

/// Every dimension, in the order of the enum (checked when compiled).
const TABLE: &[(Dimension, Spec)] = &[
    row(Dimension::Network, "network", "Network", Kind::Text, RUN),
    row(
        Dimension::EffectiveType,
        "effective_type",
        "Effective type",
        Kind::Text,
        RUN,
    ),
    row(Dimension::Browser, "browser", "Browser", Kind::Text, RUN),
    row(Dimension::Os, "os", "OS", Kind::Text, RUN),
    row(Dimension::Mobile, "mobile", "Mobile", Kind::Bool, RUN),
    row(
        Dimension::TargetLabel,
        "target_label",
        "Target",
        Kind::Text,
        SAMPLE,
    ),
    row(
        Dimension::TargetVersion,
        "target_version",
        "Version",
        Kind::Text,
        SAMPLE,
    ),
    row(Dimension::Phase, "phase", "Phase", Kind::Text, SAMPLE),
    row(
        Dimension::Condition,
        "condition",
        "Condition",
        Kind::Text,
        SAMPLE,
    ),
    row(
        Dimension::Concurrency,
        "concurrency",
        "Concurrency",
        Kind::Int,
        SAMPLE,
    ),
    row(
        Dimension::Scenario,
        "scenario",
        "Scenario",
        Kind::Text,
        SAMPLE,
    ),
    row(Dimension::Study, "study", "Link", Kind::Text, RUN),
    #[cfg(feature = "probe-dimension")]
    row(Dimension::Probe, "probe", "Probe", Kind::Int, SAMPLE),
];

/// How many dimensions there are.
pub const COUNT: usize = TABLE.len();

// The table lists each dimension once, at its enum position.
const _: () = {
    let mut at = 0;
    while at < COUNT {
        assert!(TABLE[at].0 as usize == at);
        at += 1;
    }
};

impl Dimension {
    /// Every dimension, in the table's order.
    pub const ALL: [Dimension; COUNT] = {
        let mut all = [Dimension::Network; COUNT];
        let mut at = 0;
        while at < COUNT {
            all[at] = TABLE[at].0;
            at += 1;
        }
        all
    };

    /// Its row of the table.
    pub const fn spec(self) -> Spec {
        TABLE[self as usize].1
    }

    /// Its place in [`Dimension::ALL`], where keys indexed by dimension keep its value.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The name in query strings and answers, and the collector's column.
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// What a person reads.
    pub fn title(self) -> &'static str {
        self.spec().title
    }

    pub fn kind(self) -> Kind {
        self.spec().kind
    }

    /// Whether one run's samples may differ in it.
    pub fn within_run(self) -> bool {
        self.spec().within_run
    }

    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_columns_and_read_back() {
        for d in Dimension::ALL {
            assert_eq!(Dimension::from_name(d.name()), Some(d));
            assert!(
                d.name().chars().all(|c| c.is_ascii_lowercase() || c == '_'),
                "{} is not a column name",
                d.name()
            );
            // Serde's name is the table's.
            let json = serde_json::to_string(&d).expect("serializes");
            assert_eq!(json, format!("\"{}\"", d.name()));
        }
        let mut names: Vec<_> = Dimension::ALL.map(Dimension::name).to_vec();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), COUNT);
    }
}
