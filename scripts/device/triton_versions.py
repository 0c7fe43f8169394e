"""Does a tuned pick survive a Triton upgrade? The recorded top configs of held-out shapes timed under
two Triton versions (one GPU call each), and `rooftune tune` run live under the newer one.

    python3 scripts/device/triton_versions.py prepare PLAN.json            # CPU: shapes, top 10, the pick
    python3 scripts/device/triton_versions.py time PLAN.json OUT.json [--tune] [--seconds S]   # GPU
    python3 scripts/device/triton_versions.py report OLD.json NEW.json     # CPU: the comparison

`prepare` takes every 5th held-out GEMM shape (40) and every 10th held-out attention shape (20) of the
committed datasets, each shape's 10 fastest recorded configs of the space and the config `rooftune eval`
picks at 20 trials (replayed on the recorded data with the shipped residual). `time` measures, per
shape, those configs side by side with the sweep's own method (`SweepSettings`: interleaved shuffled
rounds of CUDA graphs, two final passes, every config reference-checked) under whatever Triton the
process imports, and with `--tune` first tunes the shape live (20 trials, no cache; under a Triton its
residual was not checked for, `tune` ranks by the model alone) and times its winner in the same batch.
Resumable: shapes already in OUT.json are skipped; OUT.json is rewritten whole after each shape.
`report` compares, per shape, the configs' order under the two versions (ratios within one call, so
drift between calls cancels).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GEMM_DATA, ATTENTION_DATA = REPO / "datasets/h200/gemm/heldout", REPO / "datasets/h200/attention/heldout"
TOP = 10
BUDGET = 20


def _write(path: Path, data: dict) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps(data, indent=1) + "\n")
    os.replace(tmp, path)


def plan_entries(records, step: int, profile, residual) -> list[dict]:
    """Every `step`-th shape: its id, top TOP recorded configs of the space, and rooftune's replayed pick."""
    from rooftune.candidates import kernel_of
    from rooftune.eval.scoring.replay import RecordedMeasurer
    from rooftune.tuner.search.strategies import rooftune_strategy
    from rooftune.tuner.tune import tune

    out = []
    for r in records[::step]:
        space = set(r.candidate_configs())
        ok = sorted((t for t in r.trials if t.ok and t.config in space), key=lambda t: t.time_us)
        pick = tune(r.shape, RecordedMeasurer(r), rooftune_strategy(residual), BUDGET, profile=profile,
                    candidates=r.candidate_configs()).winner
        out.append({"kernel": kernel_of(r.shape).name, "shape": str(r.shape), "id": _shape_id(r.shape),
                    "top": [str(t.config) for t in ok[:TOP]], "pick": str(pick),
                    "recorded_us": {str(t.config): t.time_us for t in ok[:TOP]}})
    return out


def _shape_id(shape) -> str:
    from rooftune.candidates import shape_id

    return shape_id(shape)


def prepare(out: Path) -> None:
    from rooftune.candidates import kernel_spec
    from rooftune.eval.datasets.format import read_dataset
    from rooftune.hwprofiles import load_profile
    from rooftune.tuner.residual_choice import shipped_residual

    profile = load_profile("h200")
    plan = []
    for data, step, kernel in ((GEMM_DATA, 5, "gemm"), (ATTENTION_DATA, 10, "attention")):
        residual = shipped_residual(kernel_spec(kernel), profile, "3.6.0")
        plan += plan_entries(read_dataset(data), step, profile, residual)
    _write(out, {"shapes": plan})
    print(f"{out}: {sum(e['kernel'] == 'gemm' for e in plan)} GEMM and "
          f"{sum(e['kernel'] == 'attention' for e in plan)} attention shapes")


def _shape_of(entry: dict):
    from rooftune.eval.datasets.format import read_shape, shape_path

    root = GEMM_DATA if entry["kernel"] == "gemm" else ATTENTION_DATA
    return read_shape(shape_path(root, entry["id"])).shape


def time_plan(plan_path: Path, out: Path, tune_live: bool, seconds: float) -> None:
    import triton

    from rooftune.candidates import parse_config
    from rooftune.hwprofiles import load_profile
    from rooftune.kernels.harness.live import live_measurer
    from rooftune.kernels.harness.measure import SweepSettings
    from rooftune.tuner.live_tune import tune_shape

    profile = load_profile("h200")
    plan = json.loads(plan_path.read_text())["shapes"]
    done = json.loads(out.read_text()) if out.exists() else {"triton": triton.__version__, "shapes": {}}
    if done["triton"] != triton.__version__:
        sys.exit(f"{out} holds Triton {done['triton']}'s times; this process runs {triton.__version__}")
    end = time.monotonic() + seconds
    for kernel in ("gemm", "attention"):
        todo = [e for e in plan if e["kernel"] == kernel and e["id"] not in done["shapes"]]
        if not todo:
            continue
        with live_measurer(kernel, profile, SweepSettings()) as gpu:
            for entry in todo:
                if time.monotonic() > end:
                    print("time budget reached")
                    return
                shape = _shape_of(entry)
                row = {"tune": None}
                configs = [parse_config(c) for c in entry["top"]]
                if parse_config(entry["pick"]) not in configs:
                    configs.append(parse_config(entry["pick"]))
                if tune_live:
                    t0 = time.perf_counter()
                    result = tune_shape(shape, profile, BUDGET, cache=None)
                    row["tune"] = {"winner": str(result.winner), "wall_s": round(time.perf_counter() - t0, 2),
                                   "residual": result.residual_note}
                    if result.winner not in configs:
                        configs.append(result.winner)
                trials = gpu.measure(shape, configs)
                row["us"] = {str(t.config): t.time_us for t in trials}
                row["errors"] = {str(t.config): t.error for t in trials if not t.ok}
                row["baseline_us"] = gpu.baseline_us()
                done["shapes"][entry["id"]] = row
                _write(out, done)
                best = min((v for v in row["us"].values() if v), default=None)
                print(f"{entry['shape']}: best {best} µs, errors {len(row['errors'])}"
                      + (f", tune {row['tune']['wall_s']} s" if row["tune"] else ""), flush=True)


