"""What gemm()'s kept workspaces and launch functions save a caller (`rooftune.matmul` runs `gemm`): per
call, a FIXUP config run eagerly four ways, interleaved over rounds: a launcher (everything made once),
gemm() as it is (the stream's kept workspace, the launch function made once per config and shape),
gemm() with a fresh workspace per call (one allocation and one counter fill a call), and gemm() as it
was before either (a fresh workspace and the launch function made per call). Each way runs CALLS calls
back to back between two CUDA events (host launch cost included, as a caller sees it); the median over
ROUNDS rounds, in µs per call. Every output is checked against the reduction kernel's bits first.
matmul_fill_first.json: the first run, when gemm() kept its FIXUP workspaces but still made its launch
function per call (its "gemm() cached workspace"); its "gemm() fresh workspace" is this run's "gemm() before".

usage, on the GPU machine (repository root): python3 datasets/h200/gemm/v5/matmul_fill.py [OUT.json]
"""

import json
import statistics
import sys

import torch

from rooftune.candidates import Config, GemmShape
from rooftune.kernels import gemm as gemm_module
from rooftune.kernels.gemm import gemm, make_inputs, make_launcher

CALLS, ROUNDS = 200, 7
CASES = [(GemmShape(24, 4800, 1600, "nk"), Config.make(4, 4, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, GROUP_M=1,
                                                          SPLIT_K=4, TMA=1, PERSISTENT=0, FIXUP=1)),
         (GemmShape(1, 4096, 4096, "nk"), Config.make(4, 4, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, GROUP_M=1,
                                                        SPLIT_K=4, TMA=1, PERSISTENT=0, FIXUP=1)),
         (GemmShape(8, 14336, 4096, "nk"), Config.make(4, 4, BLOCK_M=16, BLOCK_N=128, BLOCK_K=128, GROUP_M=1,
                                                         SPLIT_K=2, TMA=1, PERSISTENT=0, FIXUP=1))]


def as_before(call, launch_fn: bool) -> None:
    """`call()` with gemm() making a fresh workspace (allocation and counter fill) and, with `launch_fn`,
    its launch function, per call."""
    kept_ws, kept_fn = gemm_module._call_workspace, gemm_module._cached_launch_fn
    gemm_module._call_workspace = gemm_module._workspace
    if launch_fn:
        gemm_module._cached_launch_fn = lambda *args: gemm_module._launch_fn(*args)
    try:
        call()
    finally:
        gemm_module._call_workspace, gemm_module._cached_launch_fn = kept_ws, kept_fn


def per_call_us(fn) -> float:
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(CALLS):
        fn()
    stop.record()
    stop.synchronize()
    return start.elapsed_time(stop) * 1000.0 / CALLS


def main(out_path: str | None) -> None:
    rows = []
    for shape, config in CASES:
        a, b = make_inputs(shape, "cuda", 0)
        out = torch.empty(shape.m, shape.n, dtype=a.dtype, device="cuda")
        plain = Config.make(config.num_warps, config.num_stages, **{**config.kernel_params(), "FIXUP": 0})
        want = gemm(a, b, plain, shape.layout)
        launch = make_launcher(config, shape.layout, [(a, b)], out)
        ways = {"launcher": lambda: launch(0),
                "gemm()": lambda: gemm(a, b, config, shape.layout, out=out),
                "gemm() fresh workspace": lambda: as_before(lambda: gemm(a, b, config, shape.layout, out=out), False),
                "gemm() before": lambda: as_before(lambda: gemm(a, b, config, shape.layout, out=out), True)}
        for name, fn in ways.items():
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            assert torch.equal(out, want), (shape, name)
        times = {name: [] for name in ways}
        for _ in range(ROUNDS):
            for name, fn in ways.items():
                times[name].append(per_call_us(fn))
        row = {"shape": str(shape), "config": str(config), **{k: statistics.median(v) for k, v in times.items()}}
        rows.append(row)
        print(f"{shape}: " + ", ".join(f"{k} {v:.1f} µs" for k, v in row.items() if k not in ("shape", "config")),
              flush=True)
    if out_path:
        with open(out_path, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
