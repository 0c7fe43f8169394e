"""Where skf.py's time goes: its phases timed apart (PHASES 1: the stream-K pieces, handed in four ways (KINDS);
2: the data-parallel tiles; 3: both without the fix-up; 7: all, with either fix-up, the only ones whose C is right
and so the only ones reference-checked), its
kernel as a plain data-parallel grid (one program a tile, no stream-K), and space 7's kernel on the same tile,
beside cuBLAS, in one interleaved pass a shape (kernels/timing.py). Compiles run first, in worker processes.

usage (repository root, on the GPU machine):
  python3 datasets/h200/gemm/v7/skfirst/diag.py OUT SHAPE...   (SHAPE: MxNxK-nk, training shapes)
"""

import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "v5" / "levers"))
import levers as lv  # noqa: E402

TILES = ((128, 256, 8, 3), (128, 128, 4, 5))
# p1: PHASES 1 with the partial pieces stored and counted (a), reduced to a sum (b), stored in fp32 (c) or bf16 (d)
# without a counter; p7: all, the fix-up by the first contributor (a) or shared (b)
KINDS = ("p1a", "p1b", "p1c", "p1d", "p2", "p3", "p7a", "p7b", "dp", "base")


def variants():
    return [(kind, dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, num_warps=w, num_stages=s))
            for bm, bn, w, s in TILES for kind in KINDS]


def key_of(v):
    c = v[1]
    return f"{v[0]} {c['BLOCK_M']}x{c['BLOCK_N']} w{c['num_warps']} s{c['num_stages']}"


def build(text, v, inputs, out):
    import triton
    import skf
    from rooftune.kernels import gemm
    kind, c = v
    m, n, k, layout = lv.parse(text)
    if kind == "base":
        return gemm.make_launcher(dict(c, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0), layout, inputs, out)
    if kind == "dp":
        tiles = triton.cdiv(m, c["BLOCK_M"]) * triton.cdiv(n, c["BLOCK_N"])
        return skf.make_launcher(c, inputs, out, 0, programs=tiles)[0]
    sub = "abcd".index(kind[2]) if len(kind) > 2 else 0
    if kind[1] == "1":
        return skf.make_launcher(c, inputs, out, 0, phases=1, piece=sub)[0]
    return skf.make_launcher(c, inputs, out, 0, phases=int(kind[1]), fix=sub)[0]


def compile_job(job):
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    text, v = job
    m, n, k, layout = lv.parse(text)
    try:
        inputs = [gemm.make_inputs(GemmShape(m, n, k, layout=layout, dtype="bf16"), "cuda", 1)]
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        build(text, v, inputs, out)(0)
        torch.cuda.synchronize()
        return None
    except Exception as e:
        return repr(e)[:300]


def time_shape(text):
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    from rooftune.kernels.check import TOLERANCE, relative_error
    from rooftune.kernels.timing import input_sets_needed, time_candidates
    m, n, k, layout = lv.parse(text)
    shape = GemmShape(m, n, k, layout=layout, dtype="bf16")
    inputs = [gemm.make_inputs(shape, "cuda", 100 + i) for i in range(input_sets_needed(2 * (m * k + k * n),
                                                                                         50 * 2 ** 20))]
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    ref = gemm.reference(*inputs[0], layout)
    launchers, errors = {}, {}
    for v in variants():
        launch = build(text, v, inputs, out)
        if v[0] in ("p7a", "p7b", "dp", "base"):
            out.fill_(float("nan"))
            launch(0)
            torch.cuda.synchronize()
            err = relative_error(out, ref)
            if not err <= TOLERANCE[torch.bfloat16]:
                errors[key_of(v)] = f"relative error {err:.3g}"
                continue
        launchers[key_of(v)] = launch
    weights = [(a, b.t()) for a, b in inputs]
    launchers["cublas"] = lambda i: torch.matmul(*weights[i % len(weights)], out=out)
    timed = time_candidates(launchers, rounds=9, target_ms=0.5, baseline_keys=["cublas"], mid_ratio=None,
                            prune_ratio=10.0, seed=0)
    return {"shape": text, "times_us": {key: t.median_us for key, t in timed.items() if t.median_us is not None},
            "errors": errors}


def main(out_dir, shapes):
    out_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.monotonic()
    jobs = [(s, v) for s in shapes for v in variants()]
    with ProcessPoolExecutor(min(14, len(os.sched_getaffinity(0))), mp_context=get_context("spawn")) as ex:
        res = list(ex.map(compile_job, jobs))
    print(f"compiled {len(jobs)} in {time.monotonic() - t0:.0f} s; failed: "
          f"{[(key_of(j[1]), r[:120]) for j, r in zip(jobs, res) if r]}", flush=True)
    results = []
    for s in shapes:
        results.append(time_shape(s))
        (out_dir / "diag.json").write_text(json.dumps(results, indent=1))
        r = results[-1]
        print(f"\n{s}  cuBLAS {r['times_us'].get('cublas', 0):.2f} µs  errors {r['errors']}")
        for key, us in sorted(r["times_us"].items()):
            print(f"  {key:<24} {us:8.2f}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2:])
