//! Per-network limits, held only in memory: a token bucket per network prefix (IPv4 /32,
//! IPv6 /64, since one IPv6 client is given a whole /64 and could otherwise take a fresh
//! allowance per address), and a wider one over each /24 and /48 holding [`ROLL_UP`]
//! allowances, so a block of addresses does not take a fresh allowance per address
//! either. Addresses are never logged or stored.
//!
//! The map is bounded: full buckets carry no information and are pruned every few
//! seconds, the map is split in shards so one lock is not every request's queue, and a
//! shard at its cap forgets its least recently used prefixes. Forgetting gives that
//! prefix a fresh allowance, which is the price of bounded memory; refusing new prefixes
//! instead would lock honest users out while an attacker holds the map.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The network a client address belongs to, for budgets: an IPv4 address, or the /64 of
/// an IPv6 one (an IPv4-mapped IPv6 address counts as its IPv4 address).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prefix {
    V4([u8; 4]),
    V6([u8; 8]),
    /// The /24 an IPv4 address is in: the roll-up of its addresses' budgets.
    V4Block([u8; 3]),
    /// The /48 an IPv6 /64 is in (one site's allocation).
    V6Block([u8; 6]),
}

/// A /24's or a /48's budget, in allowances of one of its networks: a few people behind
/// neighbouring addresses keep theirs, while a block of addresses (a rented /24, an
/// IPv6 /48 holding 65,536 /64s) takes this many at most.
pub const ROLL_UP: f64 = 16.0;

impl Prefix {
    /// The block this network's budgets roll up into; `None` for a block.
    pub fn block(self) -> Option<Prefix> {
        match self {
            Prefix::V4([a, b, c, _]) => Some(Prefix::V4Block([a, b, c])),
            Prefix::V6(p) => Some(Prefix::V6Block([p[0], p[1], p[2], p[3], p[4], p[5]])),
            Prefix::V4Block(_) | Prefix::V6Block(_) => None,
        }
    }

    /// The prefix's address bytes (4 of an IPv4 address, 8 of a /64, 3 of a /24, 6 of
    /// a /48).
    pub fn octets(&self) -> &[u8] {
        match self {
            Prefix::V4(o) => o,
            Prefix::V6(o) => o,
            Prefix::V4Block(o) => o,
            Prefix::V6Block(o) => o,
        }
    }

    /// How many network allowances this prefix's bucket holds.
    fn scale(self) -> f64 {
        match self {
            Prefix::V4(_) | Prefix::V6(_) => 1.0,
            Prefix::V4Block(_) | Prefix::V6Block(_) => ROLL_UP,
        }
    }
}

impl From<IpAddr> for Prefix {
    fn from(address: IpAddr) -> Self {
        match address {
            IpAddr::V4(v4) => Prefix::V4(v4.octets()),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Prefix::V4(v4.octets()),
                None => {
                    let mut first = [0; 8];
                    first.copy_from_slice(&v6.octets()[..8]);
                    Prefix::V6(first)
                }
            },
        }
    }
}

/// Shards of the map; a prefix always lands in the same one.
const SHARDS: usize = 16;
/// Prefixes one shard remembers at most (about 100 bytes each).
const PER_SHARD: usize = 8192;
/// How often a shard drops its full buckets.
const PRUNE_EVERY: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub struct RateLimiter {
    /// Tokens a full bucket holds: the burst.
    capacity: f64,
    /// Tokens added per second.
    per_second: f64,
    shards: Vec<Mutex<Shard>>,
    hasher: std::collections::hash_map::RandomState,
}

#[derive(Debug)]
struct Shard {
    buckets: HashMap<Prefix, Bucket>,
    pruned: Instant,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// How long to wait before trying again, in whole seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

impl RateLimiter {
    /// `per_minute` requests a minute, in bursts of up to as many.
    pub fn new(per_minute: u32) -> Self {
        Self::per_period(f64::from(per_minute.max(1)), Duration::from_secs(60))
    }

