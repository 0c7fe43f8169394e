"""Which kernel cuBLAS runs for a shape on this GPU: torch.matmul (bf16, B as [N, K], as the lever scripts call it)
under torch.profiler, each kernel's name and mean time. cuBLAS's Hopper kernel names carry their tile and cluster
shapes (e.g. ..._128x256x64_cluster2x1x1_...), so this says whether it runs 2-CTA clusters, where TMA multicast
shares an operand's loads between the two SMs.

usage (repository root, on the GPU machine): python3 datasets/h200/gemm/v7/skfirst/cublas_kernels.py OUT SHAPE...
  (SHAPE: MxNxK; training, probe or family shapes only)
"""

import json
import sys
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile


def kernels_of(m, n, k, repeats=20):
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        torch.matmul(a, b.t(), out=out)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(repeats):
            torch.matmul(a, b.t(), out=out)
        torch.cuda.synchronize()
    found = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            name, us = e.name, e.device_time
            n_, t_ = found.get(name, (0, 0.0))
            found[name] = (n_ + 1, t_ + us)
    return [{"kernel": name, "launches": c, "mean_us": round(t / c, 2)} for name, (c, t) in found.items()]


if __name__ == "__main__":
    out_dir = Path(sys.argv[1])
    results = {}
    for text in sys.argv[2:]:
        m, n, k = map(int, text.split("x"))
        results[text] = kernels_of(m, n, k)
        for r in results[text]:
            print(f"{text:>18}  {r['mean_us']:8.2f} µs  x{r['launches']:<3} {r['kernel'][:200]}")
    (out_dir / "cublas_kernels.json").write_text(json.dumps(results, indent=1))
