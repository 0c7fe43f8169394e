"""skf.py's stream-K in Triton's interpreter on the CPU, before its device call: relative error against a
float32 reference on odd shapes and program counts, SK_WAVE 0 and 1, each launched twice (the arrival counters
must be back at zero for the second launch to be right). The interpreter runs programs one after another, so
phases 1-2 and the fix-up (phase 3, by the first contributor or shared: FIX 0 and 1) go in two launches; C starts as NaN, so a tile left unwritten fails.

usage (repository root): python3 datasets/h200/gemm/v7/skfirst/interp_check.py
"""

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
import triton  # noqa: E402

import skf  # noqa: E402
from rooftune.kernels import gemm_v2  # noqa: E402

TOLERANCE = 1e-3  # fp16 inputs, fp32 accumulation, fp16 output


def check(m, n, k, bm, bn, bk, programs, sk_wave, fix) -> bool:
    torch.manual_seed(0)
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(n, k, dtype=torch.float16)
    out = torch.empty(m, n, dtype=torch.float16)
    a_desc, b_desc = gemm_v2._descriptors(a, b, "nk", (m, n, k), dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk))
    tiles = triton.cdiv(m, bm) * triton.cdiv(n, bn)
    ws = torch.empty((2 * programs, bm, bn), dtype=torch.float32)
    counts = torch.zeros(2 * tiles, dtype=torch.int32)
    ref = a.float() @ b.float().t()
    ok = True
    for launch in (1, 2):
        out.fill_(float("nan"))
        for phases in (3, 4):
            skf.skf_kernel[(programs,)](a_desc, b_desc, out, ws, counts, m, n, k, out.stride(0), out.stride(1), 8,
                                        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, B_NK=True, SK_WAVE=sk_wave,
                                        PHASES=phases, FIX=fix, CHUNK=16)
        err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
        reset = int(counts.abs().sum()) == 0
        ok &= err <= TOLERANCE and reset  # NaN fails the first
        print(f"{m}x{n}x{k} tile {bm}x{bn} programs {programs} SK_WAVE {sk_wave} FIX {fix} launch {launch}: relative error "
              f"{err:.2e}, counters {'reset' if reset else 'NOT reset'}")
    return ok


if __name__ == "__main__":
    cases = [(200, 160, 256, 64, 64, 32, 5, 0), (200, 160, 256, 64, 64, 32, 5, 1), (130, 72, 104, 64, 32, 32, 7, 0),
             (130, 72, 104, 64, 32, 32, 7, 1), (64, 64, 96, 64, 64, 32, 5, 0), (300, 100, 520, 64, 32, 32, 9, 0),
             (300, 100, 520, 64, 32, 32, 9, 1)]
    results = [check(*c, fix) for c in cases for fix in (0, 1)]
    print("all right" if all(results) else "FAILED")
    sys.exit(0 if all(results) else 1)