    /// `amount` units per `period`, in bursts of up to `amount`.
    pub fn per_period(amount: f64, period: Duration) -> Self {
        Self {
            capacity: amount.max(1.0),
            per_second: amount.max(1.0) / period.as_secs_f64(),
            shards: (0..SHARDS)
                .map(|_| {
                    Mutex::new(Shard {
                        buckets: HashMap::new(),
                        pruned: Instant::now(),
                    })
                })
                .collect(),
            hasher: std::collections::hash_map::RandomState::new(),
        }
    }

    /// Takes one request from the address's network's allowance, or says how many
    /// seconds until one is free.
    pub fn check(&self, address: IpAddr) -> Result<(), RetryAfter> {
        self.take(Prefix::from(address), 1.0, Instant::now())
    }

    /// Takes `amount` from `prefix`'s allowance and from its block's ([`Prefix::block`]),
    /// or says how long until there is that much in both. An amount larger than a full
    /// bucket can never be had: it is refused with the time to fill the bucket.
    pub fn take(&self, prefix: Prefix, amount: f64, now: Instant) -> Result<(), RetryAfter> {
        self.take_one(prefix, amount, now)?;
        if let Some(block) = prefix.block()
            && let Err(retry) = self.take_one(block, amount, now)
        {
            self.give_back_one(prefix, amount);
            return Err(retry);
        }
        Ok(())
    }

    fn take_one(&self, prefix: Prefix, amount: f64, now: Instant) -> Result<(), RetryAfter> {
        let shard = &self.shards[self.hasher.hash_one(prefix) as usize % SHARDS];
        let Ok(mut shard) = shard.lock() else {
            return Ok(());
        };
        shard.prune(now, self.capacity, self.per_second);
        let (capacity, per_second) = (
            self.capacity * prefix.scale(),
            self.per_second * prefix.scale(),
        );
        let bucket = shard.buckets.entry(prefix).or_insert(Bucket {
            tokens: capacity,
            updated: now,
        });
        let elapsed = now.saturating_duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(capacity);
        bucket.updated = now;
        if bucket.tokens >= amount {
            bucket.tokens -= amount;
            Ok(())
        } else {
            let missing = amount.min(capacity) - bucket.tokens;
            Err(RetryAfter((missing / per_second).ceil().max(1.0) as u64))
        }
    }

    /// Gives back what [`RateLimiter::take`] took for work that did not happen after all.
    pub fn give_back(&self, prefix: Prefix, amount: f64) {
        self.give_back_one(prefix, amount);
        if let Some(block) = prefix.block() {
            self.give_back_one(block, amount);
        }
    }

    fn give_back_one(&self, prefix: Prefix, amount: f64) {
        let shard = &self.shards[self.hasher.hash_one(prefix) as usize % SHARDS];
        if let Ok(mut shard) = shard.lock()
            && let Some(bucket) = shard.buckets.get_mut(&prefix)
        {
            bucket.tokens = (bucket.tokens + amount).min(self.capacity * prefix.scale());
        }
    }

