"""The library route on the GPU: after `rooftune tune` timed cuBLAS (or SDPA) faster than its winner for a
shape, `rooftune.linear` (`rooftune.attention`) runs the library's op for that shape, and with
ROOFTUNE_KERNEL_ONLY=1 rooftune's kernel. Checks the outputs against torch's op and times the three side by
side (CUDA graphs of 20 calls, 5 interleaved rounds, medians; fresh inputs are not rotated: a functional
check, not a benchmark). Two training shapes where the library is faster in the sweep: 256x22016x4096 (nk)
and 3x40x3445x128 causal.

usage: ROOFTUNE_CACHE=FILE python3 datasets/h200/route_check.py   (after tuning both shapes into FILE)
"""

import os
import statistics

import torch
import torch.nn.functional as F

import rooftune
from rooftune.kernels.check import relative_error
from rooftune.tuner import ops


def graph_us(fn, calls=20, rounds=5):
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / calls)
    return statistics.median(times)


def compare(name, ours, library):
    out, ref = ours(), library()
    routed = torch.equal(out, ref)
    os.environ["ROOFTUNE_KERNEL_ONLY"] = "1"
    kernel_out = ours()
    kernel_err = relative_error(kernel_out.float(), ref.float())
    times = {"library": [], "rooftune (routed)": [], "rooftune kernel only": []}
    for _ in range(3):  # interleaved
        os.environ.pop("ROOFTUNE_KERNEL_ONLY")
        times["rooftune (routed)"].append(graph_us(ours))
        times["library"].append(graph_us(library))
        os.environ["ROOFTUNE_KERNEL_ONLY"] = "1"
        times["rooftune kernel only"].append(graph_us(ours))
    os.environ.pop("ROOFTUNE_KERNEL_ONLY")
    line = ", ".join(f"{k} {statistics.median(v):.2f} µs" for k, v in times.items())
    print(f"{name}: routed output equal to the library's: {routed}; kernel-only rel err {kernel_err:.2e}; {line}")
    return routed


def main():
    torch.manual_seed(0)
    x = torch.randn(256, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(22016, 4096, device="cuda", dtype=torch.bfloat16) / 64
    ok = compare("linear 256x22016x4096", lambda: rooftune.linear(x, w), lambda: torch.matmul(x, w.t()))
    q = torch.randn(3, 40, 3445, 128, device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(3, 40, 3445, 128, device="cuda", dtype=torch.bfloat16) for _ in range(2))
    ok &= compare("attention 3x40x3445x128 causal", lambda: rooftune.attention(q, k, v, causal=True),
                  lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True))
    print("routed:", ok, "memo:", len(ops._memo))


if __name__ == "__main__":
    main()
