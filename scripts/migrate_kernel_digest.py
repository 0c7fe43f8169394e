"""Rewrite a tune cache's keys from each kernel source's digest at an earlier git revision to its digest now.

For a change to a kernel module that renames Python names only (what the kernels compile to is unchanged), so
that the tunes a committed cache holds stay found under the keys `rooftune` computes now (tuner/cache.py
`cache_key` names the kernel source by `kernel_digest`):

    python scripts/migrate_kernel_digest.py --since REV datasets/h200/models/tune.json

Prints each digest it replaced and how many keys changed; a key of another digest is left as it is.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
from pathlib import Path

from rooftune.candidates import KERNELS
from rooftune.outputs import file_lock, write_atomic
from rooftune.tuner.cache import CACHE_FORMAT, CacheFile, kernel_digest

REPO = Path(__file__).resolve().parents[1]
# The field of a tune cache key (tuner/cache.py cache_key) that names the kernel source.
DIGEST_FIELD = 3


def source_path(module: str) -> str:
    """The repository path of a kernel module: rooftune.kernels.gemm -> kernels/gemm.py."""
    return "/".join(module.split(".")[1:]) + ".py"


def digest_at(revision: str, module: str) -> str:
    """The digest `kernel_digest` gave `module`'s source at git `revision` (tuner/cache.py, rooftune/outputs.py
    `file_digest`: the first 16 hex digits of its SHA-256)."""
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{revision}:{source_path(module)}"],
                            capture_output=True, check=True).stdout
    return hashlib.sha256(source).hexdigest()[:16]


def migrated_entries(entries: dict, digests: dict[str, str]) -> tuple[dict, int]:
    """`entries` with each key's kernel digest replaced through `digests` (old -> new), in their order, and how
    many keys changed."""
    out, changed = {}, 0
    for key, entry in entries.items():
        fields = key.split("|")
        if len(fields) > DIGEST_FIELD and fields[DIGEST_FIELD] in digests:
            fields[DIGEST_FIELD] = digests[fields[DIGEST_FIELD]]
            changed += 1
        out["|".join(fields)] = entry
    return out, changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--since", required=True, help="the git revision whose kernel sources the keys name")
    parser.add_argument("cache", help="the tune cache file to rewrite in place")
    args = parser.parse_args(argv)
    modules = sorted({spec.module for spec in KERNELS.values()})
    digests = {digest_at(args.since, m): kernel_digest(m) for m in modules}
    digests = {old: new for old, new in digests.items() if old != new}
    for old, new in digests.items():
        print(f"{old} -> {new}")
    store = CacheFile(args.cache, CACHE_FORMAT, "tune")
    with file_lock(store.lock_path):  # as a store does: a tune stored meanwhile by another process is kept
        data = store.read()
        data["entries"], changed = migrated_entries(data["entries"], digests)
        write_atomic(args.cache, (json.dumps(data, indent=1) + "\n").encode())  # CacheFile's own form
    print(f"{args.cache}: {changed} of {len(data['entries'])} keys migrated")
    return 0


if __name__ == "__main__":
    sys.exit(main())
