"""Would persistent tiles below 128x128 elements pay? On a few multi-wave H200 shapes (short K, where
persistence gains most, and some of the tuner's misses), times persistent configs with 64x64, 64x128
and 128x64 tiles beside the space-3 dataset's best config and best persistent config of the shape,
interleaved in one pass (kernels/timing.py), after each passed its reference check. Writes JSON per
shape as it goes and prints a table. usage (on the GPU machine): python3 small_persistent.py OUT SECONDS
"""

import json
import sys
import time
from pathlib import Path

import torch

from rooftune.candidates import Config, GemmShape
from rooftune.eval.dataset import read_shape
from rooftune.hwprofiles import load_profile
from rooftune.kernels.check import check_gemm
from rooftune.kernels.gemm import make_inputs, make_launcher
from rooftune.kernels.timing import input_sets_needed, time_candidates

DATA = Path("datasets/h200/gemm/v3/heldout/shapes")
SHAPES = ["4325x6385x144-nk-bf16", "1793x2929x96-nk-bf16", "8192x2304x768-kn-bf16", "11309x416x4784-nk-bf16",
          "1024x4608x3584-nk-bf16", "16384x1536x1536-nk-bf16"]
SMALL = [Config.make(w, s, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=1)
         for bm, bn in ((64, 64), (64, 128), (128, 64)) for bk, s in ((64, 3), (64, 4), (128, 3)) for w in (4,)]


def main(out: Path, seconds: float) -> None:
    end = time.monotonic() + seconds
    out.mkdir(parents=True, exist_ok=True)
    l2 = load_profile("h200").l2_bytes
    rows = []
    for sid in SHAPES:
        if time.monotonic() > end:
            break
        result = read_shape(DATA / f"{sid}.csv.gz")
        shape: GemmShape = result.shape
        ok = [r for r in result.rows if r.in_space and r.time_us is not None and not r.error]
        best = min(ok, key=lambda r: r.time_us)
        pers = [r for r in ok if r.config["PERSISTENT"] == 1]
        ref = {"space best": best.config, **({"space best persistent": min(pers, key=lambda r: r.time_us).config}
                                            if pers else {})}
        configs = {**ref, **{str(c): c for c in SMALL}}
        checked = {k: c for k, c in configs.items() if check_gemm(c, shape, shape.layout, "cuda", seed=1) is None}
        elem = 2
        sets = input_sets_needed((shape.m * shape.k + shape.k * shape.n) * elem, l2)
        inputs = [make_inputs(shape, "cuda", seed) for seed in range(sets)]
        c_out = torch.empty(shape.m, shape.n, dtype=inputs[0][0].dtype, device="cuda")
        timed = time_candidates({k: make_launcher(c, shape.layout, inputs, c_out) for k, c in checked.items()})
        us = {k: t.median_us for k, t in timed.items() if t.median_us is not None}
        small = {k: v for k, v in us.items() if k not in ref}
        row = {"shape": sid, "recorded_best_us": best.time_us, "timed_us": us,
               "failed_check": sorted(set(configs) - set(checked)),
               "best_small": min(small, key=small.get) if small else None}
        if small and "space best" in us:
            row["space_best_over_best_small"] = us["space best"] / min(small.values())
        rows.append(row)
        (out / "small_persistent.json").write_text(json.dumps(rows, indent=1))
        print(f"{sid}: space best {us.get('space best', float('nan')):.2f} us, best small persistent "
              f"{min(small.values()) if small else float('nan'):.2f} us ({row['best_small']}); "
              f"ratio {row.get('space_best_over_best_small', float('nan')):.3f}", flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), float(sys.argv[2]))
