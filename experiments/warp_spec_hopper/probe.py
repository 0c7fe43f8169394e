"""Hopper warp specialization for the GEMM family (issue 39, item 6): does `tl.range(..., warp_specialize=True)` on a
TMA tensor-descriptor GEMM pay on the H100 / H200 where the untuned route goes to cuBLAS (mid M)?

    python3 experiments/warp_spec_hopper/probe.py --out $OUT/ws.json          # the machine's Triton
    bash scripts/device/under_release.sh 3.9 python3 experiments/warp_spec_hopper/probe.py --out $OUT/ws39.json

One kernel, bf16, C = A @ W.T (A row-major M x K, W row-major N x K: `F.linear`'s layout), persistent (a program an
SM), operands read through tensor descriptors made on the device (TMA), the tile loop warp-specialized or not
(`tl.range(..., flatten=False, warp_specialize=WS)`). A build that fails is recorded with its error. Every config
that builds is checked against an fp32 reference before it is timed; cuBLAS (`torch.mm` into the same output) is timed
in the same interleaved CUDA-graph rounds (kernels/harness/timing.py, operands rotated through sets larger than L2).
Prints, per shape, cuBLAS's time, the best without and with warp specialization, and each config's with ÷ without.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from rooftune.kernels.harness.timing import input_sets_needed, time_candidates

SHAPES = ((777, 3584, 4096), (6000, 1000, 1000), (333, 3584, 14336), (2048, 4096, 4096))


@triton.jit
def _persistent(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr, WS: tl.constexpr):
    # Descriptors made on the device: with host-side ones the sm_90 warp-specialization pass fails (it splits the
    # A tile between two consumer warp groups, and a host descriptor's block cannot follow).
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    in_group = GROUP_M * num_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    # flatten=False: with the loops flattened (as on Blackwell) the sm_90 pass leaves the kernel as it was
    for tile in tl.range(tl.program_id(0), num_m * num_n, NUM_SMS, flatten=False, warp_specialize=WS):
        first_m = (tile // in_group) * GROUP_M
        size_m = min(num_m - first_m, GROUP_M)
        pid_m = first_m + (tile % size_m)
        pid_n = (tile % in_group) // size_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([pid_n * BLOCK_N, ki * BLOCK_K])
            acc = tl.dot(a, b.T, acc)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


def configs():
    """(BLOCK_N, stages, warps, warp-specialized): 128-row persistent tiles of BLOCK_K 64, the family's usual mid-M
    winners. Warp specialization only with 4 warps: with 8 the sm_90 pass leaves the kernel unchanged (the same
    PTX, checked on the CPU: compile_check.py); with 4 it adds a producer warp group to two consumer ones (12 warps)."""
    return [(bn, st, wp, ws) for bn in (128, 256) for st in (3, 4) for wp in (4, 8) for ws in (False, True)
            if not (ws and wp == 8)]


def launcher(block_n, stages, warps, ws, sets, sms):
    m, k = sets[0][0].shape
    n = sets[0][1].shape[0]
    grid = (min(sms, triton.cdiv(m, 128) * triton.cdiv(n, block_n)),)

    def launch(i):
        a, w, c = sets[i % len(sets)]
        _persistent[grid](a, w, c, m, n, k, 128, block_n, 64, 8, sms, ws, num_stages=stages, num_warps=warps)
    return launch


def probe_shape(m, n, k, sms, l2_bytes):
    per_set = 2 * (m * k + n * k + m * n)
    count = input_sets_needed(per_set, l2_bytes)
    gen = torch.Generator(device="cuda").manual_seed(0)
    sets = [(torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=gen),
             torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=gen) * k ** -0.5,
             torch.empty(m, n, device="cuda", dtype=torch.bfloat16)) for _ in range(count)]
    ref = F.linear(sets[0][0].float(), sets[0][1].float())
    launchers, rows = {}, {}
    for bn, st, wp, ws in configs():
        key = f"128x{bn}x64 s{st} w{wp}{' ws' if ws else ''}"
        launch = launcher(bn, st, wp, ws, sets, sms)
        started = time.perf_counter()
        try:
            sets[0][2].zero_()
            launch(0)
            torch.cuda.synchronize()
        except Exception as exc:  # a config the compiler or the GPU refuses is a finding, not the end of the probe
            rows[key] = {"build_s": round(time.perf_counter() - started, 2),
                         "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
            continue
        err = ((sets[0][2].float() - ref).abs().max() / ref.abs().max()).item()
        rows[key] = {"build_s": round(time.perf_counter() - started, 2), "rel_err": err}
        if err < 2e-2:
            launchers[key] = launch
        else:
            rows[key]["error"] = f"wrong result: max relative error {err:.3g}"
    launchers["cublas"] = lambda i: torch.mm(sets[i % count][0], sets[i % count][1].T, out=sets[i % count][2])
    timed = time_candidates(launchers, rounds=9, baseline_keys=("cublas",))
    for key, t in timed.items():
        rows.setdefault(key, {})["us"] = t.median_us
        if t.error:
            rows[key]["error"] = t.error
    return rows


def report(results):
    for shape, rows in results["shapes"].items():
        def best(ws):
            got = [(r["us"], k) for k, r in rows.items() if k != "cublas" and r.get("us") and k.endswith(" ws") == ws]
            return min(got) if got else (None, "-")
        plain, special = best(False), best(True)
        failed = sum(1 for k, r in rows.items() if r.get("error"))
        cublas = rows["cublas"]["us"]
        print(f"{shape}: cuBLAS {cublas:.1f} us; best without WS {plain[0]:.1f} ({plain[1]}); best with WS "
              f"{special[0] if special[0] is None else round(special[0], 1)} ({special[1]}); failed {failed}")
        for key, r in sorted(rows.items()):
            if key.endswith(" ws") and r.get("us") and rows.get(key[:-3], {}).get("us"):
                print(f"    {key[:-3]:24s} WS / plain {r['us'] / rows[key[:-3]]['us']:.3f}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--report", action="store_true", help="print the table of an existing --out and exit")
    args = ap.parse_args()
    if args.report:
        report(json.loads(args.out.read_text()))
        return
    props = torch.cuda.get_device_properties(0)
    # device-side descriptors take their scratch from this allocator
    triton.set_allocator(lambda size, alignment, stream: torch.empty(size, device="cuda", dtype=torch.int8))
    results = {"gpu": torch.cuda.get_device_name(0), "triton": triton.__version__, "torch": torch.__version__,
               "shapes": {}}
    for m, n, k in SHAPES:
        results["shapes"][f"{m}x{n}x{k}"] = probe_shape(m, n, k, props.multi_processor_count, props.L2_cache_size)
        args.out.write_text(json.dumps(results, indent=1))
    report(results)


if __name__ == "__main__":
    main()
