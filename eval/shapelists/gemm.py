"""Seeded generator of the GEMM shape lists the ground-truth datasets are swept over.

Two kinds of shapes (datasets/h200/gemm/README.md says the same for readers of the data):
- LLM linear layers: y = x @ W.T with W an nn.Linear weight (layout 'nk'), or x @ W with W stored
  [K, N] (layout 'kn', GPT-2's Conv1D), for the layers of real model families; M is the token count:
  decode (1-64) or prefill (128 to 16K, grid values plus a few arbitrary counts).
- Random shapes: M, N, K log-uniform; N and K multiples of 16, except a minority that use one of
  `ODD_RESIDUES` so that dimensions that are not multiples of 16 are covered while the number of
  compile specialization groups (layout, N mod 16, K mod 16) stays small: each group costs one
  full pre-compile of the space.
Work per shape is capped (M·N·K <= `MAX_MNK`), so one sweep shape takes about 10 s on an H200.
Held-out families appear only in the held-out list; the two lists are disjoint as (m, n, k, layout).
Each list is ordered so that a prefix is a useful sample: categories (model families, random)
take turns, so a partial sweep still spans families and regimes.

Run `python -m rooftune.eval.shapelists.gemm [--out DIR]` to (re)write the lists; same seed, same files.
"""

from __future__ import annotations

import argparse
import json
import math
import random
from pathlib import Path

from rooftune.outputs import write_atomic

SEED = 20261130
MAX_MNK = 2**37  # ≈ 1.4e11: best config ≈ 0.35 ms at the H200's ~790 TFLOP/s bf16
TRAIN_LLM, TRAIN_RANDOM = 96, 24
HELDOUT_LLM, HELDOUT_RANDOM = 160, 40
ODD_FRACTION = 0.25  # of the random shapes
ODD_RESIDUES = ((8, 0), (1, 0), (0, 8))  # (N mod 16, K mod 16); the LLM odd cases are (8, 0), (1, 0)

DECODE_M = (1, 2, 4, 8, 16, 24, 32, 48, 64)
PREFILL_M = (128, 256, 512, 1024, 2048, 4096, 8192, 16384)

# family -> [(layer, N, K, layout)], from the models' published configs (hidden size, intermediate
# size, attention and KV heads × head dim; q, k, v fused as serving engines do, gate and up fused).
FAMILIES: dict[str, list[tuple[str, int, int, str]]] = {
    "llama2-7b": [("qkv", 12288, 4096, "nk"), ("o", 4096, 4096, "nk"), ("gate_up", 22016, 4096, "nk"),
                  ("down", 4096, 11008, "nk")],
    "llama3-8b": [("qkv", 6144, 4096, "nk"), ("gate_up", 28672, 4096, "nk"), ("down", 4096, 14336, "nk"),
                  ("lm_head", 128256, 4096, "nk")],
    "llama3-70b-tp8": [("qkv", 1280, 8192, "nk"), ("o", 8192, 1024, "nk"), ("gate_up", 7168, 8192, "nk"),
                       ("down", 8192, 3584, "nk")],
    "llama2-70b": [("qkv", 10240, 8192, "nk"), ("o", 8192, 8192, "nk"), ("gate_up", 57344, 8192, "nk"),
                   ("down", 8192, 28672, "nk")],
    "mixtral-8x7b": [("router", 8, 4096, "nk"), ("expert_w13", 28672, 4096, "nk"),
                     ("expert_w2", 4096, 14336, "nk")],
    "qwen2-7b": [("qkv", 4608, 3584, "nk"), ("o", 3584, 3584, "nk"), ("gate_up", 37888, 3584, "nk"),
                 ("down", 3584, 18944, "nk")],
    "qwen2.5-1.5b": [("qkv", 2048, 1536, "nk"), ("o", 1536, 1536, "nk"), ("gate_up", 17920, 1536, "nk"),
                     ("down", 1536, 8960, "nk")],
    "gpt2": [("c_attn", 2304, 768, "kn"), ("attn_proj", 768, 768, "kn"), ("c_fc", 3072, 768, "kn"),
             ("mlp_proj", 768, 3072, "kn"), ("lm_head", 50257, 768, "nk")],
    "gpt2-xl": [("c_attn", 4800, 1600, "kn"), ("c_fc", 6400, 1600, "kn"), ("mlp_proj", 1600, 6400, "kn")],
    "gpt-j-6b": [("q", 4096, 4096, "nk"), ("fc_in", 16384, 4096, "nk"), ("fc_out", 4096, 16384, "nk")],
    # held out: only in the held-out list
    "qwen2-14b": [("qkv", 7168, 5120, "nk"), ("o", 5120, 5120, "nk"), ("gate_up", 27648, 5120, "nk"),
                  ("down", 5120, 13824, "nk")],
    "phi-2": [("qkv", 7680, 2560, "nk"), ("fc1", 10240, 2560, "nk"), ("fc2", 2560, 10240, "nk")],
    "gemma-2b": [("qkv", 2560, 2048, "nk"), ("gate_up", 32768, 2048, "nk"), ("down", 2048, 16384, "nk")],
    "falcon-7b": [("qkv", 4672, 4544, "nk"), ("fc1", 18176, 4544, "nk"), ("fc2", 4544, 18176, "nk")],
}
HELDOUT_FAMILIES = ("qwen2-14b", "phi-2", "gemma-2b", "falcon-7b")


