"""The suite's split into training and held-out kernels: a seeded draw stratified by kind, committed as split.json
before any kernel of the suite was timed (`scripts/suite_split.py` draws and writes it)."""

from __future__ import annotations

import json
import random
from collections.abc import Mapping
from importlib import resources

SPLIT_FILE = "split.json"
HELDOUT_FRACTION = 1 / 3
SEED = 58  # the number


def draw_split(kinds: Mapping[str, str], seed: int = SEED, fraction: float = HELDOUT_FRACTION) -> dict[str, str]:
    """name -> 'train' or 'heldout': within each kind (memory-bound, matrix) the names sorted, shuffled by one
    random.Random(seed) (kinds in sorted order), and the first round(fraction · count) held out."""
    rng = random.Random(seed)
    split = {}
    for kind in sorted(set(kinds.values())):
        names = sorted(n for n, k in kinds.items() if k == kind)
        rng.shuffle(names)
        held = round(len(names) * fraction)
        split.update({n: "heldout" if i < held else "train" for i, n in enumerate(names)})
    return dict(sorted(split.items()))


def split_record(kinds: Mapping[str, str], seed: int = SEED, fraction: float = HELDOUT_FRACTION) -> dict:
    """What split.json holds: the draw, how it was made, and each kernel's kind."""
    return {"seed": seed, "heldout_fraction": round(fraction, 6),
            "command": f"python scripts/suite_split.py --seed {seed}",
            "rule": "per kind, names sorted then shuffled by random.Random(seed), kinds in sorted order; the first "
                    "round(fraction * count) held out",
            "kinds": dict(sorted(kinds.items())), "kernels": draw_split(kinds, seed, fraction)}


def suite_split() -> dict[str, str]:
    """The committed split: kernel name -> 'train' or 'heldout'."""
    text = resources.files("rooftune.kernels.suite").joinpath(SPLIT_FILE).read_text()
    return json.loads(text)["kernels"]
