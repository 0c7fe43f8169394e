"""One device call: the attention kernel's configs (pointer loads and TMA) against each SDPA backend.

For each causal bf16 shape: every config is compiled (in parallel), checked against the fp64
reference with a poisoned output, and timed with the sweep's harness (kernels/timing.py: interleaved
CUDA-graph replays over rotating input sets, median of shuffled rounds) beside PyTorch SDPA forced
to each backend (cuDNN, FlashAttention, memory-efficient; `enable_gqa` where kv_heads < heads) and
SDPA's own choice. Writes $OUT/kernel_vs_sdpa.json and prints a table: the best config of each
family vs the fastest backend, and the geometric means per head_dim.

usage (repository root, on the GPU machine): python3 datasets/h200/attention/kernel_vs_sdpa.py OUT_DIR [SECONDS]
"""

from __future__ import annotations

import itertools
import json
import math
import sys
import time
from pathlib import Path

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention

from rooftune.candidates import AttentionShape, Config, parse_attention_shape
from rooftune.hwprofiles import load_profile
from rooftune.kernels import attention as attn
from rooftune.kernels.check import check_attention
from rooftune.kernels.compile import CompilePool
from rooftune.kernels.timing import input_sets_needed, time_candidates

SHAPES = ["4x64x4096x128", "1x32x8192x128x8", "8x32x2048x128x8", "2x64x4096x128x8", "16x32x1024x128",
          "1x40x3000x128", "4x32x4096x64", "2x16x8192x64x4", "16x12x1024x64", "1x8x16384x64"]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION,
            "efficient": SDPBackend.EFFICIENT_ATTENTION}


def configs() -> list[Config]:
    """TMA: BLOCK_M 64/128/256, BLOCK_N <= BLOCK_M, 16 query rows per warp at least, heavy-first orders;
    pointer loads: the previous space's usual winners, for the comparison."""
    out = []
    for bm, bn, warps, stages, order in itertools.product((64, 128, 256), (32, 64, 128), (4, 8), (2, 3, 4), (1, 3)):
        if bn <= bm and bm >= 16 * warps and not (bm == 256 and (warps == 4 or bn == 32 or stages == 4)):
            out.append(Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, ORDER=order, TMA=1))
    for bm, bn, warps, stages, order in [(64, 64, 4, 3, 1), (64, 64, 4, 3, 3), (64, 64, 4, 2, 1), (128, 64, 8, 3, 1),
                                         (128, 64, 8, 2, 3), (128, 128, 8, 2, 1), (64, 32, 4, 4, 1), (128, 32, 4, 3, 1)]:
        out.append(Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, ORDER=order, TMA=0))
    return out


def sdpa_launcher(backend, shape: AttentionShape, inputs: list, outs: list):
    gqa = shape.kv_heads != shape.heads

    def launch(i: int) -> None:
        ctx = sdpa_kernel([backend]) if backend is not None else _null()
        with ctx:
            outs[0] = scaled_dot_product_attention(*inputs[i % len(inputs)], is_causal=True, enable_gqa=gqa)
    return launch


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def sdpa_error(backend, shape: AttentionShape, qkv) -> str | None:
    """None when SDPA on `backend` runs this shape and agrees with the kernel's fp64 reference."""
    outs = [None]
    try:
        sdpa_launcher(backend, shape, [qkv], outs)(0)
        torch.cuda.synchronize()
    except Exception as exc:  # an unsupported backend is a result
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:160]}"
    ref = attn.reference(*qkv, causal=True)
    rel = ((outs[0].double() - ref.double()).norm() / ref.double().norm()).item()
    return None if rel < 1e-2 else f"rel err {rel:.3g}"


