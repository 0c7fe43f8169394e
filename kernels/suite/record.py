"""The suite's record: one frozen `SuiteKernel` per kernel (its Triton function, config list, shapes, inputs, grid,
reference, eager baseline and hand-counted work), its launch, and the helpers its modules share.

A kernel's call is `fn[grid(args, meta)](**args, **config.all_kwargs())`, as `@triton.autotune` runs it: `args` are
the call's arguments by parameter name (tensors, ints, floats, and the meta-parameters a library derives from the
shape rather than tunes, such as BLOCK_N = next_power_of_2(N)), `meta` the config's tuned meta-parameters. torch is
reached through kernels/lazy.py, so the registry loads with Triton alone.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import triton

from rooftune.candidates.config import Config
from rooftune.kernels.lazy import torch

# Largest accepted ‖out − ref‖ / ‖ref‖ by output dtype (torch's name), against a float64 reference on the same
# inputs: kernels/harness/check.py's bounds for the float types (one rounding to the storage type, with margin);
# an FP8 output is compared with torch's rounding of the same fp32 values (only a rare element one e4m3 step
# away, where the GPU's division rounds the other way); indices exactly.
TOLERANCE = {"bfloat16": 1e-2, "float16": 2e-3, "float32": 5e-3, "float8_e4m3fn": 1e-2, "int64": 0.0, "int32": 0.0}

KINDS = ("memory", "matrix")  # the split's strata: no tl.dot, or tensor-core work
# The largest register tile a list keeps, in elements a warp (128 a thread): past it a tile spills, and ptxas spends
# 10 s to a minute on one binary (measured for sm_90 on the SwiGLU and embedding tiles); libraries' lists stop there.
TILE_PER_WARP = 4096


@dataclass(frozen=True)
class SuiteKernel:
    """One kernel of the suite. `make_args(shape, device, dtype=None (bf16), seed=0)` gives fresh seeded inputs and
    allocated outputs by parameter name; `grid(args, meta)` the launch grid; `reference(args)` the expected outputs
    (float32/float64, by name in `outputs`); `baseline(args)` runs the eager torch op on the same inputs (None: no
    eager op); `flops(shape)` and `bytes(shape)` the hand-counted minimum work at bf16 inputs (each input read once,
    each output written once); `key` the autotune key's argument names; `reset` the outputs zeroed before each
    launch (`reset_to_zero`); `tolerance` the bound by output dtype; `interpreted` the outputs Triton's interpreter
    computes faithfully (FP8 conversions it does not); `kind` the split's stratum; `source` the public form."""

    name: str
    fn: triton.runtime.JITFunction
    configs: tuple[triton.Config, ...]
    shapes: tuple[dict[str, int], ...]
    small_shape: dict[str, int]
    make_args: Callable[..., dict]
    grid: Callable[[dict, dict], tuple]
    reference: Callable[[dict], dict]
    outputs: tuple[str, ...]
    key: tuple[str, ...]
    flops: Callable[[dict], float]
    bytes: Callable[[dict], float]
    kind: str
    source: str
    baseline: Callable[[dict], object] | None = None
    reset: tuple[str, ...] = ()
    tolerance: Mapping[str, float] = field(default_factory=lambda: dict(TOLERANCE))
    interpreted: tuple[str, ...] | None = None

    def launch(self, args: dict, config: triton.Config) -> None:
        """One launch of `config` on `args`: the `reset` outputs zeroed, then the kernel on its grid."""
        launch(self, args, config)


def launch(kernel: SuiteKernel, args: dict, config: triton.Config) -> None:
    """`kernel.fn[grid](**args, **config.all_kwargs())`, num_warps and num_stages as launch options, after zeroing
    the outputs in `kernel.reset` (as `@triton.autotune`'s reset_to_zero does before each timed call)."""
    for name in kernel.reset:
        args[name].zero_()
    kernel.fn[kernel.grid(args, config.kwargs)](**args, **config.all_kwargs())


def configs(num_warps=(4,), num_stages=(3,), **axes) -> tuple[triton.Config, ...]:
    """The product of the meta-parameter `axes` (name -> values) with num_warps and num_stages, in the order of
    nested loops over them (the form of the lists public libraries write as comprehensions)."""
    names = list(axes)
    return tuple(triton.Config(dict(zip(names, values)), num_warps=w, num_stages=s)
                 for *values, w, s in itertools.product(*axes.values(), num_warps, num_stages))


def joint_configs(names: tuple[str, ...], values, num_warps=(4,), num_stages=(3,)) -> tuple[triton.Config, ...]:
    """Each tuple of `values` (one value per name of `names`, e.g. attention's (BLOCK_M, BLOCK_N) pairs) with every
    num_warps and num_stages, in that loop order."""
    return tuple(triton.Config(dict(zip(names, row)), num_warps=w, num_stages=s)
                 for row in values for w in num_warps for s in num_stages)


def fitting(listed, elements: Callable[[dict], int], per_warp: int = TILE_PER_WARP) -> tuple[triton.Config, ...]:
    """The configs of `listed` whose register tile, `elements(meta)` values, is at most `per_warp` a warp."""
    return tuple(c for c in listed if elements(c.kwargs) <= per_warp * c.num_warps)


def tile_configs(rows: list[tuple[int, ...]], names: tuple[str, ...], **fixed) -> tuple[triton.Config, ...]:
    """A hand list of (meta values..., num_stages, num_warps) rows, as torch inductor's `mm_configs` write them."""
    return tuple(triton.Config({**dict(zip(names, row[:-2])), **fixed}, num_stages=row[-2], num_warps=row[-1])
                 for row in rows)


def config_of(config: triton.Config) -> Config:
    """rooftune's `Config` of a Triton config: its one text form ('BLOCK_M=4,num_warps=8,num_stages=3')."""
    return Config.make(config.num_warps, config.num_stages, **config.kwargs)


def shape_id(shape: Mapping[str, int]) -> str:
    """A shape's file-name form: 'M4096-N4096', the sizes in the shape's order."""
    return "-".join(f"{k}{v}" for k, v in shape.items())


def dtype_or_default(dtype):
    """The inputs' dtype: bf16, the sweep's, unless given (the interpreter's tests use fp16 or fp32)."""
    return torch.bfloat16 if dtype is None else dtype


def generator(device, seed: int):
    """A torch generator on `device`, seeded: every input of the suite is drawn from one. None on the meta device,
    whose tensors have a dtype and a shape but no values: enough to compile and count a config's call
    (kernels/introspect/analyze.py) and to size its footprint."""
    if torch.device(device).type == "meta":
        return None
    return torch.Generator(device=device).manual_seed(seed)


def randn(size, gen, device, dtype, scale: float = 1.0):
    """Standard-normal values (times `scale`) of `size`, drawn in fp32 from `gen` and stored as `dtype`."""
    return (torch.randn(size, generator=gen, device=device, dtype=torch.float32) * scale).to(dtype)


def interpreter_programs(device) -> int:
    """Programs of a persistent launch: the GPU's SMs (a device fact, read, never written in code), or two off
    the GPU, where Triton's interpreter runs one program after another (kernels/gemm.py's INTERPRETER_PROGRAMS)."""
    device = torch.device(device)
    if device.type != "cuda":
        return 2
    return torch.cuda.get_device_properties(device).multi_processor_count


def next_pow2(n: int) -> int:
    return triton.next_power_of_2(n)
