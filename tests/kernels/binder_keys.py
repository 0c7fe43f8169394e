"""Triton's own binary selection for the GEMM's launches, on a machine without a GPU, printed as JSON.

Run as a script by test_alignment.py (outside the interpreter: TRITON_INTERPRET must be unset before
triton loads). Triton picks a compiled binary by the key its binder makes from the arguments
(`str(specialization) + str(options)`, triton/runtime/jit.py); this script builds that binder for sm_90
and records the key of every kernel call, replacing the kernels by recorders: once for `warmup` (what
the sweep's workers compile, with MockTensor stand-ins) and once for a launch on contiguous CPU tensors
(what the sweep runs). Argument: a JSON list of jobs {"shape": [m, n, k, layout, dtype], "config": str}.
Output per job: {"warmup": [key, ...], "launch": [key, ...], "group": repr(specialization_key)}.
"""

import json
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import torch  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import make_backend  # noqa: E402
from triton.runtime.jit import MockTensor, create_function_from_signature  # noqa: E402


class _Recorder:
    """Stands in for one jitted kernel: records the binder key of each warmup and launch."""

    def __init__(self, kernel, backend, keys: dict):
        self.binder = create_function_from_signature(kernel.signature, kernel.params, backend)
        self.keys = keys

    def _record(self, kind, args, kwargs):
        _, specialization, options = self.binder(*args, **kwargs)
        self.keys[kind].append(str(specialization) + str(sorted(options.items())))

    def warmup(self, *args, grid, **kwargs):
        self._record("warmup", [MockTensor.wrap_dtype(a) for a in args], kwargs)

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self._record("launch", args, kwargs)


def main(jobs: list[dict]) -> list[dict]:
    from rooftune.candidates import GemmShape, parse_config
    from rooftune.kernels import gemm

    backend = make_backend(GPUTarget("cuda", 90, 32))
    kernels = {"_gemm_kernel": gemm._gemm_kernel, "_gemm_tma_kernel": gemm._gemm_tma_kernel,
               "_gemm_tma_persistent_kernel": gemm._gemm_tma_persistent_kernel,
               "_splitk_reduce_kernel": gemm._splitk_reduce_kernel}
    torch.cuda.device = lambda device: torch.cpu.StreamContext(None)  # warmup's device scope, without CUDA
    results = []
    for job in jobs:
        shape, config = GemmShape(*job["shape"]), parse_config(job["config"])
        keys = {"warmup": [], "launch": []}
        for name, kernel in kernels.items():
            setattr(gemm, name, _Recorder(kernel, backend, keys))
        gemm.warmup(shape, config, device="cpu")
        dtype = gemm.TORCH_DTYPES[shape.dtype]
        a = torch.empty(shape.m, shape.k, dtype=dtype)
        b = torch.empty(*((shape.k, shape.n) if shape.layout == "kn" else (shape.n, shape.k)), dtype=dtype)
        out = torch.empty(shape.m, shape.n, dtype=dtype)
        launch = gemm.make_launcher(config, shape.layout, [(a, b)], out)
        launch(0)
        for name, kernel in kernels.items():
            setattr(gemm, name, kernel)
        results.append({**keys, "group": repr(gemm.specialization_key(shape))})
    return results


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
