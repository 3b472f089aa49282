//! The link profiles: what a link is like (round trip, rate each way, jitter), and the
//! named ones the benchmarks use.

use anyhow::bail;

/// What a link is like: its round-trip time, its rate each way and its jitter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    pub name: &'static str,
    /// Round-trip time, in milliseconds; each direction gets half.
    pub rtt_ms: f64,
    /// Target → client rate, in megabits per second (`f64::INFINITY`: no limit).
    pub down_mbps: f64,
    /// Client → target rate, in megabits per second (`f64::INFINITY`: no limit).
    pub up_mbps: f64,
    /// At most this much (uniformly from 0) is added to each chunk's one-way delay,
    /// without ever reordering bytes.
    pub jitter_ms: f64,
}

impl Profile {
    pub const FIBER: Profile = Profile {
        name: "fiber",
        rtt_ms: 10.0,
        down_mbps: 100.0,
        up_mbps: 50.0,
        jitter_ms: 1.0,
    };
    pub const CABLE: Profile = Profile {
        name: "cable/Wi-Fi",
        rtt_ms: 30.0,
        down_mbps: 50.0,
        up_mbps: 10.0,
        jitter_ms: 3.0,
    };
    pub const FOURG: Profile = Profile {
        name: "4G",
        rtt_ms: 80.0,
        down_mbps: 12.0,
        up_mbps: 3.0,
        jitter_ms: 10.0,
    };
    pub const POOR_CELLULAR: Profile = Profile {
        name: "poor cellular",
        rtt_ms: 300.0,
        down_mbps: 1.6,
        up_mbps: 0.75,
        jitter_ms: 40.0,
    };
    pub const SATELLITE: Profile = Profile {
        name: "satellite",
        rtt_ms: 600.0,
        down_mbps: 10.0,
        up_mbps: 2.0,
        jitter_ms: 20.0,
    };

    /// The profile named `name`, whatever its case, with `-`, `_` or a space between
    /// words: "fiber", "cable" (or "cable/Wi-Fi", "wi-fi"), "4g", "poor-cellular",
    /// "satellite".
    pub fn by_name(name: &str) -> Option<Profile> {
        let wanted = normalize(name);
        let alias = match wanted.as_str() {
            "cable" | "wifi" | "wi-fi" => "cable/wi-fi",
            "fibre" => "fiber",
            other => other,
        };
        PROFILES.into_iter().find(|p| normalize(p.name) == alias)
    }

    /// Half the round-trip time: each direction's delay before jitter.
    pub fn one_way_ms(&self) -> f64 {
        self.rtt_ms / 2.0
    }

    /// The profile in words, for a report: "4G (80 ms, 12/3 Mbps)".
    pub fn label(&self) -> String {
        format!(
            "{} ({} ms, {}/{} Mbps)",
            self.name, self.rtt_ms, self.down_mbps, self.up_mbps
        )
    }

    /// An error if the profile's numbers would make no sense as a link (negative or not
    /// finite times, a rate of zero or below 1 kbit/s), so the timing arithmetic below
    /// cannot overflow or panic.
    pub(super) fn check(&self) -> anyhow::Result<()> {
        for (what, ms) in [("rtt_ms", self.rtt_ms), ("jitter_ms", self.jitter_ms)] {
            if !(0.0..=3_600_000.0).contains(&ms) {
                bail!(
                    "profile {:?}: {what} = {ms} is not 0 to one hour",
                    self.name
                );
            }
        }
        for (what, mbps) in [("down_mbps", self.down_mbps), ("up_mbps", self.up_mbps)] {
            // NaN is refused too: it is not at least anything.
            if mbps.is_nan() || mbps < 0.001 {
                bail!("profile {:?}: {what} = {mbps} is below 1 kbit/s", self.name);
            }
        }
        Ok(())
    }
}

/// Every profile, from the fastest link to the slowest.
pub const PROFILES: [Profile; 5] = [
    Profile::FIBER,
    Profile::CABLE,
    Profile::FOURG,
    Profile::POOR_CELLULAR,
    Profile::SATELLITE,
];

/// `name` in lower case with `-` between words.
fn normalize(name: &str) -> String {
    name.trim().to_lowercase().replace([' ', '_'], "-")
}
