"""ptxas's registers and spill stores for a plain fp32 FMA-path matmul with A K-contiguous ('mk') and B either
N-contiguous ('kn') or K-contiguous ('nk'), the unit strides known to the compiler as Triton's JIT specializes
them, at the configs the AutoHeuristic logs rank high (sm_90a and sm_80). Prints one row a compile:
[cc, A, B, BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, registers, spill store bytes]. Under Triton 3.6, no GPU."""
from concurrent.futures import ProcessPoolExecutor

import triton
import triton.language as tl
from ptxas_registers import ptxas_counts  # beside this file
from triton.backends.compiler import GPUTarget


@triton.jit
def mm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
       BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    pid_m = tl.program_id(0); pid_n = tl.program_id(1)
    rm = pid_m * BM + tl.arange(0, BM); rn = pid_n * BN + tl.arange(0, BN); rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * sam + (k + rk)[None, :] * sak)
        b = tl.load(b_ptr + (k + rk)[:, None] * sbk + rn[None, :] * sbn)
        acc += tl.dot(a, b, input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc)

NAMES = ["M","N","K","sam","sak","sbk","sbn","scm","scn"]

def one(args):
    cap, alay, blay, bm, bn, bk, w, st = args
    ones = {"sak" if alay == "mk" else "sam", "sbn" if blay == "kn" else "sbk", "scn"}
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "c_ptr": "*fp32", **{n: ("constexpr" if n in ones else "i32") for n in NAMES}}
    constexprs = {"BM": bm, "BN": bn, "BK": bk, **{n: 1 for n in ones}}
    # pointers 16-byte aligned, other strides divisible by 16 (as Triton's JIT specializes them)
    attrs = {(i,): [["tt.divisibility", 16]] for i, n in enumerate(["a_ptr","b_ptr","c_ptr"] + NAMES) if n not in ones}
    src = triton.compiler.ASTSource(fn=mm, signature=sig, constexprs=constexprs, attrs=attrs)
    k = triton.compile(src, target=GPUTarget("cuda", cap, 32), options={"num_warps": w, "num_stages": st})
    return [cap, alay, blay, bm, bn, bk, w, st, *ptxas_counts(k, cap)]

if __name__ == "__main__":
    cfgs = [(128,128,32,4,3),(128,128,32,4,4),(128,64,32,2,2),(64,64,32,4,2),(64,128,32,4,3),(128,64,32,4,3),(128,128,64,8,3),(64,128,32,8,4)]
    jobs = [(cap, "mk", bl, *c) for cap in (90, 80) for bl in ("kn", "nk") for c in cfgs]
    with ProcessPoolExecutor(2) as ex:
        for r in ex.map(one, jobs): print(r, flush=True)
