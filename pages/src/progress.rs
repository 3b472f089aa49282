//! About how long a run has left, for the progress line: the requests ahead at the pace of
//! those done so far, plus the planned idle waits not yet spent.

use firsttoken_core::plan::Plan;

/// Where a run is, in the figures the estimate needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Since the run started, in ms.
    pub elapsed_ms: f64,
    pub requests_done: usize,
    pub requests_total: usize,
    /// Idle waits already spent (each cold request's measured wait), in ms.
    pub idle_done_ms: f64,
    /// Idle waits the plan has in all, in ms.
    pub idle_total_ms: f64,
}

impl Progress {
    /// The idle waits `plan` has in all, in ms.
    pub fn idle_total_ms(plan: &Plan) -> f64 {
        plan.phases.iter().map(|p| p.idle_ms() as f64).sum()
    }

    /// The time left, in ms. Requests take the average time of those done (the time in
    /// flight so far stands for the first one); idle waits take what is left of the plan's.
    pub fn left_ms(&self) -> f64 {
        let busy = (self.elapsed_ms - self.idle_done_ms).max(0.0);
        let per_request = busy / self.requests_done.max(1) as f64;
        let requests_left = self.requests_total.saturating_sub(self.requests_done) as f64;
        per_request * requests_left + (self.idle_total_ms - self.idle_done_ms).max(0.0)
    }

    /// "about 40 s left": seconds rounded up to 5 below a minute and a half, whole minutes
    /// above.
    pub fn words(&self) -> String {
        let seconds = (self.left_ms() / 1000.0).ceil();
        if seconds < 90.0 {
            format!("about {} s left", ((seconds / 5.0).ceil() * 5.0).max(5.0))
        } else {
            format!("about {} min left", (seconds / 60.0).round())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use firsttoken_core::plan::{PhasePlan, TargetPlan};

    fn progress(elapsed_ms: f64, requests_done: usize, idle_done_ms: f64) -> Progress {
        Progress {
            elapsed_ms,
            requests_done,
            requests_total: 20,
            idle_done_ms,
            idle_total_ms: 60_000.0,
        }
    }

    #[test]
    fn requests_ahead_go_at_the_pace_so_far_and_idle_waits_count_once() {
        // 10 requests done in 35 s, 30 s of them idle: 0.5 s a request.
        let p = progress(35_000.0, 10, 30_000.0);
        assert_eq!(p.left_ms(), 10.0 * 500.0 + 30_000.0);
        assert_eq!(p.words(), "about 35 s left");
        // Nothing done yet: the first request's time in flight stands for each.
        assert_eq!(progress(200.0, 0, 0.0).left_ms(), 20.0 * 200.0 + 60_000.0);
        // Done, or past the plan: nothing left, never negative.
        assert_eq!(progress(90_000.0, 20, 70_000.0).left_ms(), 0.0);
        assert_eq!(progress(90_000.0, 20, 70_000.0).words(), "about 5 s left");
    }

    #[test]
    fn words_round_to_5_s_then_to_minutes() {
        let words = |left_s: f64| {
            Progress {
                elapsed_ms: 0.0,
                requests_done: 0,
                requests_total: 0,
                idle_done_ms: 0.0,
                idle_total_ms: left_s * 1000.0,
            }
            .words()
        };
        assert_eq!(words(0.2), "about 5 s left");
        assert_eq!(words(41.0), "about 45 s left");
        assert_eq!(words(89.0), "about 90 s left");
        assert_eq!(words(90.0), "about 2 min left");
        assert_eq!(words(20.0 * 60.0), "about 20 min left");
    }

    #[test]
    fn the_plan_gives_its_idle_waits() {
        let mut plan = Plan::steady(
            TargetPlan::new("t", "https://a.example/v1", Default::default(), "{}"),
            5,
        );
        assert_eq!(Progress::idle_total_ms(&plan), 0.0);
        plan.phases.push(PhasePlan::Cold {
            idle_ms: vec![1_000, 5_000],
        });
        assert_eq!(Progress::idle_total_ms(&plan), 6_000.0);
    }
}
