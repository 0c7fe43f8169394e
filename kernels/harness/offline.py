"""Compiling for a GPU that is not there: Triton's driver stood in for by a target architecture.

Triton's frontend, its passes and its bundled ptxas need no GPU; a compile asks the driver only for the
target, the current device and stream. `offline_target` answers those for the block it wraps, so a CPU
machine (kernels/harness/prebuild.py) or a compile worker with no CUDA context (kernels/harness/compile_pool.py)
builds the binary a launch on such a GPU looks up in Triton's cache.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver


class InterpreterActive(RuntimeError):
    """TRITON_INTERPRET is set: triton.jit gives interpreted kernels, which compile nothing."""


@dataclass(frozen=True)
class OfflineTarget:
    """Stands in for Triton's active driver in the calls a compile without a launch makes."""

    arch: int = 90
    warp_size: int = 32

    def get_current_target(self) -> GPUTarget:
        return GPUTarget("cuda", self.arch, self.warp_size)

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device=None) -> int:
        return 0


def arch_of(profile) -> int:
    """The profile's compute capability (a `HardwareProfile`'s) as Triton's integer architecture: (9, 0) -> 90."""
    major, minor = profile.compute_capability
    return 10 * int(major) + int(minor)


def interpreter_active() -> bool:
    return bool(triton.knobs.runtime.interpret)


@contextmanager
def offline_target(arch: int = 90, warp_size: int = 32) -> Iterator[OfflineTarget]:
    """Compile for `arch` inside the block; the driver active before it is restored afterwards."""
    if interpreter_active():
        raise InterpreterActive("TRITON_INTERPRET is set: unset it before triton is imported to compile "
                                "for a GPU (python -m rooftune.kernels.harness.prebuild does, in its workers)")
    with stand_in_target(arch, warp_size) as target:
        yield target


@contextmanager
def stand_in_target(arch: int = 90, warp_size: int = 32) -> Iterator[OfflineTarget]:
    """`offline_target` without its interpreter check: for what compiles a JITFunction or Triton IR directly
    (kernels/introspect/), which the interpreter's `triton.jit` does not touch."""
    # Read, not `driver.active`: that would create the default driver, which raises without a GPU.
    previous = driver._active
    target = OfflineTarget(arch, warp_size)
    driver.set_active(target)
    try:
        yield target
    finally:
        driver.set_active(previous)
