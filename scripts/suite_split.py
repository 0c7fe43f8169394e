"""Draw the suite's split into training and held-out kernels and write kernels/suite/split.json (issue 58).

    python scripts/suite_split.py --seed 58          # writes the file; --check: only compares with the committed one

Run once, before any kernel of the suite is timed; the draw is kernels/suite/split.py `draw_split`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from rooftune.kernels.suite import SUITE
from rooftune.kernels.suite.split import HELDOUT_FRACTION, SEED, split_record
from rooftune.outputs import json_text, write_atomic

SPLIT = Path(__file__).resolve().parents[1] / "kernels" / "suite" / "split.json"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--fraction", type=float, default=HELDOUT_FRACTION)
    parser.add_argument("--check", action="store_true", help="compare with the committed split.json, write nothing")
    args = parser.parse_args(argv)
    record = split_record({k.name: k.kind for k in SUITE.values()}, args.seed, args.fraction)
    if args.check:
        same = SPLIT.exists() and json.loads(SPLIT.read_text()) == record
        print("split.json is the draw" if same else "split.json differs from the draw")
        return 0 if same else 1
    write_atomic(SPLIT, json_text(record))
    held = sorted(n for n, part in record["kernels"].items() if part == "heldout")
    print(f"{SPLIT}: {len(record['kernels']) - len(held)} train, {len(held)} held out: {', '.join(held)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