def _key(s: dict) -> tuple[int, int, int, str]:
    return (s["m"], s["n"], s["k"], s["layout"])


def llm_pool(families: list[str], rng: random.Random) -> list[dict]:
    """Every layer of `families` at every grid M plus two arbitrary prefill counts, within MAX_MNK."""
    pool = []
    for family in families:
        for layer, n, k, layout in FAMILIES[family]:
            extra = [rng.randint(65, 16383) for _ in range(2)]  # token counts are rarely powers of two
            for m in (*DECODE_M, *PREFILL_M, *extra):
                if m * n * k <= MAX_MNK:
                    regime = "decode" if m <= 64 else "prefill"
                    pool.append({"m": m, "n": n, "k": k, "layout": layout,
                                 "source": f"{family} {layer} {regime}"})
    return pool


def _log_uniform(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def random_shape(rng: random.Random, odd: bool) -> dict:
    """M in [1, 16384], N and K in [64, 16384] log-uniform; N, K multiples of 16, or one ODD_RESIDUES
    pattern when `odd`; layout 'nk' for three in four; redrawn until M·N·K <= MAX_MNK."""
    while True:
        m = _log_uniform(rng, 1, 16384)
        n, k = (16 * max(4, _log_uniform(rng, 64, 16384) // 16) for _ in range(2))
        if odd:
            dn, dk = rng.choice(ODD_RESIDUES)
            n, k = n + dn, k + dk
        layout = "nk" if odd or rng.random() < 0.75 else "kn"
        if m * n * k <= MAX_MNK:
            return {"m": m, "n": n, "k": k, "layout": layout, "source": "random" + (" odd" if odd else "")}


def interleave(shapes: list[dict], rng: random.Random) -> list[dict]:
    """Categories (family, or 'random') take turns, so any prefix spans them; shuffled inside."""
    by_cat: dict[str, list[dict]] = {}
    for s in shapes:
        by_cat.setdefault(s["source"].split()[0], []).append(s)
    queues = [by_cat[c] for c in sorted(by_cat)]
    for q in queues:
        rng.shuffle(q)
    rng.shuffle(queues)
    ordered = []
    while any(queues):
        for q in queues:
            if q:
                ordered.append(q.pop())
    return ordered


def _take(pool: list[dict], count: int, used: set, rng: random.Random) -> list[dict]:
    fresh = [s for s in pool if _key(s) not in used]
    rng.shuffle(fresh)
    chosen = []
    for s in fresh:
        if len(chosen) == count:
            break
        if _key(s) not in used:
            used.add(_key(s))
            chosen.append(s)
    return chosen


def _randoms(count: int, used: set, rng: random.Random) -> list[dict]:
    odd_count = round(ODD_FRACTION * count)
    chosen = []
    while len(chosen) < count:
        s = random_shape(rng, odd=len(chosen) < odd_count)
        if _key(s) not in used:
            used.add(_key(s))
            chosen.append(s)
    return chosen


def generate(seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(train, heldout) shape lists; disjoint; deterministic in `seed`."""
    rng = random.Random(seed)
    shared = [f for f in FAMILIES if f not in HELDOUT_FAMILIES]
    used: set = set()
    train = _take(llm_pool(shared, rng), TRAIN_LLM, used, rng) + _randoms(TRAIN_RANDOM, used, rng)
    held_pool = llm_pool(shared, rng) + llm_pool(list(HELDOUT_FAMILIES), rng)
    heldout = _take(held_pool, HELDOUT_LLM, used, rng) + _randoms(HELDOUT_RANDOM, used, rng)
    return interleave(train, rng), interleave(heldout, rng)


def write_shape_lists(out: Path, train: list[dict], heldout: list[dict]) -> tuple[Path, Path]:
    """shapes_train.json and shapes_heldout.json in `out`: a JSON list, one shape object a line."""
    out.mkdir(parents=True, exist_ok=True)
    paths = out / "shapes_train.json", out / "shapes_heldout.json"
    for path, shapes in zip(paths, (train, heldout)):
        write_atomic(path, "[\n" + ",\n".join(json.dumps(s) for s in shapes) + "\n]\n")
    return paths


def write_lists(out: Path, seed: int = SEED) -> tuple[Path, Path]:
    return write_shape_lists(out, *generate(seed))


def run_cli(argv: list[str] | None, description: str, default_out: Path, default_seed: int, write) -> None:
    """`--out DIR --seed N` -> write(out, seed), naming the files written (each generator's `main`)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--out", type=Path, default=default_out)
    parser.add_argument("--seed", type=int, default=default_seed)
    args = parser.parse_args(argv)
    for path in write(args.out, args.seed):
        print(f"wrote {path} ({len(json.loads(path.read_text()))} shapes)")


def main(argv: list[str] | None = None) -> None:
    run_cli(argv, __doc__.splitlines()[0], Path("datasets/h200/gemm"), SEED, write_lists)


if __name__ == "__main__":
    main()
