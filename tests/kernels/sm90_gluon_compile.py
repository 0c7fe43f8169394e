"""Compile the Gluon GEMM (kernels/gluon_gemm.py) for sm_90 on a machine without a GPU; print what came out, as JSON.

Run as a script by test_gluon_gemm.py (TRITON_INTERPRET must be unset before triton loads; see
sm90_compile.py). The module is loaded from this checkout's file, not through the installed package: an
editable install may map `rooftune.kernels` to another checkout. Argument: a JSON list of jobs
{"shape": [m, n, k], "config": {...}, "layout": "nk" | "kn"}.
"""

import importlib.util
import json
import os
import sys
from pathlib import Path

if __name__ == "__main__":  # as a script only: the test process imports load_gluon_gemm and keeps its interpreter
    os.environ.pop("TRITON_INTERPRET", None)

MODULE = Path(__file__).resolve().parents[2] / "kernels" / "gluon_gemm.py"


def load_gluon_gemm():
    """kernels/gluon_gemm.py of this checkout, registered as rooftune.kernels.gluon_gemm."""
    spec = importlib.util.spec_from_file_location("rooftune.kernels.gluon_gemm", MODULE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def main(jobs: list[dict]) -> list[dict]:
    from rooftune.kernels.harness.offline import offline_target  # triton loads here, after TRITON_INTERPRET is gone

    gluon_gemm = load_gluon_gemm()
    results = []
    for job in jobs:
        with offline_target(arch=90):
            kernel = gluon_gemm.compile_kernels(tuple(job["shape"]), job["config"], job.get("layout", "nk"))[0]
        ptx = kernel.asm["ptx"]
        results.append({"shared": kernel.metadata.shared, "num_ctas": kernel.metadata.num_ctas,
                        "multicast_loads": ptx.count(".multicast::cluster"),
                        "wgmma": ptx.count("wgmma.mma_async"), "cubin_bytes": len(kernel.asm["cubin"]),
                        "cluster_arrives": ptx.count("mbarrier.arrive.shared::cluster")})
    return results


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
