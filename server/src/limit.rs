//! A per-address limit on uploads and deletes, held only in memory: a token bucket per
//! address, forgotten once full again. Addresses are never logged or stored.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

#[derive(Debug)]
pub struct RateLimiter {
    per_minute: f64,
    buckets: Mutex<HashMap<IpAddr, Bucket>>,
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    tokens: f64,
    updated: Instant,
}

/// How long to wait before trying again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryAfter(pub u64);

impl RateLimiter {
    /// `per_minute` requests a minute, in bursts of up to as many.
    pub fn new(per_minute: u32) -> Self {
        Self {
            per_minute: f64::from(per_minute.max(1)),
            buckets: Mutex::default(),
        }
    }

    /// Takes one request from `address`'s allowance, or says how many seconds until one
    /// is free.
    pub fn check(&self, address: IpAddr) -> Result<(), RetryAfter> {
        self.check_at(address, Instant::now())
    }

    fn check_at(&self, address: IpAddr, now: Instant) -> Result<(), RetryAfter> {
        let Ok(mut buckets) = self.buckets.lock() else {
            return Ok(());
        };
        let per_second = self.per_minute / 60.0;
        // Full buckets carry no information: drop them, so the map holds only the
        // addresses active in the last minute.
        if buckets.len() > 10_000 {
            let capacity = self.per_minute;
            buckets.retain(|_, b| {
                b.tokens + now.duration_since(b.updated).as_secs_f64() * per_second < capacity
            });
        }
        let bucket = buckets.entry(address).or_insert(Bucket {
            tokens: self.per_minute,
            updated: now,
        });
        let elapsed = now.duration_since(bucket.updated).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * per_second).min(self.per_minute);
        bucket.updated = now;
        if bucket.tokens >= 1.0 {
            bucket.tokens -= 1.0;
            Ok(())
        } else {
            Err(RetryAfter(
                ((1.0 - bucket.tokens) / per_second).ceil() as u64
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn an_address_gets_its_allowance_then_waits() {
        let limiter = RateLimiter::new(3);
        let (a, b): (IpAddr, IpAddr) = (
            "192.0.2.1".parse().expect("ip"),
            "192.0.2.2".parse().expect("ip"),
        );
        let t = Instant::now();
        for _ in 0..3 {
            assert_eq!(limiter.check_at(a, t), Ok(()));
        }
        assert_eq!(limiter.check_at(a, t), Err(RetryAfter(20)));
        assert_eq!(
            limiter.check_at(b, t),
            Ok(()),
            "another address has its own"
        );
        assert_eq!(limiter.check_at(a, t + Duration::from_secs(20)), Ok(()));
    }
}
