"""The registers and spills ptxas reports for a plain fp32 FMA-path matmul at every config of the AutoHeuristic logs
(sm_90a and sm_80); writes fma_regs.json beside this file. Run from the repository root (it reads ../shared)."""

import gzip
import json
import os
import re
import subprocess
import tempfile
from concurrent.futures import ProcessPoolExecutor

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0); pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM); rn = pid_n * BN + tl.arange(0, BN); rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak, mask=(k + rk)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn, mask=(k + rk)[:, None] < K, other=0.0)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc, mask=(rm[:, None] < M) & (rn[None, :] < N))

ptxas = os.path.join(os.path.dirname(triton.__file__), "backends/nvidia/bin/ptxas")
sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", **{n: "i32" for n in ["M","N","K","sam","sak","sbk","sbn","scm","scn"]}}

def ptxas_counts(compiled, cap: int) -> tuple[int, int]:
    """ptxas -v's registers and spill store bytes for a compiled kernel's PTX on compute capability `cap`."""
    with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
        f.write(compiled.asm["ptx"]); path = f.name
    arch = "sm_90a" if cap == 90 else f"sm_{cap}"
    out = subprocess.run([ptxas, "-v", "--gpu-name", arch, path, "-o", "/dev/null"], capture_output=True, text=True).stderr
    os.unlink(path)
    return int(re.search(r"Used (\d+) registers", out).group(1)), int(re.search(r"(\d+) bytes spill stores", out).group(1))


def one(args):
    cap, bm, bn, bk, w, st = args
    src = triton.compiler.ASTSource(fn=mm, signature=sig, constexprs={"BM": bm, "BN": bn, "BK": bk})
    k = triton.compile(src, target=GPUTarget("cuda", cap, 32), options={"num_warps": w, "num_stages": st})
    return [cap, bm, bn, bk, w, st, *ptxas_counts(k, cap)]


if __name__ == "__main__":
    choices = set()
    for line in gzip.open("../shared/datasets/autoheuristic/h100_mm.txt.gz", "rt"):
        m = re.search(r"BLOCK-M=(\d+)_BLOCK-K=(\d+)_BLOCK-N=(\d+)_numstages=(\d+)_numwarps=(\d+)", line)
        if m:
            bm, bk, bn, st, w = map(int, m.groups()); choices.add((bm, bn, bk, w, st))
    jobs = [(cap, *c) for cap in (90, 80) for c in sorted(choices)]
    print(len(jobs), "jobs", flush=True)
    with ProcessPoolExecutor(2) as ex:
        rows = list(ex.map(one, jobs))
    json.dump(rows, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fma_regs.json"), "w"))
    for r in rows: print(r)
