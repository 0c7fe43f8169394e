"""One device call: the GEMM's v2 variants (TMA x data-parallel / persistent / stream-K) beside today's kernel and cuBLAS.

For each bf16 'nk' shape (B an nn.Linear weight) in SHAPES, in that order: every config of every family
legal for the shape (kernels/gemm_v2.py `v2_legal`) is compiled (in parallel, once per binary, up
front), checked against the fp64 reference with a poisoned output (kernels/check.py), and timed with
the sweep's harness (kernels/timing.py: interleaved CUDA-graph replays over rotating input sets, median
of shuffled rounds) beside torch.matmul (cuBLAS). Families: "v1" is kernels/gemm.py with its best-known
configs; "ptr/dp", "ptr/persistent", "ptr/stream-k", "tma/dp", "tma/persistent", "tma/stream-k" are
kernels/gemm_v2.py. A config that fails to compile, to run or the check is recorded with its error.
Shapes are skipped, and said so, once SECONDS would be exceeded. Writes OUT_DIR/bench_v2.json after
each shape and prints a table last: per shape, cuBLAS µs, each family's best µs and cuBLAS / best.

usage (repository root, on the GPU machine): python3 datasets/h200/gemm/v2/bench_v2.py OUT_DIR SECONDS
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import torch

from rooftune.candidates import Config, GemmShape, parse_gemm_shape
from rooftune.hwprofiles import load_profile
from rooftune.kernels import gemm, gemm_v2
from rooftune.kernels.check import check_gemm
from rooftune.kernels.compile import CompilePool
from rooftune.kernels.context import ContextLost
from rooftune.kernels.timing import input_sets_needed, time_candidates

SHAPES = ["1024x4608x3584", "6000x5000x3000", "4096x4096x4096", "1024x7168x5120", "2048x1280x8192",
          "256x4672x4544", "512x3584x18944", "4096x14336x4096", "3000x3000x3000", "8192x8192x8192",
          "64x14336x4096", "16x4096x4096"]
# (BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, SPLIT_K, num_warps, num_stages): kernels/gemm.py's best on the
# H200 datasets (datasets/h200/gemm/*/shapes: 1024x4608x3584, 2048x1280x8192, 4096^3, 16x4096x4096, ...).
V1_CONFIGS = [(128, 256, 64, 8, 1, 8, 3), (128, 256, 64, 8, 1, 8, 4), (128, 128, 64, 8, 1, 4, 4),
              (128, 128, 64, 1, 1, 4, 5), (128, 128, 32, 8, 1, 4, 4), (64, 128, 64, 8, 1, 4, 3),
              (64, 64, 128, 1, 1, 4, 4), (16, 32, 256, 1, 1, 4, 5), (16, 64, 128, 1, 2, 4, 5)]
# Every v2 family gets these (SPLIT_K 1): large tiles for the compute-bound shapes, smaller ones for
# more resident CTAs, and small-M tiles, which stream-K turns into a split of K over idle SMs.
V2_TILES = [(128, 256, 64, 8, 8, 3), (128, 256, 64, 8, 8, 4), (256, 128, 64, 8, 8, 3), (256, 128, 64, 8, 8, 4),
            (128, 128, 64, 8, 4, 4), (128, 128, 64, 8, 4, 5), (128, 128, 64, 8, 8, 4), (128, 128, 128, 8, 8, 3),
            (64, 256, 64, 8, 4, 4), (64, 128, 64, 8, 4, 3), (64, 128, 128, 1, 4, 4), (16, 64, 256, 1, 4, 4),
            (16, 32, 256, 1, 4, 5)]
FAMILIES = {(tma, schedule): f"{'tma' if tma else 'ptr'}/{('dp', 'persistent', 'stream-k')[schedule]}"
            for tma in (0, 1) for schedule in sorted(gemm_v2.SCHEDULES)}


def v1_config(bm, bn, bk, group_m, split_k, warps, stages) -> Config:
    return Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, SPLIT_K=split_k)


def v2_config(tile, tma: int, schedule: int) -> Config:
    bm, bn, bk, group_m, warps, stages = tile
    return Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, SPLIT_K=1,
                       TMA=tma, SCHEDULE=schedule)


def candidates(shape: GemmShape, smem_limit_bytes: int) -> tuple[dict[str, tuple[str, Config]], dict[str, str]]:
    """({key: (family, config)} legal for `shape`, {key: why not} for the others)."""
    legal, illegal = {}, {}
    for c in map(lambda t: v1_config(*t), V1_CONFIGS):
        v2_view = {**c, "TMA": 0, "SCHEDULE": gemm_v2.DATA_PARALLEL}  # the same tiles and operand buffers
        reason = gemm_v2.v2_legal(shape.m, shape.n, shape.k, shape.layout, v2_view, smem_limit_bytes)
        (illegal.__setitem__(f"v1 {c}", reason) if reason else legal.__setitem__(f"v1 {c}", ("v1", c)))
    for (tma, schedule), family in FAMILIES.items():
        for c in (v2_config(t, tma, schedule) for t in V2_TILES):
            reason = gemm_v2.v2_legal(shape.m, shape.n, shape.k, shape.layout, c, smem_limit_bytes)
            (illegal.__setitem__(str(c), reason) if reason else legal.__setitem__(str(c), (family, c)))
    return legal, illegal


def compile_warmup(shape: GemmShape, config: Config, device: str) -> float:
    """The CompilePool's warmup: kernels/gemm.py for v1 configs (no SCHEDULE key), else kernels/gemm_v2.py."""
    return (gemm_v2 if "SCHEDULE" in config else gemm).warmup(shape, config, device)


