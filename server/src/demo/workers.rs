//! The demo app's workers. With `slots=N` a request runs on one of N workers of its pool,
//! and its blocking pre-model step holds that worker: requests on the same worker take
//! their turn. One worker and a blocking step make a server that handles requests one at
//! a time up to the model call, as synchronous database calls in an async app do; request
//! i of k simultaneous ones then waits i steps, and the median TTFT grows as (k + 1) / 2.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::error::AppError;

static POOLS: LazyLock<Mutex<HashMap<String, Arc<Pool>>>> = LazyLock::new(Mutex::default);

#[derive(Debug)]
struct Pool {
    /// Fair (first come, first served) locks, one per worker.
    workers: Vec<tokio::sync::Mutex<()>>,
    next: AtomicUsize,
}

/// The worker one request runs on.
#[derive(Debug, Clone)]
pub struct Worker {
    pool: Arc<Pool>,
    index: usize,
}

impl Worker {
    /// The next worker of `pool` (round robin), creating the pool with `slots` workers.
    pub fn assign(pool: &str, slots: u32) -> Result<Self, AppError> {
        let mut pools = POOLS
            .lock()
            .map_err(|_| anyhow::anyhow!("demo worker pools poisoned"))?;
        let pool_ref = pools
            .entry(pool.to_owned())
            .or_insert_with(|| {
                Arc::new(Pool {
                    workers: (0..slots).map(|_| tokio::sync::Mutex::new(())).collect(),
                    next: AtomicUsize::new(0),
                })
            })
            .clone();
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
