"""Re-stamping a dataset with a new space version, after proving the new rules give each shape the
same legal configs (so the recorded sweep is still exhaustive for the new version); and carrying the
shapes a new space leaves unchanged into the new version's dataset, so that only the others are swept.

    python -m rooftune.eval.migrate datasets/h200/gemm/train --gpu h200
    python -m rooftune.eval.migrate --carry datasets/h200/gemm/v3/train datasets/h200/gemm/v4/train --gpu h200
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from rooftune.candidates import GEMM_SPACE, SearchSpace, legal_configs
from rooftune.eval.dataset import (
    DatasetError, ShapeResult, finished_ids, open_dataset, read_manifest, read_shape, shape_files, write_manifest,
    write_shape,
)
from rooftune.candidates import Config
from rooftune.eval.sweep import refresh_manifest
from rooftune.hwprofiles import HardwareProfile, load_profile


def restamp_space_version(root: str | Path, profile: HardwareProfile, space: SearchSpace = GEMM_SPACE,
                          drop_failed: bool = False) -> int:
    """Check every shape's in-space rows against `space`'s legal set on `profile`; when all match,
    record `space.version` in the manifest and each shape file and return how many shapes changed.
    `drop_failed`: a recorded config the new rules make illegal may stay behind as a row out of the space
    (`in_space` 0, kept as the record), if it failed when swept (a rule that now excludes what cannot run
    cannot change any shape's best). Raises DatasetError (and changes nothing) when any shape's legal set
    differs otherwise."""
    manifest = read_manifest(root)
    old = manifest.get("space_version")
    if old == space.version:
        return 0
    results: list[ShapeResult] = [read_shape(p) for p in shape_files(root)]
    kept = []
    for result in results:
        recorded = {r.config for r in result.rows if r.in_space}
        legal = set(legal_configs(space, result.shape, profile).configs)
        dropped = recorded - legal
        failed = {r.config for r in result.rows if r.error}
        if legal - recorded or (dropped and not (drop_failed and dropped <= failed)):
            why = (f"{len(legal - recorded)} never timed" if legal - recorded else
                   f"{len(dropped)} no longer legal, {len(dropped - failed)} of them ran"
                   + ("" if drop_failed else " (--drop-failed keeps the failed ones as rows out of the space)"))
            raise DatasetError(
                f"{root}: {result.shape} has {len(recorded)} recorded in-space configs but {len(legal)} legal "
                f"ones under {space.version} ({why}); re-sweep it instead")
        rows = tuple(dataclasses.replace(r, in_space=False) if r.config in dropped else r for r in result.rows)
        kept.append(ShapeResult(result.shape, rows, result.baselines_us, result.meta))
    for result in kept:
        meta = {**result.meta, "space_version": space.version}
        write_shape(root, ShapeResult(result.shape, result.rows, result.baselines_us, meta))
    history = [*manifest.get("space_version_history", []), old]
    write_manifest(root, {**manifest, "space_version": space.version, "space_version_history": history})
    return len(results)


# Parameters a later GEMM space added, at the value that runs what the earlier space's kernel ran:
# PERSISTENT 0 is one program per tile (space 3), FIXUP 0 sums split-K's partials in the reduction kernel
# (space 4; kernels/gemm.py).
ADDED_DEFAULTS = {"PERSISTENT": 0, "FIXUP": 0, "BLOCK_N2": 0}


def _with_params(config: Config, names: list[str], defaults: dict[str, int]) -> Config:
    """`config` with the parameters of `names` it lacks, at `defaults`, in the space's order."""
    values = {**defaults, **dict(config.params)}
    return Config(tuple((n, values[n]) for n in names if n in values), config.num_warps, config.num_stages)


def carry_unchanged(src: str | Path, dst: str | Path, profile: HardwareProfile, space: SearchSpace = GEMM_SPACE,
                    defaults: dict[str, int] | None = None, rerun: dict[str, int] | None = None) -> tuple[int, int]:
    """Copy into the dataset `dst` of `space` every shape of `src` (a dataset of an earlier version of the
    same kernel's space) whose recorded in-space configs, with the parameters `space` added at
    `defaults` (ADDED_DEFAULTS), are exactly the shape's legal set under `space` on `profile`: the
    recorded sweep is then exhaustive for the new version. Rows are kept as timed (baseline configs get
    the defaults too); each carried file's meta says `carried_from` (the old version). Shapes already in
    `dst` are left alone. `rerun` {param: value}: configs with any of these values run changed kernel code,
    so a shape whose legal set holds one is not carried either (its recorded times are of the old code).
    Returns (carried, not carried: the shapes to sweep)."""
    defaults = ADDED_DEFAULTS if defaults is None else defaults
    old = read_manifest(src)
    if old.get("kernel") != space.kernel:
        raise DatasetError(f"{src}: a {old.get('kernel')} dataset, not {space.kernel}")
    names = space.names
    identity = {"kernel": space.kernel, "space_version": space.version, "gpu_profile": old.get("gpu_profile"),
                "sms": old.get("sms")}
    manifest = {k: v for k, v in old.items() if k not in ("format", "shapes_done", "noise", "shape_devices")}
    open_dataset(dst, {**manifest, **identity, "carried_from": old.get("space_version")})
    have = finished_ids(dst)
    carried = left = 0
    for path in shape_files(src):
        if path.name[: -len(".csv.gz")] in have:
            continue
        result = read_shape(path)
        rows = tuple(dataclasses.replace(r, config=_with_params(r.config, names, defaults)) for r in result.rows)
        recorded = {r.config for r in rows if r.in_space}
        changed = any(c[p] == v for c in recorded for p, v in (rerun or {}).items() if p in c)
        if changed or recorded != set(legal_configs(space, result.shape, profile).configs):
            left += 1
            continue
        meta = {**result.meta, "space_version": space.version, "carried_from": result.meta.get("space_version")}
        write_shape(dst, ShapeResult(result.shape, rows, result.baselines_us, meta))
        carried += 1
    refresh_manifest(dst)
    return carried, left


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--gpu", default="h200", help="the profile the sweep judged legality with")
    parser.add_argument("--carry", action="store_true",
                        help="two datasets, SRC DST: carry SRC's shapes that the current space leaves unchanged into DST")
    parser.add_argument("--rerun", action="append", default=[], metavar="PARAM=VALUE",
                        help="with --carry: configs with this value run changed kernel code; shapes that have one are "
                             "swept again (repeatable)")
    parser.add_argument("--drop-failed", action="store_true",
                        help="re-stamping: configs the new rules exclude may stay as rows out of the space if they "
                             "failed when swept")
    args = parser.parse_args()
    profile = load_profile(args.gpu)
    rerun = {}
    for item in args.rerun:
        name, _, value = item.partition("=")
        if name not in GEMM_SPACE.names or not value.lstrip("-").isdigit():
            parser.error(f"--rerun {item!r}: want PARAM=INT with PARAM one of {', '.join(GEMM_SPACE.names)}")
        rerun[name] = int(value)
    if args.carry:
        if len(args.datasets) != 2:
            parser.error("--carry takes two datasets: SRC DST")
        carried, left = carry_unchanged(*args.datasets, profile, rerun=rerun)
        print(f"{args.datasets[1]}: carried {carried} shapes unchanged from {args.datasets[0]}; {left} to sweep "
              f"under {GEMM_SPACE.version}")
        return
    for root in args.datasets:
        print(f"{root}: re-stamped {restamp_space_version(root, profile, drop_failed=args.drop_failed)} shapes as "
              f"{GEMM_SPACE.version}")


if __name__ == "__main__":
    main()
