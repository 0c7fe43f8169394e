"""A seeded subset of a committed shape list, drawn before anything is timed on the device it is for.

A second device (an SM partition, another GPU, another Triton release) is scored on part of the full chip's lists:
the part is chosen by a seed alone, written and committed before its sweep starts, so nothing measured can steer it.
Either `--count N` shapes drawn from the whole list, or `--layers`: one fused-MoE layer (a `source`, e.g.
'qwen3-30b-a3b tp2') of each model (its source without the tensor-parallel part), every shape of it.

    python -m rooftune.eval.shapelists.subset datasets/h200/gemm/shapes_heldout.json --count 100 --seed 66 \
        --out datasets/h200-sm66/gemm/shapes_heldout.json
    python -m rooftune.eval.shapelists.subset datasets/h200/moe/shapes_heldout.json --layers --seed 43 \
        --out datasets/h200/releases/moe/shapes_heldout.json
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from rooftune.outputs import write_atomic


class SubsetError(ValueError):
    """A subset that cannot be drawn: an unreadable list, or more shapes asked for than it holds."""


def draw(shapes: list[dict], count: int, seed: int) -> list[dict]:
    """`count` shapes of `shapes` drawn without replacement by Python's Mersenne Twister seeded with `seed`,
    kept in the list's own order (so a subset's first shapes are the list's earliest of them)."""
    if not 0 < count <= len(shapes):
        raise SubsetError(f"cannot draw {count} of {len(shapes)} shapes")
    chosen = set(random.Random(seed).sample(range(len(shapes)), count))
    return [s for i, s in enumerate(shapes) if i in chosen]


def layer_model(source: str) -> str:
    """'qwen3-30b-a3b tp2' -> 'qwen3-30b-a3b': a layer's model (its `source` without the tensor-parallel part)."""
    words = source.split()
    return " ".join(words[:-1]) if len(words) > 1 and words[-1].startswith("tp") else source


def draw_layers(shapes: list[dict], seed: int) -> list[dict]:
    """Every shape of one layer (a `source`) of each model, the layer drawn among the model's by Python's Mersenne
    Twister seeded with `seed` (models in the order they first appear), kept in the list's own order."""
    if not shapes or any("source" not in s for s in shapes):
        raise SubsetError("--layers needs shapes that name their layer (a 'source' field, as fused-MoE lists do)")
    layers: dict[str, list[str]] = {}
    for s in shapes:
        named = layers.setdefault(layer_model(s["source"]), [])
        if s["source"] not in named:
            named.append(s["source"])
    rng = random.Random(seed)
    chosen = {rng.choice(named) for named in layers.values()}
    return [s for s in shapes if s["source"] in chosen]


def write_subset(source: Path, count: int | None, seed: int, out: Path) -> list[dict]:
    """`draw` (`count` shapes; None: `draw_layers`) from the JSON list at `source`, written to `out` one shape a
    line, each shape tagged with nothing new (a subset's shapes are byte for byte the source's, so shape ids and
    file names match the full chip's)."""
    try:
        shapes = json.loads(Path(source).read_text())
    except (OSError, ValueError) as exc:
        raise SubsetError(f"{source}: not a readable JSON shape list ({exc})") from None
    if not isinstance(shapes, list):
        raise SubsetError(f"{source}: not a JSON list")
    subset = draw(shapes, count, seed) if count is not None else draw_layers(shapes, seed)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, "[\n" + ",\n".join(json.dumps(s) for s in subset) + "\n]\n")
    return subset


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path, help="the full list (a committed shapes_*.json)")
    how = parser.add_mutually_exclusive_group(required=True)
    how.add_argument("--count", type=int, help="this many shapes of the whole list")
    how.add_argument("--layers", action="store_true", help="one fused-MoE layer of each model, all its shapes")
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    try:
        subset = write_subset(args.source, args.count, args.seed, args.out)
    except SubsetError as exc:
        raise SystemExit(f"error: {exc}") from None
    print(f"wrote {args.out} ({len(subset)} of the source's shapes, seed {args.seed})")


if __name__ == "__main__":
    main()
