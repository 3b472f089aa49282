"""Expected values for crowd/tests/stats.rs, computed outside the code under test.

Percentiles come from numpy (method="linear"). Bootstrap intervals are recomputed the
plain way: draw n indices into the sorted values with SplitMix64 (multiply-shift to
0..n), sort the resample, take np.percentile; the interval is the 2.5th and 97.5th
percentiles of the 1000 resample statistics. The Rust code gets the same numbers by
counting instead of sorting, so agreement checks the shortcut too.

Run: python3 crowd/tests/reference/stats_reference.py
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


def lerp_percentile(sorted_values, p):
    """Linear interpolation between closest ranks, where values may end in +inf (failed
    requests): interpolating towards an infinity gives infinity, never NaN."""
    rank = p / 100 * (len(sorted_values) - 1)
    lo, hi = sorted_values[int(np.floor(rank))], sorted_values[int(np.ceil(rank))]
    if lo == hi or np.isinf(hi):
        return max(lo, hi)
    return lo + (hi - lo) * (rank - np.floor(rank))


def degradation(levels, resamples=RESAMPLES, seed=SEED):
    """Median TTFT per level with failures (None) as +inf; the ratio to level 1 with a
    bootstrap interval that resamples whole batches: each resample draws level 1's
    batches, then the level's, with replacement, and pools what it drew."""
    def prepared(batches):
        return [[np.inf if t is None else t for t in batch] for batch in batches]

    def pooled_median(batches):
        return lerp_percentile(sorted(v for batch in batches for v in batch), 50)

    def ratio(level, base):
        return np.inf if np.isinf(base) or np.isinf(level) else level / base

    base = prepared(levels[1])
    out = {}
    for k, batches in levels.items():
        batches = prepared(batches)
        median = pooled_median(batches)
        if k == 1:
            out[k] = (median, None)
            continue
        rng = SplitMix64(seed)
        ratios = []
        for _ in range(resamples):
            b = pooled_median([base[rng.below(len(base))] for _ in range(len(base))])
            lvl = pooled_median([batches[rng.below(len(batches))] for _ in range(len(batches))])
            ratios.append(ratio(lvl, b))
        ratios.sort()
        out[k] = (median, (ratio(median, pooled_median(base)), lerp_percentile(ratios, 2.5), lerp_percentile(ratios, 97.5)))
    return out


def cluster_ci(runs, p, resamples=RESAMPLES, seed=SEED):
    """The cluster bootstrap done plainly: draw as many runs as there are, with
    replacement, concatenate their values, take np.percentile."""
    runs = [np.sort(np.asarray(r, dtype=float)) for r in runs if len(r)]
    pooled = np.concatenate(runs)
    rng = SplitMix64(seed)
    stats = []
    for _ in range(resamples):
        drawn = [runs[rng.below(len(runs))] for _ in range(len(runs))]
        stats.append(np.percentile(np.concatenate(drawn), p))
    return float(np.percentile(pooled, p)), float(np.percentile(stats, 2.5)), float(np.percentile(stats, 97.5))


def woodruff_cluster_ci(runs, p):
    """The large-sample form: Woodruff's interval for the fraction at or below the
    percentile, with the variance of a ratio estimator over resampled clusters."""
    pooled = np.sort(np.concatenate([np.asarray(r, dtype=float) for r in runs]))
    n = len(pooled)
    q = p / 100
    value = float(np.percentile(pooled, p))
    y = np.array([np.sum(np.asarray(r) <= value) for r in runs], dtype=float)
    sizes = np.array([len(r) for r in runs], dtype=float)
    variance = np.sum((y - q * sizes) ** 2) / n ** 2
    spread = 1.959963984540054 * n * np.sqrt(variance)
    rank = q * (n - 1)

    def at(r):
        r = min(max(r, 0.0), n - 1)
        lo, hi = int(np.floor(r)), int(np.ceil(r))
        return float(pooled[lo] + (pooled[hi] - pooled[lo]) * (r - lo))

    return value, at(rank - spread), at(rank + spread)


# Twelve runs of 3 to 7 requests each, every run on its own network speed. Integer
# arithmetic and quarters only, so the Rust test builds exactly the same values.
CLUSTERS = [[250 + 30 * (r % 5) + (r * 7 + i * 11) % 13 + 0.25 * i for i in range(3 + r % 5)] for r in range(12)]
# 300 runs of 40: past the resampling limit.
LARGE = [[220 + (r * 37) % 101 + ((r * 13 + i * 7) % 23) * 0.5 for i in range(40)] for r in range(300)]
# Each level's batches of simultaneous requests; None is a request that failed.
LEVELS = {
    1: [[300.0], [310.0], [305.0], [298.0], [302.0], [307.0], [299.0], [303.0]],
    3: [[300.0, 610.0, 905.0], [301.0, 612.0, 903.0], [299.0, 608.0, 910.0], [302.0, 605.0, 899.0]],
    5: [[320.0, 300.0, 330.0, 310.0, 315.0], [322.0, 318.0, 311.0, None, None], [305.0, 900.0, 312.0, 318.0, 309.0]],
}

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
    for k, (median, ratio) in degradation(LEVELS).items():
        print("degradation level", k, "median", median, "ratio (value, low, high)", ratio)
    for p in (50, 90):
        print(f"cluster p{p}", cluster_ci(CLUSTERS, p))
    for p in (50, 90, 99):
        print(f"large cluster p{p}", woodruff_cluster_ci(LARGE, p))
    gaps = [[25.0, 24.5, 26.0, 80.0], [25.5, 25.0], [24.0, 300.0, 25.0]]
    pooled = [g for gs in gaps for g in gs]
    print("itl mean", repr(float(np.mean(pooled))), "p50", float(np.percentile(pooled, 50)),
          "p99", float(np.percentile(pooled, 99)), "max", max(pooled))