    /// Prefixes remembered now, over all shards.
    pub fn len(&self) -> usize {
        self.shards
            .iter()
            .filter_map(|s| s.lock().ok().map(|s| s.buckets.len()))
            .sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Shard {
    fn prune(&mut self, now: Instant, capacity: f64, per_second: f64) {
        if now.saturating_duration_since(self.pruned) >= PRUNE_EVERY {
            self.pruned = now;
            self.buckets.retain(|p, b| {
                b.tokens
                    + now.saturating_duration_since(b.updated).as_secs_f64()
                        * per_second
                        * p.scale()
                    < capacity * p.scale()
            });
        }
        if self.buckets.len() >= PER_SHARD {
            // Forget the least recently used quarter in one pass.
            let mut ages: Vec<(Instant, Prefix)> =
                self.buckets.iter().map(|(p, b)| (b.updated, *p)).collect();
            let cut = PER_SHARD / 4;
            ages.select_nth_unstable_by_key(cut, |(updated, _)| *updated);
            for (_, prefix) in &ages[..cut] {
                self.buckets.remove(prefix);
            }
        }
    }
}

/// Open connections per network, capped: one client holding hundreds of silent sockets
/// must not take every connection the server allows, so honest networks keep getting in.
/// A network appears in the map only while it has a connection open, so the map is never
/// larger than the server's own cap on connections.
#[derive(Debug)]
pub struct ConnectionCounts {
    cap: usize,
    open: Mutex<HashMap<Prefix, usize>>,
}

/// One open connection counted against its network; dropping it frees the place.
#[derive(Debug)]
pub struct CountedConnection {
    counts: std::sync::Arc<ConnectionCounts>,
    prefix: Prefix,
}

impl ConnectionCounts {
    pub fn new(cap: usize) -> Self {
        Self {
            cap: cap.max(1),
            open: Mutex::default(),
        }
    }

    /// Counts a new connection from `address`'s network, or `None` when the network
    /// already has its cap open.
    pub fn open(counts: &std::sync::Arc<Self>, address: IpAddr) -> Option<CountedConnection> {
        let prefix = Prefix::from(address);
        let mut open = counts.open.lock().ok()?;
        let n = open.entry(prefix).or_insert(0);
        if *n >= counts.cap {
            return None;
        }
        *n += 1;
        Some(CountedConnection {
            counts: counts.clone(),
            prefix,
        })
    }

    /// Networks with a connection open now.
    pub fn networks(&self) -> usize {
        self.open.lock().map_or(0, |o| o.len())
    }
}

impl Drop for CountedConnection {
    fn drop(&mut self) {
        if let Ok(mut open) = self.counts.open.lock()
            && let Some(n) = open.get_mut(&self.prefix)
        {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.prefix);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("an address")
    }

    #[test]
    fn a_network_holds_at_most_its_share_of_connections() {
        let counts = std::sync::Arc::new(ConnectionCounts::new(2));
        let a = ConnectionCounts::open(&counts, ip("2001:db8::1")).expect("first");
        let b = ConnectionCounts::open(&counts, ip("2001:db8::2")).expect("second");
        assert!(
            ConnectionCounts::open(&counts, ip("2001:db8::3")).is_none(),
            "the /64 has its two"
        );
        let other = ConnectionCounts::open(&counts, ip("192.0.2.1")).expect("another network");
        assert_eq!(counts.networks(), 2);
        drop(a);
        let c = ConnectionCounts::open(&counts, ip("2001:db8::3")).expect("a place came free");
        drop((b, c, other));
        assert_eq!(counts.networks(), 0, "nothing is remembered once closed");
    }

    #[test]
    fn an_address_gets_its_allowance_then_waits() {
        let limiter = RateLimiter::new(3);
        let (a, b) = (Prefix::from(ip("192.0.2.1")), Prefix::from(ip("192.0.2.2")));
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.take(a, 1.0, t), Ok(()));
        }
        assert_eq!(limiter.take(a, 1.0, t), Err(RetryAfter(20)));
        assert_eq!(
            limiter.take(b, 1.0, t),
            Ok(()),
            "another address has its own"
        );
        assert_eq!(limiter.take(a, 1.0, t + Duration::from_secs(20)), Ok(()));
    }

