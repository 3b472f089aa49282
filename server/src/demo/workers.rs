//! The demo app's workers. With `slots=N` a request runs on one of N workers of its pool,
//! and its blocking pre-model step holds that worker: requests on the same worker take
//! their turn. One worker and a blocking step make a server that handles requests one at
//! a time up to the model call, as synchronous database calls in an async app do; request
//! i of k simultaneous ones then waits i steps, and the median TTFT grows as (k + 1) / 2.
//!
//! Pools live only while a request uses them: the registry holds weak references, so a
//! pool name a client made up costs memory only for as long as its requests run, and the
//! registry itself is capped. Each client network has pools of its own: a stranger
//! naming `pool=default&slots=1` with a long blocking step cannot make anyone else's
//! demo requests wait their turn behind theirs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::AppError;

/// Pools alive at once, at most; far above what the demo's stream cap lets run.
pub const MAX_POOLS: usize = 1024;

static POOLS: LazyLock<Mutex<HashMap<String, Weak<Pool>>>> = LazyLock::new(Mutex::default);

#[derive(Debug)]
struct Pool {
    /// Fair (first come, first served) locks, one per worker.
    workers: Vec<tokio::sync::Mutex<()>>,
    next: AtomicUsize,
}

/// The worker one request runs on. The pool lives as long as one of its workers is held.
#[derive(Debug, Clone)]
pub struct Worker {
    pool: Arc<Pool>,
    index: usize,
}

impl Worker {
    /// The next worker of `network`'s pool `pool` (round robin), creating the pool with
    /// `slots` workers.
    pub fn assign(network: &str, pool: &str, slots: u32) -> Result<Self, AppError> {
        let key = format!("{network} {pool}");
        let mut pools = POOLS
            .lock()
            .map_err(|_| anyhow::anyhow!("demo worker pools poisoned"))?;
        let live = pools.get(&key).and_then(Weak::upgrade);
        let pool_ref = match live {
            Some(live) => live,
            None => {
                if pools.len() >= MAX_POOLS {
                    pools.retain(|_, p| p.strong_count() > 0);
                }
                if pools.len() >= MAX_POOLS {
                    return Err(AppError::Busy {
                        what: "demo worker pools",
                        retry_after: 1,
                    });
                }
                let created = Arc::new(Pool {
                    workers: (0..slots).map(|_| tokio::sync::Mutex::new(())).collect(),
                    next: AtomicUsize::new(0),
                });
                pools.insert(key, Arc::downgrade(&created));
                created
            }
        };
        if pool_ref.workers.len() != slots as usize {
            return Err(AppError::BadRequest(format!(
                "pool {pool:?} already has {} slots; name another pool for {slots}",
                pool_ref.workers.len()
            )));
        }
        let index = pool_ref.next.fetch_add(1, Ordering::Relaxed) % pool_ref.workers.len();
        Ok(Self {
            pool: pool_ref,
            index,
        })
    }

    /// Holds the worker for `duration` (a blocking call); returns how long it first had to
    /// wait for the worker to be free.
    pub async fn block_for(&self, duration: Duration) -> Duration {
        let asked = Instant::now();
        let _held = self.pool.workers[self.index].lock().await;
        let waited = asked.elapsed();
        tokio::time::sleep(duration).await;
        waited
    }
}

/// Names in the registry now (live pools and not yet pruned dead ones).
#[cfg(test)]
fn registered() -> usize {
    POOLS.lock().map_or(0, |p| p.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pools_made_up_by_clients_do_not_stay() {
        for n in 0..(3 * MAX_POOLS) {
            let worker = Worker::assign("net", &format!("made-up-{n}"), 64).expect("a worker");
            drop(worker);
        }
        assert!(registered() <= MAX_POOLS, "{} names kept", registered());
        // A pool in use keeps its workers and its slot count.
        let held = Worker::assign("net", "held", 2).expect("a worker");
        assert!(Worker::assign("net", "held", 3).is_err());
        let again = Worker::assign("net", "held", 2).expect("the same pool");
        assert!(Arc::ptr_eq(&held.pool, &again.pool));
        // Another network's pool of the same name is its own.
        let theirs = Worker::assign("other-net", "held", 3).expect("a pool of its own");
        assert!(!Arc::ptr_eq(&held.pool, &theirs.pool));
        assert_ne!(held.index, again.index, "round robin");
    }
}
