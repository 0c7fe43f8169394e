"""Each variant's change from the shipped search on the same folds, averaged over the fold seeds of a run.py log:
mean / worst-tenth mean at 5, 10 and 20 configs, and on how many seeds it gains at 5 (mean, worst tenth).

python3 table.py by_shape.log by_layer.log
python3 table.py --at-1 pick_by_shape.log pick_by_layer.log   (Δ at 1 and 5 configs)"""
import re
import sys
from collections import defaultdict

import numpy as np

ROW = re.compile(r"seed (\d+) \| (.+?)\s+\| 1: (\S+) / (\S+)  5: (\S+) / (\S+)  10: (\S+) / (\S+)  20: (\S+) / (\S+)")


def deltas(path):
    runs = defaultdict(dict)
    for line in open(path):
        m = ROW.match(line)
        if m:
            runs[m.group(2)][int(m.group(1))] = np.array([float(x) for x in m.groups()[2:]])
    base = runs["shipped"]
    return {name: np.stack([v[s] - base[s] for s in sorted(v)]) for name, v in runs.items() if name != "shipped"}


def main(paths):
    at1 = "--at-1" in paths
    paths = [p for p in paths if p != "--at-1"]
    tables = [deltas(p) for p in paths]
    first = 0 if at1 else 2  # columns: 1, 5, 10, 20 configs (mean, worst tenth each)
    label = "Δ at 1 (seeds gaining), Δ at 5" if at1 else "Δ at 5 (seeds gaining), Δ at 10, Δ at 20"
    print("| variant | " + " | ".join(f"{p}: {label}" for p in paths) + " |")
    print("|---|" + "---|" * len(paths))
    for name in tables[0]:
        cells = []
        for t in tables:
            d = t[name][:, first:]
            m = d.mean(axis=0)
            rest = "; ".join(f"{m[j]:+.4f} / {m[j + 1]:+.4f}" for j in range(2, len(m) if not at1 else 4, 2))
            cells.append(f"{m[0]:+.4f} / {m[1]:+.4f} ({int((d[:, 0] > 0).sum())}, {int((d[:, 1] > 0).sum())} of "
                         f"{len(d)}); {rest}")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1:])
