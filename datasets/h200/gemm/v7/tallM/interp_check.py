"""tallm.py's kernel in Triton's interpreter on the CPU: fp16 A [M, K] and B [N, K], odd M, N and K, against a
float32 reference, for one-, two- and three-part heights. C starts as NaN, so a part left unwritten fails.

usage (repository root): python3 datasets/h200/gemm/v7/tallM/interp_check.py
"""

import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported
sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

import tallm  # noqa: E402


def check(m, n, k, br, parts, bk=32):
    torch.manual_seed(0)
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(n, k, dtype=torch.float16)
    out = torch.full((m, n), float("nan"), dtype=torch.float16)
    cfg = dict(BLOCK_R=br, W1=parts[0], W2=parts[1], W3=parts[2], BLOCK_K=bk, GROUP=2, num_warps=4, num_stages=2)
    tallm.make_launcher(cfg, [(a, b)], out)(0)
    ref = a.float() @ b.float().t()
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    print(f"{m}x{n}x{k} rows {br} parts {parts}: relative error {err:.2e}")
    return err <= 1e-3


if __name__ == "__main__":
    cases = [(100, 70, 72, 32, (32, 16, 8)), (57, 40, 40, 16, (32, 0, 0)), (130, 33, 104, 32, (64, 16, 0)),
             (90, 48, 64, 16, (16, 8, 8))]
    ok = all([check(*c) for c in cases])
    print("all right" if ok else "FAILED")
    sys.exit(0 if ok else 1)
