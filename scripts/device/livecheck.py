"""The live check of `rooftune tune gemm|attention` on a GPU: held-out shapes tuned, each in a fresh process, then
every winner re-timed side by side with that shape's exhaustive best config from the committed dataset,
in one process.

The first `--cold` shapes are tuned with an empty Triton cache each (a first tune on a new machine:
Triton also builds its launcher stubs); the rest share one Triton cache, as a user tuning a model's
layers one after another would (binaries of earlier shapes with the same specialization are reused).

    python3 scripts/device/livecheck.py --data datasets/h200/gemm/heldout --count 20 --cold 10 --out DIR
    python3 scripts/device/livecheck.py --data datasets/h200/attention/heldout --count 10 --cold 10 --out DIR

Writes DIR/livecheck.json (per shape: the tune's wall time and phases, winner, re-timed winner and best,
fraction = best / winner) and prints a table. Resumable: shapes already in the JSON are not tuned again.
Needs a GPU; the data's GPU should be this one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rooftune.candidates import kernel_of, parse_config
from rooftune.eval.datasets import readers
from rooftune.eval.datasets.format import shape_id
from rooftune.eval.scoring.metrics import summarize
from rooftune.hwprofiles import load_profile
from rooftune.kernels.harness import live
from rooftune.kernels.harness.measure import SweepSettings
from rooftune.outputs import write_atomic


def pick_shapes(records, count: int) -> list:
    """`count` shapes spread evenly over the dataset's files in name order (deterministic)."""
    ordered = sorted(records, key=lambda r: shape_id(r.shape))
    step = max(1, len(ordered) // count)
    return ordered[::step][:count]


def tune_args(shape) -> list[str]:
    """`rooftune tune`'s kernel and shape arguments for a dataset's shape (GEMM, or causal attention): the
    family's name, its dims and its parser's options but dtype (`tune` times its bf16 shapes)."""
    spec = kernel_of(shape)
    options = [arg for name in spec.parse_options if name != "dtype" for arg in (f"--{name}", getattr(shape, name))]
    return [spec.name, "--shape", spec.dims(shape), *options]


def tune_once(shape, out_dir: Path, budget: int, gpu: str, triton_cache: Path | None = None,
              sms: int | None = None) -> dict:
    """`rooftune tune` for `shape` in a fresh process, with a fresh Triton cache (None) or the given
    one; wall seconds and its JSON."""
    json_path = out_dir / f"tune_{shape_id(shape)}.json"
    with tempfile.TemporaryDirectory() as fresh:
        env = {**os.environ, "TRITON_CACHE_DIR": str(triton_cache or fresh)}
        cmd = [sys.executable, "-m", "rooftune.tuner.cli.app", "tune", *tune_args(shape),
               "--budget", str(budget), "--gpu", gpu, "--cache", "none", "--json", str(json_path),
               *sms_args(sms)]
        t0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall_s = time.perf_counter() - t0
    (out_dir / f"tune_{shape_id(shape)}.log").write_text(run.stdout + run.stderr)
    if run.returncode != 0:
        return {"wall_s": wall_s, "error": f"exit {run.returncode}: {(run.stderr or run.stdout)[-300:]}"}
    return {"wall_s": wall_s, "mode": "warm" if triton_cache else "cold", "result": json.loads(json_path.read_text())}


def sms_args(sms: int | None) -> list[str]:
    return [] if sms is None else ["--sms", str(sms)]


def retime(pairs, profile, sms: int | None = None) -> dict:
    """Each shape's winner and exhaustive best timed side by side (the sweep's method): shape id -> times."""

    out = {}
    if not pairs:
        return out
    with live.live_measurer(kernel_of(pairs[0][0].shape).name, profile, SweepSettings(), sms=sms) as gpu:
        for records, winner, best in pairs:
            configs = [winner] if winner == best else [winner, best]
            trials = {t.config: t for t in gpu.measure(records.shape, configs)}
            out[shape_id(records.shape)] = {"winner_us": trials[winner].time_us, "best_us": trials[best].time_us,
                                            "error": trials[winner].error or trials[best].error}
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", default="datasets/h200/gemm/heldout")
    p.add_argument("--count", type=int, default=20)
    p.add_argument("--cold", type=int, default=10, help="how many of the shapes get an empty Triton cache each")
    p.add_argument("--triton-cache", default=None, help="the shared Triton cache of the warm shapes "
                   "(default: one in the system's temporary folder, so that its thousands of files stay out of --out, "
                   "which a device call brings back)")
    p.add_argument("--budget", type=int, default=20)
    p.add_argument("--gpu", default="h200")
    p.add_argument("--sms", type=int, default=None, help="tune and re-time inside a green context of this many SMs")
    p.add_argument("--out", required=True)
    p.add_argument("--max-minutes", type=float, default=8.0)
    args = p.parse_args(argv)


    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "livecheck.json"
    state = json.loads(path.read_text()) if path.exists() else {"shapes": {}}
    deadline = time.monotonic() + 60 * args.max_minutes
    records = pick_shapes(readers.load_records(args.data), args.count)
    shared = Path(args.triton_cache or Path(tempfile.gettempdir()) / "rooftune-livecheck-triton-cache")
    for i, r in enumerate(records):
        sid = shape_id(r.shape)
        if sid in state["shapes"] or time.monotonic() > deadline:
            continue
        state["shapes"][sid] = tune_once(r.shape, out_dir, args.budget, args.gpu, None if i < args.cold else shared,
                                       args.sms)
        write_atomic(path, json.dumps(state, indent=1).encode())
        entry = state["shapes"][sid]
        print(f"{sid}: {entry['wall_s']:.1f} s {entry.get('error', '')}", flush=True)
    # Cache hit: the same shape again with a cache file, twice; the second run's wall time.
    first = records[0].shape
    cache = out_dir / "cache.json"
    for _ in range(2):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "rooftune.tuner.cli.app", "tune", *tune_args(first), "--budget",
                        str(args.budget), "--gpu", args.gpu, "--cache", str(cache), *sms_args(args.sms)], capture_output=True, text=True)
        state["cache_hit_wall_s"] = time.perf_counter() - t0
    pairs = []
    for r in records:
        entry = state["shapes"].get(shape_id(r.shape), {})
        if "result" not in entry or "retime" in entry:
            continue
        pairs.append((r, parse_config(entry["result"]["winner"]), r.best_candidate.config))
    for sid, times in retime(pairs, load_profile(args.gpu), args.sms).items():
        state["shapes"][sid]["retime"] = times
    write_atomic(path, json.dumps(state, indent=1).encode())
    done = [e for e in state["shapes"].values() if "retime" in e and e["retime"]["winner_us"]]
    fractions = [e["retime"]["best_us"] / e["retime"]["winner_us"] for e in done]
    walls = {mode: [e["wall_s"] for e in state["shapes"].values() if e.get("mode") == mode] for mode in ("cold", "warm")}
    for sid, e in state["shapes"].items():
        rt = e.get("retime", {})
        frac = rt["best_us"] / rt["winner_us"] if rt.get("winner_us") else float("nan")
        phases = e.get("result", {}).get("phases_s", {})
        print(f"{sid:30s} {e.get('mode', '?'):4s} wall {e['wall_s']:5.1f} s {phases} best/winner {frac:.3f}")
    if fractions:
        s = summarize(fractions)
        wall = "; ".join(f"{mode} tune wall median {statistics.median(w):.1f} s, max {max(w):.1f} s ({len(w)})"
                         for mode, w in walls.items() if w)
        print(f"{len(fractions)} shapes: live fraction mean {s['mean']:.3f}, worst-decile mean "
              f"{s['worst_decile_mean']:.3f}, min {min(fractions):.3f}; {wall}; "
              f"cache hit {state.get('cache_hit_wall_s', 0):.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
