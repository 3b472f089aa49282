//! What the machine did during each block, seen from outside the browser: whether this
//! process's own 1 ms sleeps woke late (the machine's cores all taken, or the machine
//! paused by its host), and how the CPU time was spent: the browser's processes, this
//! benchmark with its demo server, every other program, and the host's steal. A slow
//! stretch of one case that came with a stall of the sleeper and other programs' CPU is
//! the machine's, not the reader's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Sleeper wake-ups later than this are kept.
const LATE: Duration = Duration::from_millis(2);

/// A sleeper thread and the late wake-ups it saw. Its thousand wake-ups a second cost a
/// little CPU (the same loop in Python used 2% of one core here), the same during every
/// reader's blocks.
pub(super) struct Watch {
    late: Arc<Mutex<Vec<(Instant, Duration)>>>,
}

/// The machine between two moments.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct During {
    /// The sleeper's latest wake-up, ms beyond its 1 ms.
    pub longest_stall_ms: f64,
    /// Shares of the machine's CPU time (all cores), in percent.
    pub browser_pct: f64,
    pub ours_pct: f64,
    pub others_pct: f64,
    pub steal_pct: f64,
}

/// CPU ticks counted at one moment.
pub(super) struct Mark {
    at: Instant,
    total: u64,
    steal: u64,
    /// Each process's ticks (user and system), and its parent.
    processes: HashMap<u32, (u64, u32)>,
}

impl Watch {
    pub(super) fn start() -> Self {
        let late = Arc::new(Mutex::new(Vec::new()));
        let kept = late.clone();
        std::thread::spawn(move || {
            loop {
                let before = Instant::now();
                std::thread::sleep(Duration::from_millis(1));
                let slept = before.elapsed();
                if slept > Duration::from_millis(1) + LATE {
                    let stall = slept - Duration::from_millis(1);
                    kept.lock()
                        .expect("the sleeper's list")
                        .push((before, stall));
                }
            }
        });
        Self { late }
    }

    /// The machine since `mark`, for the browser whose driver is `driver_pid`.
    pub(super) fn since(&self, mark: &Mark, driver_pid: u32) -> During {
        let now = Mark::take();
        let longest = self
            .late
            .lock()
            .expect("the sleeper's list")
            .iter()
            .filter(|(at, _)| *at >= mark.at)
            .map(|(_, stall)| stall.as_secs_f64() * 1e3)
            .fold(0.0, f64::max);
        let elapsed = now.total.saturating_sub(mark.total).max(1) as f64;
        let percent = |ticks: u64| ticks as f64 * 100.0 / elapsed;
        let ours = std::process::id();
        let (mut browser, mut own, mut others) = (0, 0, 0);
        for (pid, (ticks, _)) in &now.processes {
            // A process that began during the block counts from zero.
            let used = ticks.saturating_sub(mark.processes.get(pid).map_or(0, |p| p.0));
            if *pid == ours {
                own += used;
            } else if descends(&now.processes, *pid, driver_pid) {
                browser += used;
            } else {
                others += used;
            }
        }
        During {
            longest_stall_ms: longest,
            browser_pct: percent(browser),
            ours_pct: percent(own),
            others_pct: percent(others),
            steal_pct: percent(now.steal.saturating_sub(mark.steal)),
        }
    }
}

/// Whether `pid` is `ancestor` or one of its descendants.
fn descends(processes: &HashMap<u32, (u64, u32)>, mut pid: u32, ancestor: u32) -> bool {
    for _ in 0..64 {
        if pid == ancestor {
            return true;
        }
        match processes.get(&pid) {
            Some(&(_, parent)) if parent > 1 => pid = parent,
            _ => return false,
        }
    }
    false
}

impl Mark {
    /// The machine's counters now (`/proc/stat` and each `/proc/<pid>/stat`).
    pub(super) fn take() -> Self {
        let at = Instant::now();
        let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        // cpu  user nice system idle iowait irq softirq steal ...
        let cpu: Vec<u64> = stat
            .lines()
            .next()
            .unwrap_or_default()
            .split_whitespace()
            .skip(1)
            .filter_map(|n| n.parse().ok())
            .collect();
        let mut processes = HashMap::new();
        for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
            let Some(pid) = entry.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if let Some(process) = process_ticks(pid) {
                processes.insert(pid, process);
            }
        }
        Self {
            at,
            total: cpu.iter().take(8).sum(),
            steal: cpu.get(7).copied().unwrap_or(0),
            processes,
        }
    }
}

/// A process's user and system ticks, and its parent, from `/proc/<pid>/stat`.
fn process_ticks(pid: u32) -> Option<(u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The name, in parentheses, may hold spaces: the fields start after its last `)`.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    // state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime
    let parent = fields.get(1)?.parse().ok()?;
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some((user + system, parent))
}
