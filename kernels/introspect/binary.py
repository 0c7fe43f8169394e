"""What a compile worker does with a lowered config (kernels/introspect/lowering.py): compile its Triton IR for the
target without a GPU, read what the compiler decided, and leave the binary where the config's launch looks.

Registers per thread and the stack frame (local memory per thread: ptxas's spills, what Triton reports as
`n_spills`) come from the cubin's ELF `.nv.info` attributes (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE), the values
`cuobjdump -res-usage` prints, read without a subprocess; shared memory, warps and stages from Triton's metadata;
wgmma from the TTGIR (`ttng.warp_group_dot`). The compile lands in Triton's cache under the IR's own key, and a copy
of its files under the key of the launch (`launch_hash`), named as a compile from Python source names them, with
the metadata's hash rewritten: the two compiles produce the same binary and metadata, so the launch of a config
that is timed loads it (a cache hit) instead of compiling it again.
"""

from __future__ import annotations

import json
import struct
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget
from triton.runtime.cache import get_cache_manager

from rooftune.candidates.kernel_counts import CompiledFacts
from rooftune.kernels.harness.offline import stand_in_target
from rooftune.kernels.introspect.lowering import LoweredConfig

# ELF .nv.info attribute ids (NVIDIA's EIATTR_*): registers per thread, stack frame bytes per thread.
EIATTR_REGCOUNT = 0x2F
EIATTR_FRAME_SIZE = 0x11
# .nv.info entry formats: a value of its own size (4) follows as u16 size + bytes; 3: u16; 2: u8; 1: nothing.
_FORMAT_BYTES = {1: 0, 2: 1, 3: 2}
WGMMA_OP = "ttng.warp_group_dot"


def _sections(elf: bytes) -> dict[str, bytes]:
    """An ELF64 file's sections by name."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF cubin")
    shoff = struct.unpack_from("<Q", elf, 0x28)[0]
    entsize, count, names_index = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * entsize) for i in range(count)]
    names_at = headers[names_index][4]
    out = {}
    for name, _, _, _, offset, size, *_ in headers:
        end = elf.index(b"\0", names_at + name)
        out[elf[names_at + name:end].decode()] = elf[offset:offset + size]
    return out


def cubin_resources(cubin: bytes) -> tuple[int, int]:
    """(registers per thread, stack frame bytes per thread) of the kernel in `cubin` (the largest where it
    holds several functions)."""
    info = _sections(cubin).get(".nv.info", b"")
    values: dict[int, int] = {}
    i = 0
    while i + 2 <= len(info):
        fmt, attr = info[i], info[i + 1]
        i += 2
        if fmt == 4:
            size = struct.unpack_from("<H", info, i)[0]
            if attr in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE) and size == 8:
                values[attr] = max(values.get(attr, 0), struct.unpack_from("<II", info, i + 2)[1])
            i += 2 + size
        else:
            i += _FORMAT_BYTES.get(fmt, 0)
    if EIATTR_REGCOUNT not in values:
        raise ValueError("the cubin names no register count")
    return values[EIATTR_REGCOUNT], values.get(EIATTR_FRAME_SIZE, 0)


def facts_of(kernel) -> CompiledFacts:
    """What the compiler decided for a CompiledKernel (module docstring)."""
    regs, frame = cubin_resources(kernel.asm["cubin"])
    meta = kernel.metadata
    return CompiledFacts(num_warps=int(meta.num_warps), num_stages=int(meta.num_stages), regs_per_thread=regs,
                         smem_bytes=int(meta.shared), local_bytes_per_thread=frame,
                         wgmma=WGMMA_OP in kernel.asm.get("ttgir", ""))


def store_for_launch(kernel, name: str, launch_hash: str) -> None:
    """A copy of `kernel`'s cache files under `launch_hash`, named and hashed as a compile of `name` from its
    Python source writes them (nothing where that key already holds one)."""
    manager = get_cache_manager(launch_hash)
    if manager.get_group(f"{name}.json") is not None:
        return
    group = {}
    for path in map(Path, kernel.metadata_group.values()):
        ext = path.suffix[1:]
        data = path.read_bytes()
        if ext == "json":
            meta = json.loads(data)
            meta["hash"] = launch_hash
            data = json.dumps(meta).encode()
        group[f"{name}.{ext}"] = manager.put(data if ext == "cubin" else data.decode(), f"{name}.{ext}")
    manager.put_group(f"{name}.json", group)


def compile_lowered(lowered: LoweredConfig) -> CompiledFacts:
    """Compile `lowered` for its target (no GPU needed), keep the binary for its launch, and read its facts.
    Raises Triton's error where the compile fails (out of resources, a ptxas error)."""
    with tempfile.TemporaryDirectory(prefix="rooftune-ttir-") as folder:
        path = Path(folder) / f"{lowered.name}.ttir"
        path.write_text(lowered.ttir)
        with stand_in_target(lowered.arch, lowered.warp_size):
            kernel = triton.compile(str(path), target=GPUTarget("cuda", lowered.arch, lowered.warp_size),
                                    options=lowered.options)
    store_for_launch(kernel, lowered.name, lowered.launch_hash)
    return facts_of(kernel)


def adopt_triton_key(lowered: LoweredConfig) -> bool:
    """This worker's Triton key taken from the process that lowered `lowered` (lowering.py `triton_identity`),
    where both run the same Triton files; computed here otherwise (as Triton does). Whether it was taken."""
    from triton.runtime import cache as triton_cache

    if getattr(triton_cache.triton_key, "adopted", None) == lowered.triton_key:
        return True
    if not lowered.triton_key or lowered.triton_file != triton_cache.__file__:
        return False
    key = lowered.triton_key

    def adopted() -> str:
        return key

    adopted.adopted = key
    triton_cache.triton_key = adopted  # get_cache_key reads the module's name at each call
    return True


def compile_job(lowered: LoweredConfig, config, device: str) -> CompiledFacts:
    """A CompilePool warmup (kernels/harness/compile_pool.py): `compile_lowered` in a worker, with the lowering
    process's Triton key (`adopt_triton_key`); the pool's other arguments unused."""
    adopt_triton_key(lowered)
    return compile_lowered(lowered)


compile_job.needs_torch = False
