"""The summary of x2_check.sh: one GPU against two, per run and per measuring phase.

For each run (a dataset folder and its sweep log): wall time, shapes per GPU, the per-shape phases the
measurer records (check_s: reference checks; time_s: graph capture and the interleaved rounds; retime_s:
the two final passes) summed over each GPU's shapes, and the same with each GPU's first shape left out
(steady state: the first pays its worker's start-up). Then each run's per-shape measuring time (the
three phases) against the one-GPU run's for the same shape, whether both runs pick the same best, and each
GPU's best times against the one-GPU run's (do the GPUs agree?).

usage: python3 x2_summary.py OUT.json one=DIR:LOG:SECONDS two=DIR:LOG:SECONDS [pin=DIR:LOG:SECONDS ...]
(the first run is the reference). To re-read a committed run: unpack logs/x2_check-v7b/x2_work.tgz into
W, then one=W/one:logs/x2_check-v7b/one.log:144 two=W/two:logs/x2_check-v7b/two.log:74.
"""

from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path

from rooftune.eval.dataset import read_shape, shape_files

PHASES = ("check_s", "time_s", "retime_s")


def log_lines(log: Path) -> list[tuple[str, str, float]]:
    """(gpu, shape label, wall seconds) per finished shape, in the order the log has them."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        m = re.match(r"gpu (\d+): (.+?)  (\d+(?:\.\d+)?) s(?:\s|$)", line.strip())
        if m:
            out.append((m.group(1), m.group(2), float(m.group(3))))
    return out


def run_facts(folder: Path, log: Path, seconds: float) -> tuple[dict, dict]:
    shapes = {}
    for path in shape_files(folder):
        r = read_shape(path)
        ok = [row for row in r.rows if row.time_us and not row.error]
        best = min(ok, key=lambda row: row.time_us)
        meta = r.meta
        shapes[path.name] = {"gpu": str(meta.get("device", "?")).split(":")[0].removeprefix("gpu "),
                             **{p: float(meta.get(p, 0.0)) for p in PHASES},
                             "clock_repeats": int(meta.get("clock_repeats", 0)),
                             "clock_mhz_min": meta.get("clock_mhz_min"),
                             "best": str(best.config), "best_us": best.time_us,
                             "times": {str(row.config): row.time_us for row in ok}}
    lines = log_lines(log)
    per_gpu: dict[str, dict] = {}
    for gpu in sorted({g for g, _, _ in lines}):
        walls = [w for g, _, w in lines if g == gpu]
        mine = [s for s in shapes.values() if s["gpu"] == gpu]
        per_gpu[gpu] = {"shapes": len(walls), "wall_sum_s": round(sum(walls), 1),
                        "steady_wall_sum_s": round(sum(walls[1:]), 1), "first_shape_wall_s": walls[0],
                        **{p: round(sum(s[p] for s in mine), 1) for p in PHASES},
                        "clock_repeats": sum(s["clock_repeats"] for s in mine)}
    steady = sum(g["steady_wall_sum_s"] for g in per_gpu.values())
    steady_n = sum(g["shapes"] - 1 for g in per_gpu.values())
    # steady throughput: shapes per second of one GPU's steady wall, summed over the GPUs
    rate = sum((g["shapes"] - 1) / g["steady_wall_sum_s"] for g in per_gpu.values() if g["steady_wall_sum_s"] > 0)
    facts = {"wall_s": seconds, "shapes": len(shapes), "per_gpu": per_gpu,
             "steady_shapes": steady_n, "steady_wall_sum_s": round(steady, 1), "steady_shapes_per_s": round(rate, 4)}
    return facts, shapes


def main(out: str, runs: list[str]) -> dict:
    facts, shapes = {}, {}
    for spec in runs:
        name, rest = spec.split("=", 1)
        folder, log, seconds = rest.rsplit(":", 2)
        facts[name], shapes[name] = run_facts(Path(folder), Path(log), float(seconds))
    ref = next(iter(facts))
    for name in facts:
        if name == ref:
            continue
        common = sorted(set(shapes[ref]) & set(shapes[name]))
        mine, base = shapes[name], shapes[ref]
        measure = [sum(mine[s][p] for p in PHASES) / sum(base[s][p] for p in PHASES) for s in common]
        by_phase = {p: statistics.median(mine[s][p] / base[s][p] for s in common if base[s][p] > 0) for p in PHASES}
        facts[name]["vs_" + ref] = {
            "speedup_wall": round(facts[ref]["wall_s"] / facts[name]["wall_s"], 3),
            "speedup_steady": round(facts[name]["steady_shapes_per_s"] / facts[ref]["steady_shapes_per_s"], 3),
            "measure_time_ratio_median": round(statistics.median(measure), 3),
            "measure_time_ratio_range": [round(min(measure), 3), round(max(measure), 3)],
            "phase_ratio_median": {p: round(v, 3) for p, v in by_phase.items()},
            "best_time_ratio_median": round(statistics.median(mine[s]["best_us"] / base[s]["best_us"] for s in common), 4),
            # this run's best, timed in the reference run, within 1% of the reference's best
            "best_within_1pct_in_ref": sum(base[s]["times"].get(mine[s]["best"], float("inf")) <= 1.01 * base[s]["best_us"]
                                          for s in common),
            "shapes": len(common),
            # each GPU's best times against the reference run's (GPU 0 there): do the GPUs agree?
            "best_time_ratio_by_gpu": {
                g: [round(statistics.median(r), 4), round(min(r), 3), round(max(r), 3), len(r)]
                for g in sorted({mine[s]["gpu"] for s in common})
                for r in [[mine[s]["best_us"] / base[s]["best_us"] for s in common if mine[s]["gpu"] == g]]}}
    per_shape = {name: {s: {k: v for k, v in row.items() if k != "times"} for s, row in rows.items()}
                 for name, rows in shapes.items()}
    Path(out).write_text(json.dumps({"runs": facts, "per_shape": per_shape}, indent=1))
    for name, f in facts.items():
        line = f"{name}: wall {f['wall_s']:.0f} s, steady {f['steady_shapes_per_s']:.3f} shapes/s"
        cmp = f.get("vs_" + ref)
        if cmp:
            line += (f"; vs {ref}: {cmp['speedup_wall']}x wall, {cmp['speedup_steady']}x steady, measure time "
                     f"x{cmp['measure_time_ratio_median']} ({cmp['phase_ratio_median']}), same best "
                     f"{cmp['best_within_1pct_in_ref']}/{cmp['shapes']}; best time ÷ {ref}'s by GPU "
                     f"(median, min, max, shapes): {cmp['best_time_ratio_by_gpu']}")
        print(line)
        for g, pg in f["per_gpu"].items():
            print(f"  gpu {g}: {pg}")
    return facts


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
