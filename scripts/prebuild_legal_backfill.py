"""Build on a CPU only the binaries `rooftune sweep gemm --backfill-legal` compiles over a GEMM dataset: per finished
shape of the lists that has no rows yet for the configs the profile makes legal, those configs and its final configs
(`eval/sweeping/backfill.py` `legal_backfill_plan`), as `python -m rooftune.kernels.harness.prebuild build` builds a sweep's.

    python scripts/prebuild_legal_backfill.py --shapes datasets/h200-sm66/gemm/shapes_heldout.json \\
        --data datasets/h200-sm66/gemm/heldout --gpu h200-sm66 --cache /tmp/bf [--tar .tcache/sm66_backfill.tar.gz]

Run it with the GPU machine's Python and Triton (a Triton cache's keys hold both); unpack the archive there with
`PREBUILT=` (scripts/device/sweep.sh) or `python -m rooftune.kernels.harness.prebuild unpack`.
"""

from __future__ import annotations

import argparse
import sys

from rooftune.candidates import GemmShape
from rooftune.candidates.shapes import ShapeListError, load_shapes
from rooftune.eval.sweeping.backfill import legal_backfill_plan
from rooftune.eval.datasets.format import DatasetError
from rooftune.hwprofiles import ProfileError, load_profile
from rooftune.kernels.harness.offline import arch_of
from rooftune.kernels.harness.prebuild import binary_jobs, build_and_pack


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", required=True, help="the GEMM shape lists the dataset was swept from")
    parser.add_argument("--data", required=True, help="the GEMM dataset folder the backfill will give rows to")
    parser.add_argument("--gpu", required=True, help="the corrected profile: a shipped name or a JSON path")
    parser.add_argument("--cache", required=True, help="the Triton cache dir to build into")
    parser.add_argument("--workers", type=int, help="compile processes (default: one per core)")
    parser.add_argument("--tar", help="then pack the cache into this .tar.gz")
    args = parser.parse_args(argv)
    try:
        shapes: list[GemmShape] = [s for path in args.shapes for s in load_shapes(path)]
        profile = load_profile(args.gpu)
        plan = legal_backfill_plan(args.data, profile, shapes)
    except (ShapeListError, ProfileError, DatasetError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    jobs = binary_jobs(list(plan), profile, configs=plan.__getitem__)
    print(f"{len(plan)} shapes to backfill -> {len(jobs)} binaries for sm_{arch_of(profile)} into {args.cache}",
          flush=True)
    summary = build_and_pack(jobs, args.cache, profile, workers=args.workers, tar=args.tar)
    return 1 if summary.failed else 0


if __name__ == "__main__":
    sys.exit(main())
