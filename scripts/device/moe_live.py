"""The live check of `rooftune tune moe`: whole layers' vLLM tables (18 token counts, both GEMMs) tuned on a GPU, each
in a fresh process with an empty Triton cache and no tune cache (a first tune on a new machine), its wall time kept;
then, on a CPU, each table scored on the layer's recorded ground truth as vLLM runs it (each batch the entry of the
nearest M key, on both GEMMs), beside vLLM's shipped table and the sweep's own time for the same table.

    python3 scripts/device/moe_live.py tune --layer 128,8,2048,768 [--layer ...] --out DIR [--budget 20]
        [--gemm both|split] [--dtype fp8_w8a8 | --block-shape 128,128]                                   # GPU
    python3 scripts/device/moe_live.py check DIR/moe_live.json --data datasets/h200/moe_fp8/heldout         # FP8
    python3 scripts/device/moe_live.py check DIR/moe_live.json [--data datasets/h200/moe/heldout]          # CPU

A layer is E,TOPK,HIDDEN,INTERMEDIATE[,TP]. `tune` writes DIR/moe_live.json (per layer: wall seconds, exit code,
the table as written, with --gemm split its `_down` table too, the log's tail) and DIR/tables/; resumable: layers
already in the JSON are not tuned again.
`check` prints, per layer, the table's score per GEMM (best recorded time / the entry's recorded time: mean and
worst over the layer's token counts), its mean over both GEMMs beside vLLM's shipped table's (each over the same
shapes), the layer's score as the engine runs it (tuner/llm/moe_eval.py: both GEMMs' summed time with the entry ÷
the best single config's, mean / worst entry) for the table and for vLLM's, and the sweep's seconds for those shapes.
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

from rooftune.outputs import write_atomic
from rooftune.tuner.llm.moe_tune import shard_intermediate

REPO = Path(__file__).resolve().parents[2]
HELD_OUT = REPO / "datasets/h200/moe/heldout"


def parse_layer(text: str) -> tuple[int, int, int, int, int]:
    """'E,TOPK,HIDDEN,INTERMEDIATE[,TP]' -> the five integers (TP 1 where not given)."""
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (4, 5) or min(values) < 1:
        raise argparse.ArgumentTypeError(f"a layer is E,TOPK,HIDDEN,INTERMEDIATE[,TP] of positive integers: {text!r}")
    return tuple(values + [1] * (5 - len(values)))


def layer_key(layer) -> str:
    return ",".join(map(str, layer))


def fp8_args(dtype: str | None, block_shape: str | None) -> tuple[str, ...]:
    """`rooftune tune moe`'s arguments for an FP8 layer: `--dtype fp8_w8a8` (per-tensor scales) or `--block-shape
    128,128` (block scales, which implies the dtype); none for bf16."""
    return ("--block-shape", block_shape) if block_shape else ("--dtype", dtype) if dtype else ()


def tune_layer(layer, out_dir: Path, budget: int, gpu: str, gemm: str = "both", quant: tuple[str, ...] = ()) -> dict:
    """`rooftune tune moe` for one layer in a fresh process (empty Triton cache, no tune cache): wall seconds, exit
    code, the table it wrote and the log's tail. `quant`: the tune's FP8 arguments (`fp8_args`), none for bf16."""
    experts, topk, hidden, intermediate, tp = layer
    tables = out_dir / "tables" / layer_key(layer).replace(",", "x")
    with tempfile.TemporaryDirectory() as fresh:
        cmd = [sys.executable, "-m", "rooftune.tuner.cli.app", "tune", "moe", "--experts", str(experts), "--topk",
               str(topk), "--hidden", str(hidden), "--intermediate", str(intermediate), "--tp", str(tp),
               "--budget", str(budget), "--gpu", gpu, "--cache", "none", "--out", str(tables), "--gemm", gemm, *quant]
        t0 = time.perf_counter()
        run = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "TRITON_CACHE_DIR": fresh})
        wall_s = time.perf_counter() - t0
    written = sorted(tables.glob("*.json")) if tables.is_dir() else []
    up = [w for w in written if not w.name.endswith("_down.json")]
    down = [w for w in written if w.name.endswith("_down.json")]
    return {"wall_s": round(wall_s, 2), "rc": run.returncode, "budget": budget, "command": " ".join(cmd[1:]),
            "gemm": gemm, "table_file": up[0].name if up else None,
            "table": json.loads(up[0].read_text()) if up else None,
            "down_table": json.loads(down[0].read_text()) if down else None,
            "log_tail": (run.stdout + run.stderr)[-4000:]}


def layer_records(records, layer) -> list:
    """The recorded shapes of `layer` (both GEMMs, every token count swept)."""
    experts, topk, hidden, intermediate, tp = layer
    shard = shard_intermediate(intermediate, tp)
    return [r for r in records if (r.shape.experts, r.shape.topk, r.shape.hidden, r.shape.intermediate)
            == (experts, topk, hidden, shard)]


def sweep_seconds(records) -> float:
    """The sweep's own seconds for these shapes: timing, reference checks and final passes (each shape's meta)."""
    return sum(r.meta.get("time_s", 0) + r.meta.get("check_s", 0) + r.meta.get("retime_s", 0) for r in records)


def score_table(records, table: dict, profile, down_table: dict | None = None) -> dict[str, list[float]]:
    """Per GEMM, each recorded shape's score with the table's entry at the nearest M (vLLM's lookup), replayed; the
    down GEMM's from `down_table` where given (a split pair)."""
    if down_table is not None:
        up = score_table([r for r in records if r.shape.gemm != "down"], table, profile)
        return {**up, **score_table([r for r in records if r.shape.gemm == "down"], down_table, profile)}
    from rooftune.tuner.evaluation import replay
    from rooftune.tuner.llm.moe_tables import config_of, shape_table_name
    from rooftune.tuner.search.vllm import vllm_shipped

    if not records:
        return {}
    name = shape_table_name(records[0].shape, profile.name)  # an FP8 layer's carries its dtype (and block shape)
    entries = {int(m): config_of(e) for m, e in table.items() if m != "triton_version"}
    scores: dict[str, list[float]] = {}
    for r, sc in zip(records, replay(records, vllm_shipped({name: entries}), 1, profile)):
        scores.setdefault(r.shape.gemm, []).append(sc.score)
    return scores


def check(state: dict, data: Path, gpu: str) -> list[dict]:
    """Per tuned layer: the live table's scores on the recorded shapes of its layer, vLLM's shipped table's (or its
    default rule's) beside them, the tune's wall seconds and the sweep's seconds for the same shapes."""
    from rooftune.eval.datasets import readers
    from rooftune.hwprofiles import load_profile
    from rooftune.tuner.evaluation import replay
    from rooftune.tuner.search.vllm import vllm_shipped

    profile = load_profile(gpu)
    records = readers.load_records(data)
    rows = []
    for key, run in state["layers"].items():
        mine = layer_records(records, parse_layer(key))
        if run.get("table") is None or not mine:
            rows.append({"layer": key, "wall_s": run.get("wall_s"), "shapes": len(mine), "rc": run.get("rc")})
            continue
        vllm = [sc.score for sc in replay(mine, vllm_shipped(), 1, profile)]
        scores = score_table(mine, run["table"], profile, run.get("down_table"))
        rows.append({"layer": key, "wall_s": run["wall_s"], "rc": run["rc"], "shapes": len(mine), "scores": scores,
                     "mean": statistics.fmean(s for v in scores.values() for s in v),
                     "vllm_mean": statistics.fmean(vllm), "sweep_s": sweep_seconds(mine),
                     **layer_figures(mine, run["table"], profile, run.get("down_table"))})
    return rows


def layer_figures(records, table: dict, profile, down_table: dict | None = None) -> dict:
    """The layer's score as the engine runs the table (with `down_table`, the `_down` table for the down GEMM), and
    vLLM's shipped table's (its default rule where it ships none): mean and worst entry of best single config's
    summed time ÷ the entry's."""
    from rooftune.eval.scoring.layers import layer_records, score_layer
    from rooftune.tuner.llm.moe_eval import table_entry, vllm_entry
    from rooftune.tuner.llm.moe_tables import TRITON_KEY, config_of, shipped_tables

    (key, by_m), = layer_records(records).items()
    def entries(t: dict | None) -> dict | None:
        return None if t is None else {int(m): config_of(e) for m, e in t.items() if m != TRITON_KEY}

    mine = score_layer(key, by_m, table_entry(by_m, entries(table), entries(down_table)))
    vllm = score_layer(key, by_m, vllm_entry(by_m, profile, shipped_tables(), default=False))
    return {"layer_mean": mine.mean, "layer_worst": mine.worst, "vllm_layer_mean": vllm.mean,
            "vllm_layer_worst": vllm.worst}


def print_check(rows: list[dict]) -> None:
    print(f"{'layer':22s} {'tune s':>7s} {'shapes':>6s} {'gate_up mean/worst':>19s} {'down mean/worst':>16s} "
          f"{'both':>6s} {'vLLM shipped':>12s} {'layer mean/worst':>17s} {'vLLM layer':>14s} {'sweep s':>8s}")
    for r in rows:
        if "scores" not in r:
            print(f"{r['layer']:22s} {r['wall_s'] or 0:7.1f} {r['shapes']:6d}   no table or no recorded shapes "
                  f"(exit {r['rc']})")
            continue
        cells = [f"{statistics.fmean(v):.3f} / {min(v):.3f}" if v else "-"
                 for v in (r["scores"].get("gate_up", []), r["scores"].get("down", []))]
        print(f"{r['layer']:22s} {r['wall_s']:7.1f} {r['shapes']:6d} {cells[0]:>19s} {cells[1]:>16s} "
              f"{r['mean']:6.3f} {r['vllm_mean']:12.3f} {r['layer_mean']:8.3f} / {r['layer_worst']:.3f} "
              f"{r['vllm_layer_mean']:6.3f} / {r['vllm_layer_worst']:.3f} {r['sweep_s']:8.0f}")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True)
    t = sub.add_parser("tune")
    t.add_argument("--layer", type=parse_layer, action="append", required=True)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--budget", type=int, default=20)
    t.add_argument("--gpu", default="h200")
    t.add_argument("--gemm", choices=("both", "split"), default="both")
    t.add_argument("--dtype", choices=("fp8_w8a8",), help="an FP8 layer with per-tensor scales")
    t.add_argument("--block-shape", help="an FP8 layer with block scales (128,128)")
    c = sub.add_parser("check")
    c.add_argument("state", type=Path)
    c.add_argument("--data", type=Path, default=HELD_OUT)
    c.add_argument("--gpu", default="h200")
    args = p.parse_args(argv)
    if args.verb == "check":
        print_check(check(json.loads(args.state.read_text()), args.data, args.gpu))
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "moe_live.json"
    state = json.loads(path.read_text()) if path.exists() else {"layers": {}}
    for layer in args.layer:
        if layer_key(layer) in state["layers"]:
            continue
        state["layers"][layer_key(layer)] = run = tune_layer(layer, args.out, args.budget, args.gpu, args.gemm,
                                                             fp8_args(args.dtype, args.block_shape))
        write_atomic(path, json.dumps(state, indent=1) + "\n")
        print(f"{layer_key(layer)}: {run['wall_s']:.1f} s, exit {run['rc']}, table {run['table_file']}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
