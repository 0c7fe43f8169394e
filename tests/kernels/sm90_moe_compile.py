"""Compile the fused-MoE kernel for sm_90 on a machine without a GPU and print what Triton decided, as JSON.

Run as a script by test_moe_sm90.py (TRITON_INTERPRET must be unset before triton loads; see sm90_compile.py).
Argument: a JSON list of jobs {"shape": [experts, topk, hidden, intermediate, tokens, gemm], "config": "..."}.
"""

import json
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

from rooftune.kernels.harness.offline import offline_target  # noqa: E402


def main(jobs: list[dict]) -> list[dict]:
    from rooftune.candidates import MoeShape, parse_config
    from rooftune.kernels import moe

    results = []
    for job in jobs:
        with offline_target(arch=90):
            kernel = moe.compile_kernels(MoeShape(*job["shape"]), parse_config(job["config"]))[0]
        ptx = kernel.asm["ptx"]
        results.append({"shared": kernel.metadata.shared, "wgmma": "wgmma.mma_async" in ptx,
                        "mma_sync": "mma.sync" in ptx, "cp_async": "cp.async" in ptx})
    return results


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
