"""Pools engine_bias runs (target/engine_bias.json files): for each level, each case's
median and p99 minus those of the JS readers listed before it (the engine's cases against
all three: on the page, in a worker, in a worker with the engine's pause), with a 95%
bootstrap interval that resamples whole rounds (a round: one block of each case of a
level, in turn, in one run; both sides of a difference are drawn from the same rounds), as
the benchmark's own Rust report does (numpy, an independent reference for it). Usage: copy
`target/engine_bias.json` after each run (the next run writes over it), then
`python3 e2e/examples/engine_bias/pool.py run1.json run2.json ...` (numpy). A phone's cases
(", CPU 4× slower") are pooled apart from the rest, as a level of their own ("5, CPU 4×")."""
import json, re, sys
from collections import defaultdict
import numpy as np

# (level, reader) -> {(run, round): (values, steal %)}; a slowed CPU's cases under a level
# of their own, so they are compared only with the readers measured on the same slowed CPU.
rounds = defaultdict(dict)
for run, path in enumerate(sys.argv[1:]):
    for case in json.load(open(path)):
        if 'busy' in case['reader']:
            continue
        reader, level = case['reader'], str(case['level'])
        slowed = re.search(r", CPU (\d+)× slower$", reader)
        if slowed:
            reader = reader[:slowed.start()]
            level = f"{level}, CPU {slowed.group(1)}×"
        values = np.array(case['bias_ms'])
        block = np.array(case['block'])
        for b, machine in enumerate(case['machine']):
            if (block == b).any():
                rounds[(level, reader)][(run, b)] = (values[block == b], machine['steal_pct'])

rng = np.random.default_rng(1)
def ci(a, b, p, limit, n=4000):
    common = [k for k in a if k in b and (limit is None or (a[k][1] < limit and b[k][1] < limit))]
    if not common:
        return "no rounds"
    def difference(drawn):
        return (np.percentile(np.concatenate([a[common[i]][0] for i in drawn]), p)
                - np.percentile(np.concatenate([b[common[i]][0] for i in drawn]), p))
    value = difference(range(len(common)))
    d = [difference(rng.integers(0, len(common), len(common))) for _ in range(n)]
    lo, hi = np.percentile(d, [2.5, 97.5])
    return f"{value:+.2f} [{lo:+.2f}, {hi:+.2f}] ({len(common)} rounds)"

# Each case against the JS readers listed before it, as the Rust report does.
REFERENCES = ["JS reader on the page", "JS reader in a worker", "JS reader in a worker, engine's pause"]
CASES = REFERENCES[1:] + ["engine in its worker, page still", "engine in its worker, live charts"]
for limit in (None, 5.0):
    print("\nall rounds" if limit is None else f"\nrounds with the host's steal under {limit}% in both blocks")
    for level in sorted({k[0] for k in rounds}, key=lambda l: (int(l.split(",")[0]), l)):
        for reader in CASES:
            mine = rounds[(level, reader)]
            for reference in REFERENCES:
                if reference == reader:
                    break
                theirs = rounds[(level, reference)]
                if not mine or not theirs:
                    continue
                print(f"{level:>10} {reader:<38} vs {reference:<38} median {ci(mine, theirs, 50, limit)}  "
                      f"p99 {ci(mine, theirs, 99, limit)}")