def main(out_dir: Path, seconds: float) -> None:
    started = time.monotonic()
    profile = load_profile("h200")
    shapes = [parse_attention_shape(s) for s in SHAPES]
    cands = configs()
    compile_s = {}
    with CompilePool(attn.warmup) as pool:
        for d in sorted({s.head_dim for s in shapes}):
            shape = next(s for s in shapes if s.head_dim == d)
            t0 = time.monotonic()
            compile_s[d] = {str(c): r for c, r in pool.compile([(shape, c) for c in cands], timeout_s=240).items()}
            print(f"compiled {len(cands)} configs for head_dim {d} in {time.monotonic() - t0:.0f} s", flush=True)
    results = []
    for shape in shapes:
        if time.monotonic() - started > seconds:
            print(f"out of time before {shape}")
            break
        t0 = time.monotonic()
        errors = {}
        ok = []
        for c in cands:
            res = compile_s[shape.head_dim][str(c)]
            err = res if isinstance(res, str) else check_attention(c, shape, "cuda", seed=1)
            (errors.__setitem__(str(c), err) if err else ok.append(c))
        qkv_check = attn.make_inputs(shape, "cuda", 2)
        sdpa_errors = {name: sdpa_error(b, shape, qkv_check) for name, b in BACKENDS.items()}
        del qkv_check
        bytes_per_set = 2 * shape.batch * shape.seq * shape.head_dim * (shape.heads * 2 + shape.kv_heads * 2)
        n_sets = input_sets_needed(bytes_per_set, profile.l2_bytes)
        inputs = [attn.make_inputs(shape, "cuda", 100 + i) for i in range(n_sets)]
        out = torch.empty_like(inputs[0][0])
        launchers = {str(c): attn.make_launcher(c, shape, inputs, out) for c in ok}
        holders = {}
        for name, b in [*BACKENDS.items(), ("default", None)]:
            if name == "default" or sdpa_errors[name] is None:
                holders[name] = [None]
                launchers["sdpa:" + name] = sdpa_launcher(b, shape, inputs, holders[name])
        timed = time_candidates(launchers, rounds=7, target_ms=1.0, seed=0,
                                baseline_keys=[k for k in launchers if k.startswith("sdpa:")])
        times = {k: t.median_us for k, t in timed.items() if t.median_us is not None}
        errors.update({k: t.error for k, t in timed.items() if t.error})
        results.append({"shape": str(shape), "times_us": times, "errors": errors, "sdpa_errors": sdpa_errors,
                        "input_sets": n_sets, "seconds": round(time.monotonic() - t0, 1)})
        del inputs, launchers, holders, out
        torch.cuda.empty_cache()
        print(f"{shape}: {len(times)} timed, {len(errors)} errors, {time.monotonic() - t0:.0f} s", flush=True)
        (out_dir / "kernel_vs_sdpa.json").write_text(json.dumps(
            {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "compile_s": compile_s,
             "results": results}, indent=1))
    print_table(results)


def best(times: dict, tma: int | None) -> tuple[str, float]:
    keys = [k for k in times if not k.startswith("sdpa:") and (tma is None or f"TMA={tma}" in k)]
    k = min(keys, key=times.get) if keys else None
    return k, (times[k] if k else math.nan)


def print_table(results: list) -> None:
    print(f"\n{'shape':>20} {'cudnn':>8} {'flash':>8} {'effic':>8} {'dflt':>8} {'ptr':>8} {'tma':>8} "
          f"{'tma/fastest':>11} {'ptr/fastest':>11}  best tma config")
    ratios = {}
    for r in results:
        t = r["times_us"]
        sd = {n: t.get("sdpa:" + n, math.nan) for n in ("cudnn", "flash", "efficient", "default")}
        fastest = min(v for v in sd.values() if v == v)
        k_tma, t_tma = best(t, 1)
        _, t_ptr = best(t, 0)
        d = r["shape"].split("x")[3]
        ratios.setdefault(d, []).append((fastest / t_tma, fastest / t_ptr))
        print(f"{r['shape']:>20} " + " ".join(f"{v:8.1f}" for v in sd.values())
              + f" {t_ptr:8.1f} {t_tma:8.1f} {fastest / t_tma:11.3f} {fastest / t_ptr:11.3f}  {k_tma}")
    allr = [x for v in ratios.values() for x in v]
    for d, v in [*sorted(ratios.items()), ("all", allr)]:
        g = [math.exp(sum(math.log(x[i]) for x in v) / len(v)) for i in (0, 1)]
        print(f"geomean head_dim {d}: tma {g[0]:.3f}  pointer {g[1]:.3f}  ({len(v)} shapes)")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    main(target, float(sys.argv[2]) if len(sys.argv) > 2 else 420)
