"""A sweep over a Ray cluster: one task per GPU, each its shard of the shape list, all into one dataset folder
on a file system every node sees (flock must work there; docs/datasets.md, "Sweeping"). Running it again
resumes: shapes already in the folder are skipped. Then `rooftune eval` on the folder.

    python3 scripts/cluster/ray_sweep.py gemm datasets/h200/gemm/shapes_heldout.json /shared/sweep/heldout h200 --shards 8

Ray is not a dependency of rooftune: install it where the cluster runs (`pip install ray`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys


def shard_commands(kernel: str, shapes: str, out: str, gpu: str, shards: int, minutes: float) -> list[list[str]]:
    """One `rooftune sweep` command line per shard, in shard order."""
    return [["rooftune", "sweep", kernel, "--shapes", shapes, "--out", out, "--gpu", gpu,
             "--shard", f"{index}/{shards}", "--max-minutes", str(minutes)] for index in range(shards)]


def run_on_ray(commands: list[list[str]]) -> list[int]:
    """Each command as a Ray task holding one GPU; their exit codes, in order."""
    import ray

    @ray.remote(num_gpus=1)
    def run(command: list[str]) -> int:
        return subprocess.run(command).returncode

    ray.init(address="auto", ignore_reinit_error=True)
    return ray.get([run.remote(command) for command in commands])


def main(argv=None, runner=run_on_ray) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", choices=("gemm", "attention"))
    parser.add_argument("shapes")
    parser.add_argument("out")
    parser.add_argument("gpu")
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--minutes", type=float, default=110.0)
    args = parser.parse_args(argv)
    codes = runner(shard_commands(args.kernel, args.shapes, args.out, args.gpu, args.shards, args.minutes))
    failed = [(index, code) for index, code in enumerate(codes) if code]
    for index, code in failed:
        print(f"shard {index}/{args.shards} exited {code} (3: a config killed the CUDA context; run again)")
    return max((code for _, code in failed), default=0)


if __name__ == "__main__":
    sys.exit(main())
