"""The README's tables from run.log: every variant and seed, then each variant's change from the shipped setting on
the same folds. python3 table.py run.log"""
import re
import sys

rows = {}
for line in open(sys.argv[1]):
    if not line.startswith("seed "):
        continue
    parts = [p.strip() for p in line.split("|")]
    seed, name = int(parts[0].split()[1]), parts[1]
    obj = float(parts[2].split()[1])
    cells = [tuple(map(float, c)) for c in re.findall(r"\d+: ([\d.]+) / ([\d.]+)", parts[3])]
    se = float(re.search(r"se ([\d.]+)", parts[4]).group(1))
    rows[(name, seed)] = (obj, cells, se)

names = list(dict.fromkeys(n for n, _ in rows))
seeds = sorted({s for _, s in rows})
print("| variant | seed | objective | 1 config | 5 | 10 | 20 |")
print("|---|---|---|---|---|---|---|")
for n in names:
    for s in seeds:
        obj, cells, _ = rows[(n, s)]
        print(f"| {n} | {s} | {obj:.4f} | " + " | ".join(f"{m:.4f} / {w:.4f}" for m, w in cells) + " |")
print()
on = ", ".join(map(str, seeds))
print(f"| variant | Δ at 1 config, mean / worst tenth (± se of the mean's Δ), seeds {on} | Δ objective, seeds {on} | "
      "Δ at 5, 10, 20 (mean / worst tenth, summed over seeds) |")
print("|---|---|---|---|")
for n in names[1:]:
    d1, dobj, later = [], [], []
    for s in seeds:
        obj, cells, se = rows[(n, s)]
        bobj, bcells, _ = rows[(names[0], s)]
        d1.append(f"{cells[0][0] - bcells[0][0]:+.4f} / {cells[0][1] - bcells[0][1]:+.4f} (±{se:.4f})")
        dobj.append(f"{obj - bobj:+.4f}")
    for j in range(1, 4):
        dm = sum(rows[(n, s)][1][j][0] - rows[(names[0], s)][1][j][0] for s in seeds)
        dw = sum(rows[(n, s)][1][j][1] - rows[(names[0], s)][1][j][1] for s in seeds)
        later.append(f"{dm:+.4f} / {dw:+.4f}")
    print(f"| {n} | {'; '.join(d1)} | {', '.join(dobj)} | {'; '.join(later)} |")