    #[test]
    fn an_ipv6_network_shares_one_allowance() {
        let limiter = RateLimiter::new(2);
        let t = Instant::now();
        assert_eq!(limiter.take(ip("2001:db8::1").into(), 1.0, t), Ok(()));
        assert_eq!(limiter.take(ip("2001:db8::ffff:2").into(), 1.0, t), Ok(()));
        assert!(
            limiter
                .take(ip("2001:db8:0:0:1234::3").into(), 1.0, t)
                .is_err(),
            "a third address in the same /64 has no allowance left"
        );
        assert_eq!(
            limiter.take(ip("2001:db8:0:1::1").into(), 1.0, t),
            Ok(()),
            "the next /64 is another network"
        );
        assert_eq!(
            Prefix::from(ip("::ffff:192.0.2.9")),
            Prefix::from(ip("192.0.2.9"))
        );
    }

    #[test]
    fn the_map_stays_bounded_and_forgets_full_buckets() {
        let limiter = RateLimiter::new(10);
        let t = Instant::now();
        for n in 0..200_000u32 {
            let prefix = Prefix::V6([0x20, 0x01, 0x0d, 0xb8, 0, 0, (n >> 8) as u8, n as u8]);
            let prefix = if n < 65_536 {
                prefix
            } else {
                Prefix::V4(n.to_be_bytes())
            };
            let _ = limiter.take(prefix, 1.0, t);
        }
        assert!(
            limiter.len() <= SHARDS * PER_SHARD,
            "{} prefixes remembered",
            limiter.len()
        );
        // A minute later every bucket is full again: the next request in each shard
        // prunes it.
        let later = t + Duration::from_secs(61);
        for n in 0..1000u32 {
            let _ = limiter.take(Prefix::V4((n + 1_000_000).to_be_bytes()), 1.0, later);
        }
        // The 1,000 addresses (0.15.66.64 to 0.15.70.39) and the five /24s they are in.
        assert!(limiter.len() <= 1005, "{} remembered", limiter.len());
    }

    /// The review's finding (M6): budgets were per address only, so a block of addresses
    /// took a fresh allowance per address. Now a /24 (or /48) holds 16 allowances.
    #[test]
    fn a_block_of_addresses_shares_a_rolled_up_allowance() {
        let limiter = RateLimiter::new(1);
        let t = Instant::now();
        for n in 1..=16 {
            assert_eq!(
                limiter.take(ip(&format!("203.0.113.{n}")).into(), 1.0, t),
                Ok(()),
                "address {n} has its own allowance"
            );
        }
        assert!(
            limiter.take(ip("203.0.113.17").into(), 1.0, t).is_err(),
            "the 17th address of the /24 finds the block's allowance spent"
        );
        assert_eq!(
            limiter.take(ip("203.0.114.1").into(), 1.0, t),
            Ok(()),
            "the next /24 is another block"
        );
        // IPv6: /64s of one /48.
        for n in 1..=16 {
            let address = ip(&format!("2001:db8:1:{n:x}::1"));
            assert_eq!(limiter.take(address.into(), 1.0, t), Ok(()), "/64 {n}");
        }
        assert!(limiter.take(ip("2001:db8:1:99::1").into(), 1.0, t).is_err());
        assert_eq!(limiter.take(ip("2001:db8:2::1").into(), 1.0, t), Ok(()));
        // A refusal by the block gives the address back what it took.
        let p = Prefix::from(ip("203.0.113.18"));
        assert!(limiter.take(p, 1.0, t).is_err());
        limiter.give_back(Prefix::from(ip("203.0.113.1")), 1.0);
        assert_eq!(limiter.take(p, 1.0, t), Ok(()), "its own bucket was full");
    }

    #[test]
    fn an_amount_larger_than_the_bucket_is_refused_with_the_time_to_fill_it() {
        let limiter = RateLimiter::per_period(100.0, Duration::from_secs(3600));
        let t = Instant::now();
        let p = Prefix::from(ip("198.51.100.7"));
        assert_eq!(limiter.take(p, 60.0, t), Ok(()));
        assert_eq!(limiter.take(p, 60.0, t), Err(RetryAfter(720)));
        limiter.give_back(p, 60.0);
        assert_eq!(limiter.take(p, 60.0, t), Ok(()));
    }
}
