"""Does summing split-K partials inside the GEMM kernel pay? (kernels/gemm.py FIXUP = 1: the split that
arrives last sums the fp32 partials and stores C, so no reduction kernel runs after the GEMM.)

On training shapes where split-K configs are legal (decode-sized M first), times in one interleaved pass
(kernels/timing.py) after each passed its reference check: the space-3 dataset's fastest config, its 12
fastest split-K configs as they are (FIXUP 0, `_splitk_reduce_kernel` after the GEMM) and the same 12
with FIXUP 1, and cuBLAS (torch.mm). Writes JSON per shape as it goes, prints one line a shape.

usage, on the GPU machine (repository root): python3 fixup_bench.py OUT SECONDS [SHARD COUNT]
first, to compile its binaries on the machine's cores: python3 fixup_bench.py --build TRITON_CACHE_DIR
the README's figures from the committed results (no GPU): python3 fixup_bench.py --summary datasets/h200/gemm/v3/fixup
"""

import json
import sys
import time
from pathlib import Path

from rooftune.eval.dataset import read_dataset
from rooftune.eval.reports import row_class, shape_rows

DATA = Path("datasets/h200/gemm/v3/train")
TOP_SPLIT = 12
MAX_DECODE, MAX_OTHER = 40, 16


def _config(params: dict):
    """The Config of a plan entry (a dict of the space's parameters, num_warps and num_stages)."""
    from rooftune.candidates import Config

    rest = {k: v for k, v in params.items() if k not in ("num_warps", "num_stages")}
    return Config.make(params["num_warps"], params["num_stages"], **rest)


def plan() -> list[tuple[object, dict]]:
    """(shape, {name: config}) for the training shapes with split-K configs: up to MAX_DECODE decode
    shapes and MAX_OTHER others, each the smallest M first."""
    rows = {r.shape: r for r in shape_rows(DATA)}
    out = []
    for rec in read_dataset(DATA):
        ok = sorted((t for t in rec.trials if t.ok and t.time_us), key=lambda t: t.time_us)
        split = [t.config for t in ok if t.config["SPLIT_K"] > 1][:TOP_SPLIT]
        if not split:
            continue
        configs = {"best": dict(ok[0].config)}
        for i, c in enumerate(split):
            configs[f"sk{i}"] = dict(c)
            configs[f"sk{i}+fixup"] = {**c, "FIXUP": 1}
        out.append((rec.shape, configs, row_class(rows[str(rec.shape)], "gemm")))
    out.sort(key=lambda x: (x[0].m, x[0].n * x[0].k))
    decode = [(s, c) for s, c, cls in out if cls == "decode"][:MAX_DECODE]
    return decode + [(s, c) for s, c, cls in out if cls != "decode"][:MAX_OTHER]


