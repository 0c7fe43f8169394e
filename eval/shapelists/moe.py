"""Seeded generator of the fused-MoE shape lists the MoE ground truth is swept over, and its device-time plan.

A shape is one GEMM (gate_up or down) of one MoE layer of a real model at one token count, bf16: the layer's
(experts, topk, hidden, intermediate per tensor-parallel shard) from the model's published config, at each of
the 18 token counts of vLLM's tuner (`benchmarks/kernels/benchmark_moe.py`), so a model's layer yields the two
halves of one vLLM table. Routing: every shape's seed is 0, so a layer's two GEMMs at one token count share one
draw, and `rooftune tune moe` (seed 0) times the routing the datasets hold (candidates/routing.py: uniform
top-k). The split is by model: the held-out models' layers are only in the held-out list, and nothing is
fitted on them. The generator's seed orders each list so that models take turns (a prefix spans them).

`device_time_plan` estimates what sweeping a list costs on a GPU profile: legal configs × the GEMM sweep's
measured cost per config, which grows with the launch time (datasets/h200/moe/README.md gives the numbers).

Run `python -m rooftune.eval.shapelists.moe [--out DIR] [--plan]` to (re)write the lists; same seed, same files.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from rooftune.candidates import MOE_SPACE, MoeShape, legal_configs
from rooftune.candidates.moe_space import VLLM_TOKENS
from rooftune.candidates.routing import expert_rows
from rooftune.candidates.shapes import DTYPE_BYTES, MOE_GEMMS, load_moe_shapes
from rooftune.candidates.space import SearchSpace
from rooftune.eval.shapelists.gemm import interleave, write_shape_lists
from rooftune.hwprofiles import HardwareProfile, load_profile

SEED = 20261202

# model -> [(layer, experts, topk, hidden, intermediate)], from the models' published configs; "tpN": the
# expert weights of one tensor-parallel shard of N (intermediate / N), as vLLM's N in a table's name.
MODELS: dict[str, list[tuple[str, int, int, int, int]]] = {
    "mixtral-8x7b": [("tp1", 8, 2, 4096, 14336)],
    "qwen3-30b-a3b": [("tp1", 128, 8, 2048, 768), ("tp2", 128, 8, 2048, 384), ("tp4", 128, 8, 2048, 192)],
    "qwen2-57b-a14b": [("tp1", 64, 8, 3584, 2560)],
    "gpt-oss-20b": [("tp1", 32, 4, 2880, 2880)],  # its sizes in bf16 (the release is MXFP4)
    "deepseek-v2-lite": [("tp1", 64, 6, 2048, 1408)],
    "olmoe-1b-7b": [("tp1", 64, 8, 2048, 1024)],
    "llama-4-scout": [("tp1", 16, 1, 5120, 8192)],
    "phi-3.5-moe": [("tp1", 16, 2, 4096, 6400)],
    "qwen1.5-moe-a2.7b": [("tp1", 60, 4, 2048, 1408)],
}
# Held out: only in the held-out list. They hold every layer vLLM ships an H200 table for (Mixtral E=8 N=14336,
# Qwen3 E=128 N=768/384/192, Qwen2 E=64 N=2560: the `vllm-shipped` baseline) and top-k 2, 4 and 8, which
# training meets in other models (Phi-3.5-MoE, Qwen1.5-MoE, OLMoE).
HELDOUT_MODELS = ("mixtral-8x7b", "qwen3-30b-a3b", "qwen2-57b-a14b", "gpt-oss-20b")


def model_shapes(model: str) -> list[dict]:
    """Every GEMM of every layer of `model` at every token count, as shape-list entries."""
    return [{"experts": e, "topk": topk, "hidden": hidden, "intermediate": inter, "tokens": m, "gemm": gemm,
             "seed": 0, "source": f"{model} {layer}"}
            for layer, e, topk, hidden, inter in MODELS[model] for m in VLLM_TOKENS for gemm in MOE_GEMMS]


def generate(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(train, heldout) shape lists, split by model; deterministic in `seed` (which orders them)."""
    rng = random.Random(seed)
    train = [s for model in MODELS if model not in HELDOUT_MODELS for s in model_shapes(model)]
    heldout = [s for model in HELDOUT_MODELS for s in model_shapes(model)]
    return interleave(train, rng), interleave(heldout, rng)


def write_lists(out: Path, seed: int = SEED) -> tuple[Path, Path]:
    return write_shape_lists(out, *generate(seed))


