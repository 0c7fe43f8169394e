"""Before a sweep of the space spends device time (v2 to v5): the GEMM's bf16 results on a few shapes and
configs of the current space (both layouts, split-K summed in the GEMM kernel and, where M is 33 to 64,
both ways, partial tiles, M = 1, 64-row tiles over fewer rows, and where the space has them persistent
tiles), checked against the fp64 reference with a poisoned output (kernels/check.py). Exits 1 on any
failure. usage (on the GPU machine): python3 sanity.py"""

import sys
import time

from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.kernels.check import check_gemm

SHAPES = [GemmShape(1024, 4608, 3584, "nk"), GemmShape(3000, 3000, 3000, "nk"), GemmShape(17, 4096, 4104, "kn"),
          GemmShape(1, 4096, 4096, "nk"), GemmShape(2048, 1280, 8192, "kn"), GemmShape(100, 136, 72, "nk"),
          GemmShape(48, 1280, 8192, "nk")]


def main() -> int:
    profile = load_profile("h200")
    failures, checked, start = [], 0, time.monotonic()
    for shape in SHAPES:
        configs = legal_configs(GEMM_SPACE, shape, profile).configs
        picked = configs[:: max(1, len(configs) // 4)][:4] + [c for c in configs if c["SPLIT_K"] > 1][::40][:3]
        picked += [c for c in configs if c.kernel_params().get("PERSISTENT")][::50][:2]
        picked += [c for c in configs if c["BLOCK_M"] > shape.m][::40][:2]
        picked += [c for c in configs if c["SPLIT_K"] > 1 and not c.kernel_params().get("FIXUP")][::40][:2]
        for config in picked:
            reason = check_gemm(config, shape, shape.layout, "cuda", seed=1)
            checked += 1
            if reason:
                failures.append(f"{shape} {config}: {reason}")
    print(f"checked {checked} configs on {len(SHAPES)} shapes in {time.monotonic() - start:.0f} s; "
          f"{len(failures)} failed")
    for line in failures:
        print("  FAIL", line)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
