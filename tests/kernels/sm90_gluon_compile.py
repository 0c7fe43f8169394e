"""Compile the Gluon GEMM (kernels/gluon_gemm.py) for sm_90 on a machine without a GPU; print what came out, as JSON.

Run as a script by test_gluon_gemm.py through compile_script.run_script, which leaves TRITON_INTERPRET out of its
environment (it must be unset before triton loads). Argument: a JSON list of jobs
{"shape": [m, n, k], "config": {...}, "layout": "nk" | "kn"}.
"""

import json
import sys

from rooftune.kernels import gluon_gemm
from rooftune.kernels.harness.offline import offline_target


def main(jobs: list[dict]) -> list[dict]:
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