# The GEMM sweep's measured cost per config on the H200 (datasets/h200/gemm, 320 shapes): the issue's ~12 ms
# all in (compiles included), of which the reference check and the timing passes took 6.9 ms + 8.6 × the
# shape's best launch time (a least-squares fit; its best launches reached 0.43 ms, so longer MoE launches
# are an extrapolation).
SWEEP_MS_PER_CONFIG = 12.0
SWEEP_MS_PER_BEST_MS = 8.6
# Planning guesses for the best launch, not the cost model: this share of the profile's bf16 peak or DRAM bandwidth.
PLAN_COMPUTE_SHARE, PLAN_MEMORY_SHARE = 0.7, 0.8


def best_launch_ms(shape: MoeShape, profile: HardwareProfile) -> float:
    """A planning guess of the best config's launch in ms: max(2·rows·N·K / (share · the operands' tensor peak),
    bytes / (share · DRAM bandwidth)), bytes = the experts with rows' weights N·K and A at the operands' size, C at
    the output's (an FP8 shape: 1-byte operands at the FP8 peak, a bf16 C)."""
    elem = DTYPE_BYTES[shape.dtype]
    used = int((expert_rows(shape) > 0).sum())
    a_rows = shape.tokens if shape.gemm == "gate_up" else shape.rows
    moved = elem * (used * shape.n * shape.k + a_rows * shape.k) + DTYPE_BYTES[shape.out_dtype] * shape.rows * shape.n
    return 1e3 * max(shape.flops / (PLAN_COMPUTE_SHARE * profile.tensor_tflops(shape.dtype) * 1e12),
                     moved / (PLAN_MEMORY_SHARE * profile.dram_bw_gbps * 1e9))


def device_time_plan(shapes: list[MoeShape], profile: HardwareProfile, space: SearchSpace = MOE_SPACE) -> list[dict]:
    """Per shape: legal configs of `space` on `profile`, the best launch's guess (ms) and the sweep's estimated
    seconds, legal × (SWEEP_MS_PER_CONFIG + SWEEP_MS_PER_BEST_MS × best launch)."""
    rows = []
    for shape in shapes:
        legal = len(legal_configs(space, shape, profile))
        best = best_launch_ms(shape, profile)
        rows.append({"shape": shape, "legal": legal, "best_ms": best,
                     "sweep_s": legal * (SWEEP_MS_PER_CONFIG + SWEEP_MS_PER_BEST_MS * best) / 1e3})
    return rows


def plan_table(lists: dict[str, list[MoeShape]], profile: HardwareProfile, space: SearchSpace = MOE_SPACE,
               layer_of=lambda s: (s.experts, s.topk, s.hidden, s.intermediate),
               layer_header: str = "layer (E, topk, hidden, intermediate)") -> str:
    """A Markdown table of `device_time_plan` per list and layer (`layer_of(shape)`): shapes, legal configs,
    estimated minutes."""
    lines = [f"| list | {layer_header} | shapes | legal configs | est. minutes |", "|---|---|---:|---:|---:|"]
    total_s = 0.0
    for name, shapes in lists.items():
        by_layer: dict[tuple, list[dict]] = {}
        for row in device_time_plan(shapes, profile, space):
            by_layer.setdefault(layer_of(row["shape"]), []).append(row)
        for layer, rows in by_layer.items():
            seconds = sum(r["sweep_s"] for r in rows)
            total_s += seconds
            lines.append(f"| {name} | {', '.join(map(str, layer))} | {len(rows)} | {sum(r['legal'] for r in rows):,} | "
                         f"{seconds / 60:.1f} |")
    lines.append(f"| **all** | | **{sum(map(len, lists.values()))}** | | **{total_s / 60:.0f}** |")
    return "\n".join(lines)


def list_cli(argv: list[str] | None, description: str, out: Path, seed: int, generate_lists, plan) -> None:
    """The shape-list generators' command line: write the lists `generate_lists(seed)` -> (train, heldout) into
    --out, or with --plan print `plan(folder, profile)`, the device-time plan of the lists there."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=out)
    parser.add_argument("--seed", type=int, default=seed)
    parser.add_argument("--plan", action="store_true", help="print the device-time plan of the lists in --out")
    parser.add_argument("--gpu", default="h200", help="the profile the plan is for")
    args = parser.parse_args(argv)
    if args.plan:
        print(plan(args.out, load_profile(args.gpu)))
        return
    for path in write_shape_lists(args.out, *generate_lists(args.seed)):
        print(f"wrote {path} ({len(json.loads(path.read_text()))} shapes)")


def main(argv: list[str] | None = None) -> None:
    def plan(folder: Path, profile: HardwareProfile) -> str:
        return plan_table({name: load_moe_shapes(folder / f"shapes_{name}.json") for name in ("train", "heldout")},
                          profile)

    list_cli(argv, __doc__.splitlines()[0], Path("datasets/h200/moe"), SEED, generate, plan)


if __name__ == "__main__":
    main()
