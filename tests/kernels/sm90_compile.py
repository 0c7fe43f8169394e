"""Compile the GEMM for sm_90 on a machine without a GPU and print what Triton decided, as JSON.

Run as a script (outside the interpreter: TRITON_INTERPRET must be unset before triton loads) by
test_alignment.py. Triton's frontend, its passes and its bundled ptxas need no GPU; only the target
and a stream come from the driver, so a stand-in answers those (rooftune.kernels.harness.offline.offline_target).
Argument: a JSON list of jobs {"shape": [m, n, k, layout, dtype], "config": "BLOCK_M=...,num_stages=...",
"no_align": bool}; `no_align` compiles with ALIGN_N = ALIGN_K = 1 (no hints: the kernel before the alignment constexprs).
"""

import json
import os
import re
import sys

os.environ.pop("TRITON_INTERPRET", None)

from rooftune.kernels.harness.offline import offline_target  # noqa: E402

CP_ASYNC = re.compile(r"cp\.async\.c[ag]\.shared\.global\S*\s+\[[^\]]+\],\s*\[[^\]]+\],\s*(0x[0-9a-f]+|\d+)")
GLOBAL_LD_ST = re.compile(r"\b((?:ld|st)\.global\S*)")


def normalized_ptx(ptx: str) -> str:
    """PTX without source locations and debug sections (they carry line numbers of gemm.py)."""
    lines = [line for line in ptx.splitlines() if not line.strip().startswith((".loc", ".file", "//"))]
    return re.sub(r"\.section\s+\.debug.*", "", "\n".join(lines), flags=re.S)


def main(jobs: list[dict]) -> list[dict]:
    from rooftune.candidates import GemmShape, parse_config
    from rooftune.kernels import gemm

    results = []
    real_alignments = gemm.alignments
    for job in jobs:
        gemm.alignments = (lambda *args: (1, 1)) if job.get("no_align") else real_alignments
        with offline_target(arch=90):
            kernel = gemm.compile_kernels(GemmShape(*job["shape"]), parse_config(job["config"]))[0]
        ptx = kernel.asm["ptx"]
        results.append({"shared": kernel.metadata.shared,
                        "cp_async_bytes": sorted({int(b, 0) for b in CP_ASYNC.findall(ptx)}),
                        "global_ld_st": sorted(set(GLOBAL_LD_ST.findall(ptx))),
                        "ptx": normalized_ptx(ptx)})
    return results


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
