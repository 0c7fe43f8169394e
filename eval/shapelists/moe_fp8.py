"""Seeded generator of the FP8 fused-MoE shape lists (train and held-out, split by model) and their device-time plan.

A shape is one GEMM (gate_up or down) of one FP8 MoE layer of a real model's published FP8 checkpoint at one of
vLLM's 18 token counts, with the checkpoint's scale layout: 'block' (128×128 weight blocks, DeepSeek's and Qwen3's
FP8 releases) or 'w8a8' (per-tensor scales, the FP8 checkpoints of Mixtral, Qwen2-MoE, DeepSeek-V2-Lite). The
layer's (experts, top-k, hidden, intermediate per tensor-parallel shard) come from the model's config.json;
a block layer needs its shard's intermediate to be whole 128-blocks (so Qwen3-235B at TP8, 1536/8 = 192, does
not run block-quantized, in vLLM either). Routing seed 0, as for bf16 (eval/shapelists/moe.py). The held-out
models are never fitted on; the generator's seed only orders each list so that models take turns.

Run `python -m rooftune.eval.shapelists.moe_fp8 [--out DIR] [--plan]`; same seed, same files.
"""

from __future__ import annotations

import random
from pathlib import Path

from rooftune.candidates import MOE_FP8_SPACE
from rooftune.candidates.moe_space import VLLM_TOKENS
from rooftune.candidates.shapes import MOE_GEMMS, load_moe_fp8_shapes
from rooftune.eval.shapelists.gemm import interleave
from rooftune.eval.shapelists.moe import list_cli, plan_table
from rooftune.hwprofiles import HardwareProfile

SEED = 20261204

# model -> (checkpoint whose config.json gives the sizes and scales, [(layer, experts, topk, hidden,
# intermediate per shard, quant)]); "tpN": one tensor-parallel shard of N, vLLM's N in a table's name.
MODELS: dict[str, tuple[str, list[tuple[str, int, int, int, int, str]]]] = {
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3 (weight_block_size [128, 128])",
                    [("tp8", 256, 8, 7168, 256, "block"), ("tp4", 256, 8, 7168, 512, "block")]),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B-FP8 (weight_block_size [128, 128])",
                        [("tp4", 128, 8, 4096, 384, "block"), ("tp2", 128, 8, 4096, 768, "block")]),
    "mixtral-8x7b": ("neuralmagic/Mixtral-8x7B-Instruct-v0.1-FP8 (per-tensor, static activation scales)",
                     [("tp1", 8, 2, 4096, 14336, "w8a8"), ("tp2", 8, 2, 4096, 7168, "w8a8")]),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B-FP8 (weight_block_size [128, 128])",
                      [("tp1", 128, 8, 2048, 768, "block"), ("tp2", 128, 8, 2048, 384, "block")]),
    "qwen3-coder-480b-a35b": ("Qwen/Qwen3-Coder-480B-A35B-Instruct-FP8 (weight_block_size [128, 128])",
                              [("tp4", 160, 8, 6144, 640, "block")]),
    "deepseek-v2-lite": ("neuralmagic/DeepSeek-Coder-V2-Lite-Instruct-FP8 (per-tensor; DeepSeek-V2-Lite's sizes)",
                         [("tp1", 64, 6, 2048, 1408, "w8a8")]),
    "qwen2-57b-a14b": ("Qwen/Qwen2-57B-A14B-Instruct in FP8 per tensor (vLLM ships E=64,N=2560 fp8_w8a8)",
                       [("tp1", 64, 8, 3584, 2560, "w8a8")]),
    "mixtral-8x22b": ("neuralmagic/Mixtral-8x22B-Instruct-v0.1-FP8 (per-tensor)",
                      [("tp4", 8, 2, 6144, 4096, "w8a8")]),
}
# Held out (the issue's: DeepSeek-V3 block TP8 and TP4, Qwen3-235B-A22B-FP8 block TP4, Mixtral-8x7B per tensor
# TP1; with Qwen3-235B TP2 and Mixtral TP2, 216 shapes). Each has a vLLM FP8 H200 table for some layer.
HELDOUT_MODELS = ("deepseek-v3", "qwen3-235b-a22b", "mixtral-8x7b")


def model_shapes(model: str) -> list[dict]:
    """Every GEMM of every layer of `model` at every token count, as shape-list entries."""
    _, layers = MODELS[model]
    return [{"experts": e, "topk": topk, "hidden": hidden, "intermediate": inter, "tokens": m, "gemm": gemm,
             "quant": quant, "seed": 0, "source": f"{model} {layer}"}
            for layer, e, topk, hidden, inter, quant in layers for m in VLLM_TOKENS for gemm in MOE_GEMMS]


def generate(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(train, heldout) shape lists, split by model; deterministic in `seed` (which orders them)."""
    rng = random.Random(seed)
    train = [s for model in MODELS if model not in HELDOUT_MODELS for s in model_shapes(model)]
    heldout = [s for model in HELDOUT_MODELS for s in model_shapes(model)]
    return interleave(train, rng), interleave(heldout, rng)


def plan(folder: Path, profile: HardwareProfile) -> str:
    """The device-time plan of the lists in `folder`, per layer and scale layout."""
    lists = {name: load_moe_fp8_shapes(folder / f"shapes_{name}.json") for name in ("train", "heldout")}
    return plan_table(lists, profile, MOE_FP8_SPACE, lambda s: (s.experts, s.topk, s.hidden, s.intermediate, s.quant),
                      "layer (E, topk, hidden, intermediate, quant)")


def main(argv: list[str] | None = None) -> None:
    list_cli(argv, __doc__.splitlines()[0], Path("datasets/h200/moe_fp8"), SEED, generate, plan)


if __name__ == "__main__":
    main()
