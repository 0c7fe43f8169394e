"""Seeded generator of the causal-attention shape lists (LLM prefill) the attention ground truth is swept over.

Two kinds of shapes, all causal bf16 (datasets/h200/attention/README.md says the same for readers):
- LLM families: (heads, kv_heads, head_dim) of real models' attention layers, some as a tensor-parallel
  shard would see them (heads / TP), with a prefill sequence length (64-16384: half powers of two,
  half arbitrary counts, log-uniform) and batch (log-uniform from 1 to 64, or to the largest batch
  under the work cap).
- Random shapes: heads log-uniform in 8-128 rounded to a multiple of the GQA ratio (1, 4 or 8),
  head_dim 64 or 128, batch and seq as above.
Only head_dim 64 and 128 and GQA ratios 1, 4 and 8 occur. Work per shape is capped: the causal
FLOPs 2·batch·heads·seq²·head_dim <= `MAX_CAUSAL_FLOPS` (≈ 4 ms for the best config on an H200;
the lists' mean is far lower, since most draws are short), so sweeping one shape's space takes
seconds; a sequence too long for the heads even at batch 1 is drawn again.
Held-out families appear only in the held-out list; the two lists are disjoint as (batch, heads,
kv_heads, seq, head_dim). Each list is ordered so that a prefix is a useful sample: categories
(families, random) take turns.

Run `python -m rooftune.eval.shapelists.attention [--out DIR]` to (re)write the lists; same seed, same files.
"""

from __future__ import annotations

import math
import random
from pathlib import Path

from rooftune.eval.shapelists.gemm import interleave, run_cli, write_shape_lists

SEED = 20261201
MAX_CAUSAL_FLOPS = 2**41  # ≈ 2.2e12: ≈ 4 ms at the ~550 TFLOP/s the best configs reach on an H200
TRAIN_LLM, TRAIN_RANDOM = 96, 24
HELDOUT_LLM, HELDOUT_RANDOM = 160, 40
GQA_RATIOS = (1, 4, 8)
HEAD_DIMS = (64, 128)
SEQ_RANGE, BATCH_RANGE, HEADS_RANGE = (64, 16384), (1, 64), (8, 128)

# family -> (heads, kv_heads, head_dim), from the models' published configs; "-tpN" = one shard of N.
FAMILIES: dict[str, tuple[int, int, int]] = {
    "llama2-7b": (32, 32, 128),
    "llama3-8b": (32, 8, 128),
    "llama3-70b": (64, 8, 128),
    "llama3-70b-tp4": (16, 2, 128),
    "mistral-7b": (32, 8, 128),
    "llama3.2-1b": (32, 8, 64),
    "gpt2": (12, 12, 64),
    "gpt2-medium": (16, 16, 64),
    "opt-13b": (40, 40, 128),
    "qwen2-72b-tp2": (32, 4, 128),
    "mixtral-8x7b-tp2": (16, 4, 128),
    # held out: only in the held-out list
    "gpt2-xl": (25, 25, 64),
    "mpt-30b": (56, 56, 128),
    "phi-3-medium": (40, 10, 128),
    "opt-66b": (72, 72, 128),
}
HELDOUT_FAMILIES = ("gpt2-xl", "mpt-30b", "phi-3-medium", "opt-66b")


def _key(s: dict) -> tuple[int, int, int, int, int]:
    return (s["batch"], s["heads"], s["kv_heads"], s["seq"], s["head_dim"])


def causal_flops(s: dict) -> int:
    """2·batch·heads·seq²·head_dim: QKᵀ and PV over the causal half."""
    return 2 * s["batch"] * s["heads"] * s["seq"] ** 2 * s["head_dim"]


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _seq(rng: random.Random) -> int:
    """A power of two or (as often) an arbitrary count, log-uniform in SEQ_RANGE."""
    if rng.random() < 0.5:
        return 2 ** rng.randint(int(math.log2(SEQ_RANGE[0])), int(math.log2(SEQ_RANGE[1])))
    return _log_uniform(rng, *SEQ_RANGE)


def _draw(rng: random.Random, heads: int, kv_heads: int, head_dim: int, source: str) -> dict:
    """A seq for these heads (drawn again while batch 1 is over MAX_CAUSAL_FLOPS), then a batch under it."""
    while True:
        s = {"batch": 1, "heads": heads, "kv_heads": kv_heads, "seq": _seq(rng), "head_dim": head_dim,
             "causal": True, "source": source}
        most = min(BATCH_RANGE[1], MAX_CAUSAL_FLOPS // causal_flops(s))
        if most >= 1:
            s["batch"] = _log_uniform(rng, BATCH_RANGE[0], most)
            return s


def random_shape(rng: random.Random) -> dict:
    ratio = rng.choice(GQA_RATIOS)
    heads = max(HEADS_RANGE[0], ratio * round(_log_uniform(rng, *HEADS_RANGE) / ratio))
    return _draw(rng, heads, heads // ratio, rng.choice(HEAD_DIMS), f"random gqa{ratio}")


def _pick(count: int, draw, used: set) -> list[dict]:
    chosen = []
    while len(chosen) < count:
        s = draw()
        if _key(s) not in used:
            used.add(_key(s))
            chosen.append(s)
    return chosen


def _family_draw(families: list[str], rng: random.Random):
    def draw() -> dict:
        family = rng.choice(families)
        return _draw(rng, *FAMILIES[family], f"{family} prefill")
    return draw


def generate(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(train, heldout) shape lists; disjoint; deterministic in `seed`."""
    rng = random.Random(seed)
    shared = [f for f in FAMILIES if f not in HELDOUT_FAMILIES]
    used: set = set()
    train = (_pick(TRAIN_LLM, _family_draw(shared, rng), used)
             + _pick(TRAIN_RANDOM, lambda: random_shape(rng), used))
    heldout = (_pick(HELDOUT_LLM // 2, _family_draw(shared, rng), used)
               + _pick(HELDOUT_LLM - HELDOUT_LLM // 2, _family_draw(list(HELDOUT_FAMILIES), rng), used)
               + _pick(HELDOUT_RANDOM, lambda: random_shape(rng), used))
    return interleave(train, rng), interleave(heldout, rng)


def write_lists(out: Path, seed: int = SEED) -> tuple[Path, Path]:
    return write_shape_lists(out, *generate(seed))


def main(argv: list[str] | None = None) -> None:
    run_cli(argv, __doc__.splitlines()[0], Path("datasets/h200/attention"), SEED, write_lists)


if __name__ == "__main__":
    main()
