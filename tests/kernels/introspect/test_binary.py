"""What the compiled binary says: registers and the stack frame read from the cubin as cuobjdump reads them, and the
binary kept under the key its launch looks up, so timing a config that was analysed compiles nothing again."""

import re
import subprocess
from pathlib import Path

import pytest
import torch
import triton
import triton.language as tl
from triton import knobs

from rooftune.kernels.harness.offline import stand_in_target
from rooftune.kernels.introspect.binary import compile_lowered, cubin_resources
from rooftune.kernels.introspect.lowering import jit_function, lower

CUOBJDUMP = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"


@triton.jit
def scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)


@triton.jit
def fp32_dot_kernel(a_ptr, b_ptr, c_ptr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # a large fp32 tile on one warp: more accumulators than a thread has registers, so ptxas spills
    rm, rn, rk = tl.arange(0, BM), tl.arange(0, BN), tl.arange(0, BK)
    acc = tl.dot(tl.load(a_ptr + rm[:, None] * BK + rk[None, :]), tl.load(b_ptr + rk[:, None] * BN + rn[None, :]),
                 input_precision="ieee")
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))  # not the knob: setting it outlives the test
    return tmp_path / "triton"


def _args():
    return {"x_ptr": torch.zeros(4096), "y_ptr": torch.zeros(4096), "n": 4096}


def _cuobjdump(cubin: bytes, tmp_path) -> tuple[int, int]:
    path = tmp_path / "k.cubin"
    path.write_bytes(cubin)
    out = subprocess.run([str(CUOBJDUMP), "-res-usage", str(path)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"REG:(\d+)", out).group(1)), int(re.search(r"STACK:(\d+)", out).group(1))


def test_registers_and_the_frame_are_read_as_cuobjdump_reads_them(cache, tmp_path):
    lowered = lower(scale_kernel, triton.Config({"BLOCK": 512}, num_warps=4), _args(), 90)
    facts = compile_lowered(lowered)
    (group,) = [p for p in cache.rglob("@scale_kernel.cubin")]
    regs, frame = cubin_resources(group.read_bytes())
    assert (facts.regs_per_thread, facts.local_bytes_per_thread) == (regs, frame)
    if CUOBJDUMP.is_file():
        assert _cuobjdump(group.read_bytes(), tmp_path) == (regs, frame)
    assert facts.num_warps == 4 and facts.wgmma is False and facts.smem_bytes >= 0


def test_the_binary_is_kept_where_the_configs_launch_looks(cache):
    config = triton.Config({"BLOCK": 256}, num_warps=2)
    lowered = lower(scale_kernel, config, _args(), 90)
    compile_lowered(lowered)
    hits = []
    fn, _ = jit_function(scale_kernel)
    previous = knobs.compilation.listener
    knobs.compilation.listener = lambda **event: hits.append(event["cache_hit"])
    try:
        with stand_in_target(90):
            kernel = fn.warmup(grid=(1,), **_args(), **config.all_kwargs())
    finally:
        knobs.compilation.listener = previous
    assert hits == [True] and kernel.hash == lowered.launch_hash and kernel.metadata.num_warps == 2


def test_spills_are_the_stack_frame(cache, tmp_path):
    args = {"a_ptr": torch.zeros(128, 16), "b_ptr": torch.zeros(16, 64), "c_ptr": torch.zeros(128, 64)}
    lowered = lower(fp32_dot_kernel, triton.Config({"BM": 128, "BN": 64, "BK": 16}, num_warps=1, num_stages=1),
                    args, 90)
    facts = compile_lowered(lowered)
    assert facts.regs_per_thread == 255 and facts.local_bytes_per_thread > 0


def test_a_worker_takes_the_lowering_process_s_triton_key_and_compiles_the_same(cache, monkeypatch):
    from dataclasses import replace

    from triton.runtime import cache as triton_cache

    from rooftune.kernels.introspect.binary import adopt_triton_key, compile_job

    monkeypatch.setattr(triton_cache, "triton_key", triton_cache.triton_key)  # restored after the test
    lowered = lower(scale_kernel, triton.Config({"BLOCK": 128}, num_warps=1), _args(), 90)
    assert lowered.triton_key == triton_cache.triton_key() and lowered.triton_file == triton_cache.__file__
    assert not adopt_triton_key(replace(lowered, triton_file="/elsewhere/triton/runtime/cache.py"))
    assert triton_cache.triton_key() == lowered.triton_key and not hasattr(triton_cache.triton_key, "adopted")
    facts = compile_job(lowered, None, "cuda")  # as a worker runs it: the key adopted, the binary the same
    assert triton_cache.triton_key.adopted == lowered.triton_key and facts == compile_lowered(lowered)
    assert adopt_triton_key(replace(lowered, triton_key="another"))  # a later lowering's key replaces it
    assert triton_cache.triton_key() == "another"
