"""The Gluon GEMM (kernels/gluon_gemm.py) against cuBLAS on the shapes where cuBLAS beats the Triton kernels.

    python3 scripts/device/gluon_bench.py --out $OUT [--max-seconds 540] [--layout nk] [--gpu h200]

One GPU call on an H200 under Triton 3.9 (scripts/device/README.md, "A newer Triton on the GPU machine").
Per shape (bf16, C = A @ B^T, B [N, K]): every config of a small grid that fits the profile's shared memory is
checked once by the reference check every candidate passes (kernels/harness/check.py `check_gemm`: fp64
reference, the dtype's tolerance), and the passing ones are timed beside
torch.matmul by the project's harness (kernels/harness/timing.py: CUDA graphs, interleaved shuffled
rounds, medians). A config that fails to compile, run or check is recorded with its error, not fatal.
A config whose check does not finish within HANG_S is recorded as a hang and the process exits 3 (the
CUDA context cannot be trusted after it); a rerun with the same --out skips it and the finished shapes.

Writes $OUT/gluon_bench.json (rewritten after each shape) and $OUT/gluon_bench.txt: per shape the best
Gluon config, its time, cuBLAS's, ratio = Gluon / cuBLAS (< 1: Gluon faster), and their geometric mean.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

from rooftune.candidates.gemm_space import gemm_regs_per_thread
from rooftune.hwprofiles import load_profile
from rooftune.outputs import write_atomic

SHAPES = [(m, n, k) for m in (128, 256, 384, 512, 768) for n, k in ((4096, 4096), (6144, 4096), (1280, 8192))]
SHAPES += [(5158, 1280, 8192), (8192, 1280, 8192)]
GRID = dict(BLOCK_M=(64, 128), BLOCK_N=(128, 256), BLOCK_K=(64,), num_stages=(3, 4), CLUSTER_M=(1, 2),
            num_warps=(4, 8))
HANG_S = 20.0


def config_grid(profile) -> list[dict]:
    """The grid's configs that fit `profile`: the bf16 ring (and a barrier's kilobyte) in shared memory per block,
    the accumulator and the GEMM space's register overhead (`gemm_regs_per_thread`) under the per-thread limit."""
    out = []
    for values in itertools.product(*GRID.values()):
        c = dict(zip(GRID, values))
        ring = c["num_stages"] * (c["BLOCK_M"] + c["BLOCK_N"]) * c["BLOCK_K"] * 2
        if (ring + 1024 <= profile.smem_per_block_bytes
                and gemm_regs_per_thread(c) <= profile.regs_per_thread_max):
            out.append(c)
    return out


def name(c: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in c.items())


def write(path: Path, data: dict) -> None:
    write_atomic(path, json.dumps(data, indent=1) + "\n")


def wait_or_exit(done, data: dict, path: Path, shape_key: str, key: str) -> None:
    """Wait for the event `done`; past HANG_S record a hang and leave (a stuck cluster never returns)."""
    start = time.monotonic()
    while not done.query():
        if time.monotonic() - start > HANG_S:
            data["quarantine"].append(key)
            data["shapes"].setdefault(shape_key, {}).setdefault("configs", {})[key] = {"error": "hang"}
            write(path, data)
            print(f"{shape_key} {key}: no result after {HANG_S:.0f} s, quarantined; exiting", flush=True)
            os._exit(3)
        time.sleep(0.01)


