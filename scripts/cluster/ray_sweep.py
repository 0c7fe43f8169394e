"""A sweep over a Ray cluster: one task per GPU, each its shard of the shape list, all into one dataset folder
on a file system every node sees (flock must work there; docs/datasets.md, "Sweeping"). Running it again
resumes: shapes already in the folder are skipped. Then `rooftune eval` on the folder.

    ray start --head --port 6379                       # one node; on each other: ray start --address HEAD:6379
    python3 scripts/cluster/ray_sweep.py gemm datasets/h200/gemm/shapes_heldout.json /shared/sweep/heldout h200 \
        --shards 8 --address HEAD:6379

A shard whose Ray worker dies (its node lost, the worker killed) is run again by Ray up to `--retries` times,
resuming where the lost run stopped; after that the recipe names it and exits 1: run the recipe again.
Ray is not a dependency of rooftune: install it on every node (`pip install -e ".[cluster]"`).
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys

LOST = 1  # the exit code for a shard whose worker Ray lost more often than --retries, or whose sweep was killed


def shard_commands(kernel: str, shapes: str, out: str, gpu: str, shards: int, minutes: float) -> list[list[str]]:
    """One `rooftune sweep` command line per shard, in shard order."""
    return [["rooftune", "sweep", kernel, "--shapes", shapes, "--out", out, "--gpu", gpu,
             "--shard", f"{index}/{shards}", "--max-minutes", str(minutes)] for index in range(shards)]


def run_with_worker(command: list[str]) -> int:
    """`command`'s exit code, run so that it dies with this process (Linux: PR_SET_PDEATHSIG): a Ray worker
    killed mid-shard takes its sweep along, which would otherwise go on measuring beside the shard's rerun."""
    parent = os.getpid()
    try:
        import ctypes
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # resolved before the fork: the child only calls it
    except (OSError, AttributeError):  # not Linux: Ray's own clean-up of a dead worker's children is all
        return subprocess.run(command).returncode

    def die_with_parent():
        prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the worker died before the request took hold
            os._exit(LOST)

    return subprocess.run(command, preexec_fn=die_with_parent).returncode


def run_on_ray(commands: list[list[str]], address: str, retries: int) -> list[int | str]:
    """Each command as a Ray task holding one GPU on the cluster at `address`, rerun by Ray up to `retries`
    times when its worker dies: per command, its exit code, or why its task was lost."""
    import ray
    from ray.exceptions import RayError

    run = ray.remote(num_gpus=1, max_retries=retries)(run_with_worker)
    ray.init(address=address, ignore_reinit_error=True)
    tasks = [run.remote(command) for command in commands]
    results: list[int | str] = []
    for task in tasks:
        try:
            results.append(ray.get(task))
        except RayError as error:
            results.append(str(error).splitlines()[0])
    return results


def main(argv=None, runner=run_on_ray) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", choices=("gemm", "attention"))
    parser.add_argument("shapes")
    parser.add_argument("out")
    parser.add_argument("gpu")
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--minutes", type=float, default=110.0)
    parser.add_argument("--address", default=os.environ.get("RAY_ADDRESS", "auto"),
                        help="the cluster's head, HOST:6379 (default: RAY_ADDRESS, else the cluster on this node)")
    parser.add_argument("--retries", type=int, default=3,
                        help="times Ray reruns a shard whose worker died; each rerun resumes (default 3)")
    args = parser.parse_args(argv)
    commands = shard_commands(args.kernel, args.shapes, args.out, args.gpu, args.shards, args.minutes)
    try:
        results = runner(commands, args.address, args.retries)
    except ConnectionError as error:
        print(f"no Ray cluster at {args.address!r} ({error}): `ray start --head` first, or pass --address HOST:6379")
        return 2
    codes = []
    for index, result in enumerate(results):
        if isinstance(result, str):
            tries = f"{args.retries + 1} tries" if args.retries else "1 try"
            print(f"shard {index}/{args.shards} lost its Ray worker ({result}; {tries}): run again to resume it")
            codes.append(LOST)
        elif result < 0:  # the sweep itself killed (the OOM killer): what it finished is in the folder
            print(f"shard {index}/{args.shards} was killed by signal {-result}: run again to resume it")
            codes.append(LOST)
        elif result:
            print(f"shard {index}/{args.shards} exited {result} (3: a config killed the CUDA context; run again)")
            codes.append(result)
    return max(codes, default=0)


if __name__ == "__main__":
    sys.exit(main())
