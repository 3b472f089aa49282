"""Pools engine_bias runs (target/engine_bias.json files): for each level and engine case,
median and p99 minus the JS readers', with a 95% bootstrap interval that resamples whole
blocks of each case on their own (numpy, an independent reference for the benchmark's own
Rust report). Usage: copy `target/engine_bias.json` after each run (the next run writes over it),
then `python3 e2e/examples/engine_bias/pool.py run1.json run2.json ...` (numpy)."""
import json, sys
from collections import defaultdict
import numpy as np

blocks = defaultdict(list)  # (level, reader) -> list of arrays
steal = defaultdict(list)
for path in sys.argv[1:]:
    for case in json.load(open(path)):
        if 'busy' in case['reader']:
            continue
        key = (case['level'], case['reader'])
        values = np.array(case['bias_ms'])
        block = np.array(case['block'])
        for b, machine in enumerate(case['machine']):
            blocks[key].append(values[block == b])
            steal[key].append(machine['steal_pct'])

rng = np.random.default_rng(1)
def ci(a, b, p, n=4000):
    value = np.percentile(np.concatenate(a), p) - np.percentile(np.concatenate(b), p)
    d = []
    for _ in range(n):
        ra = np.concatenate([a[i] for i in rng.integers(0, len(a), len(a))])
        rb = np.concatenate([b[i] for i in rng.integers(0, len(b), len(b))])
        d.append(np.percentile(ra, p) - np.percentile(rb, p))
    lo, hi = np.percentile(d, [2.5, 97.5])
    return f"{value:+.2f} [{lo:+.2f}, {hi:+.2f}]"

for limit in (None, 5.0):
    print("\nall blocks" if limit is None else f"\nblocks with the host's steal under {limit}%")
    for level in sorted({k[0] for k in blocks}):
        for reader in ("engine in its worker, page still", "engine in its worker, live charts"):
            def kept(r):
                return [v for v, s in zip(blocks[(level, r)], steal[(level, r)])
                        if limit is None or s < limit]
            mine = kept(reader)
            page, worker = kept("JS reader on the page"), kept("JS reader in a worker")
            print(f"{level:>3} {reader:<36} n={sum(map(len, mine)):>5} "
                  f"median vs page {ci(mine, page, 50)}  p99 vs page {ci(mine, page, 99)}  "
                  f"median vs worker {ci(mine, worker, 50)}  p99 vs worker {ci(mine, worker, 99)}")