def compare(plan: list[dict], old: dict, new: dict) -> list[dict]:
    """Per shape timed under both: the old version's fastest of the top configs (by its own call), how
    that config and rooftune's pick do under the new version against the new fastest of the same set,
    and, where the new call tuned live, its winner against that fastest."""
    rows = []
    for entry in plan:
        a, b = old["shapes"].get(entry["id"]), new["shapes"].get(entry["id"])
        if not a or not b:
            continue
        common = [c for c in entry["top"] if a["us"].get(c) and b["us"].get(c)]
        if not common:
            continue
        old_best = min(common, key=lambda c: a["us"][c])
        new_best = min(common, key=lambda c: b["us"][c])
        row = {"kernel": entry["kernel"], "shape": entry["shape"], "same_best": old_best == new_best,
               "old_best_under_new": b["us"][new_best] / b["us"][old_best],
               "new_vs_old_best_time": b["us"][new_best] / a["us"][old_best],
               "vs_baseline_old": (a["baseline_us"] / a["us"][old_best]) if a.get("baseline_us") else None,
               "vs_baseline_new": (b["baseline_us"] / b["us"][new_best]) if b.get("baseline_us") else None}
        pick = entry["pick"]
        if b["us"].get(pick):
            row["pick_under_new"] = b["us"][new_best] / b["us"][pick]
        if a["us"].get(pick):
            row["pick_under_old"] = a["us"][old_best] / a["us"][pick]
        tuned = (b.get("tune") or {}).get("winner")
        if tuned and b["us"].get(tuned):
            row["tune_new"] = min(b["us"][new_best], b["us"][tuned]) / b["us"][tuned]
            row["tune_wall_s"] = b["tune"]["wall_s"]
        rows.append(row)
    return rows


def summary(rows: list[dict]) -> dict:
    def stat(key, kernel):
        values = [r[key] for r in rows if r["kernel"] == kernel and r.get(key) is not None]
        if not values:
            return None
        worst = sorted(values)[: max(1, len(values) // 10)]
        return {"n": len(values), "mean": statistics.fmean(values), "min": min(values),
                "worst_tenth_mean": statistics.fmean(worst)}

    keys = ("old_best_under_new", "pick_under_old", "pick_under_new", "tune_new", "new_vs_old_best_time",
            "vs_baseline_old", "vs_baseline_new")
    out = {}
    for kernel in ("gemm", "attention"):
        sel = [r for r in rows if r["kernel"] == kernel]
        out[kernel] = {"shapes": len(sel), "same_best": sum(r["same_best"] for r in sel),
                       **{k: stat(k, kernel) for k in keys}}
    return out


def report(plan_path: Path, old_path: Path, new_path: Path) -> None:
    plan = json.loads(plan_path.read_text())["shapes"]
    old, new = json.loads(old_path.read_text()), json.loads(new_path.read_text())
    result = summary(compare(plan, old, new))
    print(f"Triton {old['triton']} -> {new['triton']}")
    for kernel, s in result.items():
        print(f"{kernel}: {s['shapes']} shapes, the same fastest of the top {TOP} on {s['same_best']}")
        for key, v in s.items():
            if isinstance(v, dict):
                print(f"  {key:24s} mean {v['mean']:.3f}  worst tenth {v['worst_tenth_mean']:.3f}  min {v['min']:.3f}"
                      f"  (n {v['n']})")
    print(json.dumps(result, indent=1))


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("prepare").add_argument("plan", type=Path)
    t = sub.add_parser("time")
    t.add_argument("plan", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--tune", action="store_true")
    t.add_argument("--seconds", type=float, default=480)
    r = sub.add_parser("report")
    r.add_argument("plan", type=Path)
    r.add_argument("old", type=Path)
    r.add_argument("new", type=Path)
    args = p.parse_args(argv)
    if args.verb == "prepare":
        prepare(args.plan)
    elif args.verb == "time":
        time_plan(args.plan, args.out, args.tune, args.seconds)
    else:
        report(args.plan, args.old, args.new)


if __name__ == "__main__":
    main()
