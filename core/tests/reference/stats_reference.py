"""Expected values for core/tests/stats.rs, computed outside the code under test.

Percentiles come from numpy (method="linear"). Bootstrap intervals are recomputed the
plain way: draw n indices into the sorted values with SplitMix64 (multiply-shift to
0..n), sort the resample, take np.percentile; the interval is the 2.5th and 97.5th
percentiles of the 1000 resample statistics. The Rust code gets the same numbers by
counting instead of sorting, so agreement checks the shortcut too.

Run: python3 core/tests/reference/stats_reference.py
"""

import numpy as np

MASK = (1 << 64) - 1
SEED = 0x00F1257F0C3E2025
RESAMPLES = 1000


class SplitMix64:
    def __init__(self, seed):
        self.state = seed

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next() * n) >> 64


def percentile_ci(values, p, resamples=RESAMPLES, seed=SEED):
    data = np.sort(np.asarray(values, dtype=float))
    rng = SplitMix64(seed)
    stats = []
    for _ in range(resamples):
        resample = np.sort(data[[rng.below(len(data)) for _ in range(len(data))]])
        stats.append(np.percentile(resample, p))
    return float(np.percentile(data, p)), float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


# TTFT-like times: 60 values, a body near 300 ms and a tail.
TTFT = [float(round(300 + 40 * np.sin(i * 1.7) + (i % 7) * 3.5 + (250 if i % 19 == 0 else 0), 3) ) for i in range(60)]

if __name__ == "__main__":
    print("TTFT =", TTFT)
    print("mean", repr(float(np.mean(TTFT))), "min", min(TTFT), "max", max(TTFT))
    for p in (50, 90, 95, 99):
        print(f"p{p}", percentile_ci(TTFT, p))
    app = [310.0, 305.5, 320.25, 298.0, 330.0, 315.5, 309.0, 301.75, 322.0, 318.0]
    direct = [250.0, 240.5, 262.25, 238.0, 271.0, 249.5, 255.0, 236.75, 260.0, 259.0]
    print("overhead median CI", percentile_ci([a - d for a, d in zip(app, direct)], 50))
    levels = {1: [300.0, 310.0, 305.0], 3: [300.0, 610.0, 905.0], 5: [320.0, 300.0, 330.0, 310.0, 315.0]}
    base = float(np.median(levels[1]))
    for k, v in levels.items():
        print("level", k, "median", float(np.median(v)), "ratio", float(np.median(v)) / base, "serial", (k + 1) / 2)
    gaps = [[25.0, 24.5, 26.0, 80.0], [25.5, 25.0], [24.0, 300.0, 25.0]]
    pooled = [g for gs in gaps for g in gs]
    print("itl mean", repr(float(np.mean(pooled))), "p50", float(np.percentile(pooled, 50)),
          "p99", float(np.percentile(pooled, 99)), "max", max(pooled))