def launcher(family: str, config: Config, shape: GemmShape, inputs: list, out: torch.Tensor):
    module = gemm if family == "v1" else gemm_v2
    return module.make_launcher(config, shape.layout, inputs, out)


def check(family: str, config: Config, shape: GemmShape) -> str | None:
    if family == "v1":
        return check_gemm(config, shape, shape.layout, "cuda", seed=1)
    return check_gemm(config, shape, shape.layout, "cuda", seed=1,
                      run=lambda a, b, out: gemm_v2.gemm_v2(a, b, config, shape.layout, out=out))


def measure_shape(shape: GemmShape, cands: dict, compiled: dict, l2_bytes: int) -> dict:
    """Check every compiled candidate, then time the ones that pass beside cuBLAS."""
    errors = {key: compiled[key] for key in cands if isinstance(compiled.get(key), str)}
    passed = {}
    for key, (family, config) in cands.items():
        if key not in errors:
            reason = check(family, config, shape)
            (errors.__setitem__(key, reason) if reason else passed.__setitem__(key, (family, config)))
    bytes_per_set = 2 * (shape.m * shape.k + shape.k * shape.n)
    n_sets = input_sets_needed(bytes_per_set, l2_bytes)
    inputs = [gemm.make_inputs(shape, "cuda", 100 + i) for i in range(n_sets)]
    out = torch.empty(shape.m, shape.n, dtype=torch.bfloat16, device="cuda")
    launchers = {}
    for key, (family, config) in passed.items():
        try:
            launchers[key] = launcher(family, config, shape, inputs, out)
        except Exception as exc:  # e.g. a descriptor the copy engine cannot take: a result, not the end
            errors[key] = f"launcher failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    weights = [(a, b.t()) for a, b in inputs]
    launchers["cublas"] = lambda i: torch.matmul(*weights[i % len(weights)], out=out)
    timed = time_candidates(launchers, rounds=7, target_ms=0.5, baseline_keys=["cublas"], seed=0)
    times = {k: t.median_us for k, t in timed.items() if t.median_us is not None}
    errors.update({k: t.error for k, t in timed.items() if t.error})
    return {"times_us": times, "errors": errors, "input_sets": n_sets,
            "families": {k: fam for k, (fam, _) in cands.items()}}


def best_by_family(result: dict) -> dict[str, tuple[str, float]]:
    """{family: (config key, µs)} of the fastest timed config of each family."""
    best: dict[str, tuple[str, float]] = {}
    for key, family in result["families"].items():
        t = result["times_us"].get(key)
        if t is not None and (family not in best or t < best[family][1]):
            best[family] = (key, t)
    return best


