"""Re-stamping a dataset with a new space version, after proving the new rules give each shape the
same legal configs (so the recorded sweep is still exhaustive for the new version).

    python -m rooftune.eval.migrate datasets/h200/gemm/train --gpu h200
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rooftune.candidates import GEMM_SPACE, SearchSpace, legal_configs
from rooftune.eval.dataset import (
    DatasetError, ShapeResult, read_manifest, read_shape, shape_files, write_manifest, write_shape,
)
from rooftune.hwprofiles import HardwareProfile, load_profile


def restamp_space_version(root: str | Path, profile: HardwareProfile, space: SearchSpace = GEMM_SPACE) -> int:
    """Check every shape's in-space rows against `space`'s legal set on `profile`; when all match,
    record `space.version` in the manifest and each shape file and return how many shapes changed.
    Raises DatasetError (and changes nothing) when any shape's legal set differs."""
    manifest = read_manifest(root)
    old = manifest.get("space_version")
    if old == space.version:
        return 0
    results: list[ShapeResult] = [read_shape(p) for p in shape_files(root)]
    for result in results:
        recorded = {r.config for r in result.rows if r.in_space}
        legal = set(legal_configs(space, result.shape, profile).configs)
        if recorded != legal:
            raise DatasetError(
                f"{root}: {result.shape} has {len(recorded)} recorded in-space configs but {len(legal)} legal "
                f"ones under {space.version} ({len(legal - recorded)} never timed); re-sweep it instead")
    for result in results:
        meta = {**result.meta, "space_version": space.version}
        write_shape(root, ShapeResult(result.shape, result.rows, result.baselines_us, meta))
    history = [*manifest.get("space_version_history", []), old]
    write_manifest(root, {**manifest, "space_version": space.version, "space_version_history": history})
    return len(results)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--gpu", default="h200", help="the profile the sweep judged legality with")
    args = parser.parse_args()
    profile = load_profile(args.gpu)
    for root in args.datasets:
        print(f"{root}: re-stamped {restamp_space_version(root, profile)} shapes as {GEMM_SPACE.version}")


if __name__ == "__main__":
    main()