def bench_shape(gg, shape, layout: str, configs: list[dict], data: dict, path: Path) -> dict:
    import torch

    from rooftune.candidates import GemmShape
    from rooftune.kernels.harness.check import check_gemm
    from rooftune.kernels.harness.context import error_text
    from rooftune.kernels.harness.timing import input_sets_needed, time_candidates

    m, n, k = shape
    shape_key = f"{m}x{n}x{k}"
    entry = data["shapes"].setdefault(shape_key, {"configs": {}})
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    sets = input_sets_needed((m * k + n * k) * 2, l2, max_total_bytes=4 << 30)
    gen = torch.Generator(device="cuda").manual_seed(0)
    inputs = [(torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16),
               torch.randn((n, k) if layout == "nk" else (k, n), generator=gen, device="cuda",
                           dtype=torch.bfloat16)) for _ in range(sets)]
    out = torch.empty((m, n), device="cuda", dtype=torch.bfloat16)

    launchers = {}
    for c in configs:
        key = name(c)
        if key in data["quarantine"]:
            entry["configs"][key] = {"error": "hang (quarantined)"}
            continue

        def run(a, b, c_out, c=c, key=key):  # the check's run, its end waited for with a hang limit
            gg.gluon_matmul(a, b, c, out=c_out, layout=layout)
            done = torch.cuda.Event()
            done.record()
            wait_or_exit(done, data, path, shape_key, key)

        try:
            reason = check_gemm(c, GemmShape(m, n, k, layout=layout), run=run)
        except Exception as exc:
            reason = error_text(exc)
        entry["configs"][key] = {"check": reason or "passed"}
        if reason:
            entry["configs"][key]["error"] = reason
            continue
        launchers[key] = (lambda c: lambda i: gg.gluon_matmul(*inputs[i % sets], c, out=out, layout=layout))(c)

    def cublas(i):
        a, b = inputs[i % sets]
        torch.matmul(a, b.T if layout == "nk" else b, out=out)

    timings = time_candidates({**launchers, "cublas": cublas}, baseline_keys=("cublas",))
    for key, t in timings.items():
        record = entry.setdefault("cublas", {}) if key == "cublas" else entry["configs"][key]
        record.update(median_us=t.median_us, rounds=t.rounds, spread=t.spread)
        if t.error:
            record["error"] = t.error
    timed = {key: entry["configs"][key]["median_us"] for key in launchers
             if entry["configs"][key].get("median_us") is not None}
    entry["cublas_us"] = entry["cublas"].get("median_us")
    if timed and entry["cublas_us"]:
        best = min(timed, key=timed.get)
        entry.update(best=best, best_us=timed[best], ratio=timed[best] / entry["cublas_us"])
    entry["done"] = True
    return entry


def table(data: dict) -> str:
    lines = [f"{'shape':>16}  {'gluon us':>9}  {'cublas us':>9}  {'ratio':>6}  best config (ratio = gluon / cublas)"]
    ratios = []
    for shape_key, e in data["shapes"].items():
        if e.get("ratio") is None:
            lines.append(f"{shape_key:>16}  {'-':>9}  {e.get('cublas_us') or 0:9.1f}  {'-':>6}  no passing config")
            continue
        ratios.append(e["ratio"])
        lines.append(f"{shape_key:>16}  {e['best_us']:9.1f}  {e['cublas_us']:9.1f}  {e['ratio']:6.3f}  {e['best']}")
    if ratios:
        lines.append(f"geometric mean of ratio over {len(ratios)} shapes: "
                     f"{math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--max-seconds", type=float, default=540.0)
    parser.add_argument("--layout", choices=("nk", "kn"), default="nk")
    parser.add_argument("--gpu", default="h200", help="the profile whose shared memory and registers bound the grid")
    args = parser.parse_args()
    start = time.monotonic()
    import torch
    import triton

    from rooftune.kernels import gluon_gemm as gg

    profile = load_profile(args.gpu)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "gluon_bench.json"
    data = json.loads(path.read_text()) if path.exists() else {"shapes": {}, "quarantine": []}
    data.update(triton=triton.__version__, torch=torch.__version__, device=torch.cuda.get_device_name(0),
                layout=args.layout, available=gg.available())
    if not gg.available():
        write(path, data)
        print(f"Triton {triton.__version__}: gluon_gemm is unavailable", flush=True)
        return 2
    configs = config_grid(profile)
    print(f"{len(configs)} configs x {len(SHAPES)} shapes, Triton {triton.__version__}", flush=True)
    for shape in SHAPES:
        shape_key = "x".join(map(str, shape))
        if data["shapes"].get(shape_key, {}).get("done"):
            continue
        if time.monotonic() - start > args.max_seconds:
            print("out of time; rerun with the same --out to resume", flush=True)
            break
        e = bench_shape(gg, shape, args.layout, configs, data, path)
        write(path, data)
        passed = sum("error" not in c for c in e["configs"].values())
        print(f"{shape_key}: {passed}/{len(e['configs'])} configs pass; best {e.get('best_us')} us "
              f"({e.get('best')}), cuBLAS {e.get('cublas_us')} us  [{time.monotonic() - start:.0f} s]", flush=True)
    text = table(data)
    (args.out / "gluon_bench.txt").write_text(text + "\n")
    print(text, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