def print_table(results: list[dict]) -> None:
    families = ["v1", *FAMILIES.values()]
    print(f"\n{'shape':>16} {'cuBLAS':>8}" + "".join(f" {f:>18}" for f in families) + "   (µs, cuBLAS/best)")
    for r in results:
        cublas = r["times_us"].get("cublas", math.nan)
        best = best_by_family(r)
        cells = [f"{best[f][1]:8.1f} ({cublas / best[f][1]:5.3f})" if f in best else f"{'-':>16}" for f in families]
        print(f"{r['shape']:>16} {cublas:8.1f}" + "".join(f" {c:>18}" for c in cells))
    for r in results:
        winner = min(best_by_family(r).values(), key=lambda kt: kt[1], default=None)
        if winner:
            print(f"{r['shape']}: best {winner[0]} {winner[1]:.1f} µs")


def main(out_dir: Path, seconds: float) -> None:
    started = time.monotonic()
    deadline = started + seconds
    profile = load_profile("h200")
    smem_limit = torch.cuda.get_device_properties(0).shared_memory_per_block_optin
    shapes = [parse_gemm_shape(s, layout="nk", dtype="bf16") for s in SHAPES]
    cands = {shape: candidates(shape, smem_limit) for shape in shapes}
    # One compile per binary: shapes of one specialization key share them (M is not specialized).
    groups: dict[tuple, dict[str, tuple[GemmShape, Config]]] = {}
    for shape in shapes:
        for key, (_, config) in cands[shape][0].items():
            groups.setdefault(gemm.specialization_key(shape), {}).setdefault(key, (shape, config))
    compiled: dict[tuple, dict[str, float | str]] = {}
    with CompilePool(compile_warmup) as pool:
        for group, jobs in groups.items():  # a pool's results are keyed by config: one batch per group
            left_s = max(10.0, 0.4 * (deadline - time.monotonic()))
            done = pool.compile(list(jobs.values()), timeout_s=left_s)
            compiled[group] = {key: done.get(config, "not compiled") for key, (_, config) in jobs.items()}
    failed = sum(isinstance(v, str) for c in compiled.values() for v in c.values())
    print(f"compiled {sum(map(len, compiled.values()))} binaries in {time.monotonic() - started:.0f} s "
          f"({failed} failed)", flush=True)
    results, skipped, slowest_s = [], [], 0.0
    for shape in shapes:
        if time.monotonic() + slowest_s > deadline:
            skipped.append(f"{shape.m}x{shape.n}x{shape.k}")
            continue
        t0 = time.monotonic()
        legal, illegal = cands[shape]
        name = f"{shape.m}x{shape.n}x{shape.k}"
        try:
            result = measure_shape(shape, legal, compiled[gemm.specialization_key(shape)], profile.l2_bytes)
        except ContextLost as exc:  # no later launch in this process can run
            print(f"{name}: CUDA context lost ({exc}); stopping", flush=True)
            results.append({"shape": name, "times_us": {}, "errors": {"context": str(exc)}, "families": {}})
            skipped += [f"{s.m}x{s.n}x{s.k}" for s in shapes[shapes.index(shape) + 1:]]
            break
        result.update(shape=name, illegal=illegal, seconds=round(time.monotonic() - t0, 1))
        results.append(result)
        slowest_s = max(slowest_s, time.monotonic() - t0)
        print(f"{name}: {len(result['times_us'])} timed, {len(result['errors'])} errors, "
              f"{len(illegal)} illegal, {time.monotonic() - t0:.0f} s", flush=True)
        torch.cuda.empty_cache()
        write(out_dir, seconds, results, skipped, time.monotonic() - started)
    if skipped:
        print(f"out of time ({seconds:.0f} s): skipped {len(skipped)} shapes: {', '.join(skipped)}")
    write(out_dir, seconds, results, skipped, time.monotonic() - started)
    print_table(results)


def write(out_dir: Path, seconds: float, results: list[dict], skipped: list[str], elapsed_s: float) -> None:
    import triton

    (out_dir / "bench_v2.json").write_text(json.dumps(
        {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
         "seconds_budget": seconds, "elapsed_s": round(elapsed_s, 1), "skipped_out_of_time": skipped,
         "results": results}, indent=1))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    main(target, float(sys.argv[2]))
