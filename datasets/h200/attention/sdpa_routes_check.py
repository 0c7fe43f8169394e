"""Why a sweep records no time for some SDPA backends: each backend, held one at a time as the sweep
holds it (kernels/benches.py `AttentionBench.extra_baselines`), run eagerly, captured in a CUDA graph,
replayed, then timed with the sweep's harness (kernels/timing.py), on a few shapes; every failure
printed with its message.

    python3 datasets/h200/attention/sdpa_routes_check.py        (on a GPU machine, from the repository)
"""

import sys

import torch

from rooftune.candidates import AttentionShape
from rooftune.kernels.benches import AttentionBench
from rooftune.kernels.timing import time_candidates

SHAPES = [AttentionShape(1, 32, 8192, 128, kv_heads=8), AttentionShape(14, 12, 64, 64),
          AttentionShape(10, 32, 3501, 128), AttentionShape(1, 16, 486, 128, kv_heads=4)]


def step(name, fn) -> bool:
    try:
        fn()
        torch.cuda.synchronize()
        return True
    except Exception as exc:
        print(f"    {name}: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0][:200]}")
        return False


def main() -> int:
    if not torch.cuda.is_available():
        print("needs a CUDA GPU")
        return 2
    bench = AttentionBench()
    for shape in SHAPES:
        print(shape)
        inputs = [bench.inputs(shape, "cuda", 100 + i) for i in range(2)]
        out = bench.output(shape, "cuda")
        routes, absent = bench.extra_baselines(shape, inputs, out)
        routes = {"sdpa": bench.baseline(shape, inputs, out), **routes}
        for key, why in absent.items():
            print(f"  {key}: not built: {why}")
        for key, launch in routes.items():
            print(f"  {key}:")
            graph = torch.cuda.CUDAGraph()

            def capture():
                with torch.cuda.graph(graph):
                    launch(0)

            ok = step("eager", lambda: launch(0)) and step("capture", capture) and step("replay", graph.replay)
            print(f"    eager, capture, replay: {'ok' if ok else 'failed'}")
        timed = time_candidates(routes, rounds=3, baseline_keys=tuple(routes))
        for key, t in timed.items():
            print(f"  timed {key}: {t.median_us if t.median_us is None else round(t.median_us, 1)} µs "
                  f"{t.error or ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
