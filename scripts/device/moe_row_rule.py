"""Does the fused-MoE space's row rule drop a winner? Taller tiles timed where the training data's best sits at the
tallest BLOCK_SIZE_M the rule keeps.

    python3 scripts/device/moe_row_rule.py prepare PLAN.json [--data datasets/h200/moe/train]   # CPU
    python3 scripts/device/moe_row_rule.py time PLAN.json OUT.json [--seconds S]                 # GPU
    python3 scripts/device/moe_row_rule.py report PLAN.json OUT.json                             # CPU

The rule (`candidates/moe_space.py`) drops a BLOCK_SIZE_M above both 64 and the most rows any expert holds: such a
tile holds every expert's rows, so a taller one adds only padding. `prepare` lists the training shapes whose best
recorded config has the tallest BLOCK_SIZE_M the rule keeps there (below 256), and for each the best config, the
same config with BLOCK_SIZE_M doubled (and doubled again, up to 256; with fewer stages where its buffers need
it) and the fastest recorded config with a shorter tile. `time` measures each shape's list side by side with the sweep's method (`SweepSettings`: every
config reference-checked, interleaved shuffled rounds of CUDA graphs), resumable: shapes in OUT.json are skipped,
and OUT.json is rewritten atomically after each. `report` prints, per shape, the best dropped (taller) config's
time ÷ the kept best's in the same call: below 1, the rule dropped a winner.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAIN = REPO / "datasets/h200/moe/train"
TALLEST = 256


# The space's rules a taller tile must still pass: it must launch and not spill (the row rule is what is checked).
KEPT_RULES = ("shared memory over the per-block limit", "registers over the per-thread limit")


def _taller(shape, config: dict, profile) -> list[dict]:
    """`config` with BLOCK_SIZE_M doubled, and doubled again, up to TALLEST: each with the most stages (up to its
    own) that pass the space's KEPT_RULES (`moe_legality`); none where no stage count does."""
    import numpy as np

    from rooftune.candidates.moe_space import moe_legality

    out, bm = [], config["BLOCK_SIZE_M"] * 2
    while bm <= TALLEST:
        for stages in range(config["num_stages"], 1, -1):
            c = {**config, "BLOCK_SIZE_M": bm, "num_stages": stages}
            rules = moe_legality(shape, {k: np.array([v]) for k, v in c.items()}, profile)
            if not any(rules[name][0] for name in KEPT_RULES):
                out.append(c)
                break
        bm *= 2
    return out


def plan_entries(records, profile) -> list[dict]:
    """The shapes whose best recorded config has the tallest BLOCK_SIZE_M the rule keeps, with the configs to time."""
    from rooftune.candidates import MOE_SPACE, legal_configs
    from rooftune.eval.datasets.format import shape_id

    entries = []
    for r in records:
        best = r.best_candidate
        if best is None:
            continue
        kept = max(c["BLOCK_SIZE_M"] for c in legal_configs(MOE_SPACE, r.shape, profile).configs)
        bm = best.config["BLOCK_SIZE_M"]
        if bm != kept or bm >= TALLEST:
            continue
        shorter = [t for t in r.trials if t.ok and t.config["BLOCK_SIZE_M"] < bm]
        config = dict(best.config)
        entries.append({"id": shape_id(r.shape), "shape": r.shape.__dict__, "best": config,
                        "taller": _taller(r.shape, config, profile),
                        "shorter": dict(min(shorter, key=lambda t: t.time_us).config) if shorter else None,
                        "recorded_us": best.time_us})
    return entries


def prepare(plan: Path, data: Path) -> None:
    from rooftune.eval.datasets.format import read_dataset
    from rooftune.hwprofiles import load_profile
    from rooftune.outputs import write_atomic

    entries = plan_entries(read_dataset(data), load_profile("h200"))
    write_atomic(plan, (json.dumps({"data": str(data.relative_to(REPO)) if data.is_absolute() else str(data),
                                    "shapes": entries}, indent=1) + "\n").encode())
    print(f"{len(entries)} shapes whose best has the tallest kept BLOCK_SIZE_M -> {plan}")


def _config(params: dict):
    from rooftune.candidates import Config

    return Config.make(**params)


def time_plan(plan_path: Path, out: Path, seconds: float) -> None:
    from rooftune.candidates import MoeShape
    from rooftune.hwprofiles import load_profile
    from rooftune.kernels.harness.live import live_measurer
    from rooftune.kernels.harness.measure import SweepSettings
    from rooftune.outputs import write_atomic

    plan = json.loads(plan_path.read_text())["shapes"]
    done = json.loads(out.read_text()) if out.exists() else {"shapes": {}}
    end = time.monotonic() + seconds
    with live_measurer("moe", load_profile("h200"), SweepSettings()) as gpu:
        for entry in plan:
            if entry["id"] in done["shapes"]:
                continue
            if time.monotonic() > end:
                print("time budget reached")
                return
            configs = [entry["best"], *entry["taller"], *([entry["shorter"]] if entry["shorter"] else [])]
            trials = gpu.measure(MoeShape(**entry["shape"]), [_config(c) for c in configs])
            done["shapes"][entry["id"]] = {
                "us": [t.time_us for t in trials], "errors": [t.error for t in trials]}
            write_atomic(out, (json.dumps(done, indent=1) + "\n").encode())
            print(f"{entry['id']}: {[round(t.time_us, 2) if t.ok else t.error for t in trials]}", flush=True)


def verdicts(plan: list[dict], timed: dict) -> list[dict]:
    """Per timed shape: the kept best's time, the fastest taller config's time ÷ it (below 1: a dropped winner)."""
    rows = []
    for entry in plan:
        row = timed["shapes"].get(entry["id"])
        if row is None or row["us"][0] is None:
            continue
        taller = [us for us in row["us"][1:1 + len(entry["taller"])] if us is not None]
        rows.append({"id": entry["id"], "best_us": row["us"][0], "planned": len(entry["taller"]),
                     "taller_ratio": min(taller) / row["us"][0] if taller else None})
    return rows


def report(plan_path: Path, out: Path) -> None:
    plan = json.loads(plan_path.read_text())["shapes"]
    rows = verdicts(plan, json.loads(out.read_text()))
    for r in rows:
        if r["taller_ratio"] is not None:
            ratio = f"{r['taller_ratio']:.3f}"
        else:  # none planned: every taller tile breaks the shared-memory or register rule; or all planned failed
            ratio = "none: no taller tile fits" if not r["planned"] else "every taller config failed"
        print(f"{r['id']:48s} kept best {r['best_us']:9.2f} us   fastest taller / kept best {ratio}")
    dropped = [r for r in rows if r["taller_ratio"] is not None and r["taller_ratio"] < 1]
    compared = sum(r["taller_ratio"] is not None for r in rows)
    print(f"{len(rows)} shapes timed, {compared} with a taller config that fits; "
          f"the rule dropped a faster config on {len(dropped)}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True)
    pr = sub.add_parser("prepare")
    pr.add_argument("plan", type=Path)
    pr.add_argument("--data", type=Path, default=TRAIN)
    t = sub.add_parser("time")
    t.add_argument("plan", type=Path)
    t.add_argument("out", type=Path)
    t.add_argument("--seconds", type=float, default=480)
    r = sub.add_parser("report")
    r.add_argument("plan", type=Path)
    r.add_argument("out", type=Path)
    args = p.parse_args(argv)
    if args.verb == "prepare":
        prepare(args.plan, args.data)
    elif args.verb == "time":
        time_plan(args.plan, args.out, args.seconds)
    else:
        report(args.plan, args.out)


if __name__ == "__main__":
    sys.exit(main())