def main(out: Path, seconds: float, shard: int, count: int) -> None:
    import torch

    from rooftune.hwprofiles import load_profile
    from rooftune.kernels.check import check_gemm
    from rooftune.kernels.gemm import make_inputs, make_launcher
    from rooftune.kernels.timing import input_sets_needed, time_candidates

    end = time.monotonic() + seconds
    out.mkdir(parents=True, exist_ok=True)
    l2 = load_profile("h200").l2_bytes
    rows = []
    for shape, configs in plan()[shard::count]:
        if time.monotonic() > end:
            break
        checked = {}
        failed = {}
        for name, c in configs.items():
            err = check_gemm(c, shape, shape.layout, "cuda", seed=1)
            if err is None:
                checked[name] = c
            else:
                failed[name] = err
        sets = input_sets_needed((shape.m * shape.k + shape.k * shape.n) * 2, l2)
        inputs = [make_inputs(shape, "cuda", seed) for seed in range(sets)]
        c_out = torch.empty(shape.m, shape.n, dtype=inputs[0][0].dtype, device="cuda")
        launchers = {k: make_launcher(c, shape.layout, inputs, c_out) for k, c in checked.items()}
        operands = [(a, b.t() if shape.layout == "nk" else b) for a, b in inputs]
        launchers["cublas"] = lambda i: torch.mm(*operands[i % len(operands)], out=c_out)
        timed = time_candidates(launchers)
        us = {k: t.median_us for k, t in timed.items() if t.median_us is not None}
        plain = min((v for k, v in us.items() if k.startswith("sk") and "fixup" not in k), default=None)
        fix = min((v for k, v in us.items() if k.endswith("+fixup")), default=None)
        best_now = min(v for k, v in us.items() if k != "cublas" and "fixup" not in k)
        best_with = min(v for k, v in us.items() if k != "cublas")
        row = {"shape": str(shape), "m": shape.m, "n": shape.n, "k": shape.k, "layout": shape.layout,
               "configs": {k: str(_config(c)) for k, c in configs.items()},
               "timed_us": us, "failed_check": failed, "cublas_over_best_space3": us["cublas"] / best_now,
               "cublas_over_best_with_fixup": us["cublas"] / best_with,
               "best_split_plain_over_fixup": plain / fix if plain and fix else None}
        rows.append(row)
        (out / f"fixup_bench_{shard}.json").write_text(json.dumps(rows, indent=1))
        print(f"{shape}: cuBLAS/best {row['cublas_over_best_space3']:.3f} -> {row['cublas_over_best_with_fixup']:.3f}; "
              f"best split-K plain/fixup {row['best_split_plain_over_fixup'] or float('nan'):.3f}; "
              f"failed {len(failed)}", flush=True)


def build(cache: Path) -> None:
    """Compile every binary the bench launches for sm_90 into the Triton cache `cache`, on all cores."""
    from rooftune.kernels.gemm import specialization_key
    from rooftune.kernels.prebuild import BinaryJob, prebuild

    jobs = {}  # one per binary: SPLIT_K and GROUP_M are runtime integers, FIXUP a constexpr
    for shape, configs in plan():
        for c in configs.values():
            key = (specialization_key(shape), c["SPLIT_K"] > 1, *(c.get(p, 0) for p in (
                "BLOCK_M", "BLOCK_N", "BLOCK_K", "TMA", "PERSISTENT", "FIXUP", "num_warps", "num_stages")))
            jobs.setdefault(key, BinaryJob(shape, _config(c)))
    summary = prebuild(list(jobs.values()), cache)
    print(f"prebuild: {summary.compiled} of {summary.jobs} compiled in {summary.seconds:.0f} s; "
          f"failed {len(summary.failed)}")


def summary(folder: Path) -> None:
    """Per M class, over the shapes of `folder`'s fixup_bench_*.json: on how many the fastest FIXUP config
    beat the fastest reduction-kernel split (and by up to how much), and on how many it was the fastest
    config timed; and whether the fastest config split K at all."""
    rows = [r for f in sorted(folder.glob("fixup_bench_*.json")) for r in json.loads(f.read_text())]
    for name, sel in (("M <= 64", [r for r in rows if r["m"] <= 64]), ("M > 64", [r for r in rows if r["m"] > 64])):
        if not sel:
            continue
        ratios = [r["best_split_plain_over_fixup"] for r in sel]
        fastest = [min((k for k in r["timed_us"] if k != "cublas"), key=r["timed_us"].get) for r in sel]
        print(f"{name}: {len(sel)} shapes (M {min(r['m'] for r in sel)}-{max(r['m'] for r in sel)}); the fastest "
              f"FIXUP config beats the fastest reduction-kernel split on {sum(x > 1 for x in ratios)}, by up to "
              f"{max(ratios):.2f}x; the fastest config is a FIXUP one on {sum(k.endswith('+fixup') for k in fastest)}, "
              f"one without split-K on {sum('SPLIT_K=1,' in r['configs'][k] for k, r in zip(fastest, sel))}")


if __name__ == "__main__":
    if sys.argv[1] == "--build":
        build(Path(sys.argv[2]))
    elif sys.argv[1] == "--summary":
        summary(Path(sys.argv[2]))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), *(int(a) for a in sys.argv[3:5]))
