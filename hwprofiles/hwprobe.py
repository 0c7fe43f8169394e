"""`hwprobe`: measure the GPU this process sees (optionally an SM partition of it) as a HardwareProfile.

Also home of `sm_partition`, the green-context helper every GPU command (`hwprobe`, `sweep`, `tune`)
uses for `--sms N`: an SM-partitioned H200 behaves as a second, smaller device (ANCHORS.md).
torch, triton and pynvml are imported inside the functions that need a GPU.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import functools
import importlib.metadata
import os
import statistics
from collections.abc import Callable, Iterator

from rooftune.hwprofiles.profile import HardwareProfile

# Per-SM resident-block limit by compute capability (CUDA programming guide, "Compute
# Capabilities" table); not measurable by a probe, so read from the table by the device's capability.
MAX_CTAS_PER_SM = {(7, 0): 32, (7, 5): 16, (8, 0): 32, (8, 6): 16, (8, 7): 16, (8, 9): 24,
                   (9, 0): 32, (10, 0): 32, (12, 0): 32}
REGS_PER_THREAD_MAX = 255  # CUDA limit for every compute capability since 3.5
SMEM_BYTES_PER_CLOCK = 128  # 32 banks x 4 bytes per clock on every NVIDIA SM since Volta
# Per-SM results per clock by compute capability (CUDA C Programming Guide, arithmetic instruction
# throughput): 32-bit FP add/mul/FMA, and the special-function units (exp2, rcp, ...).
# Only the capabilities checked against the guide; others get 128 and 16, marked as estimates.
FP32_LANES_PER_SM = {(7, 0): 64, (7, 5): 64, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128, (9, 0): 128}
SFU_OPS_PER_CLOCK = 16  # every compute capability from 7.0 to 9.0 in the guide's table
# A green context's SMs come in groups: the driver splits a device's SMs in groups of 8 from compute capability 9.0
# on, of 2 before, and rounds a request up to whole groups (CUDA driver API, cuDevSmResourceSplitByCount; torch's
# GreenContext.create passes the request as its minimum count, default flags). So `--sms 66` on an H200 runs on
# 72 SMs: the partition's timings fit 72, not 66 (docs/results.md, "A second device").
SM_GROUP_FROM_9_0, SM_GROUP_BEFORE_9_0 = 8, 2
# Effective pipelined-load latencies (see HardwareProfile): not measured by this probe yet, so a
# probed profile carries the same estimates as the shipped ones, marked as such in its sources.
L2_LATENCY_NS_ESTIMATE = 500.0
DRAM_LATENCY_NS_ESTIMATE = 900.0
# The dependent MMA group latency (see HardwareProfile): the H200's cross-validated figure.
MMA_LATENCY_CLOCKS_ESTIMATE = 256.0
# The smallest piece of a row DRAM reads at full rate (HardwareProfile.dram_piece_bytes): the L2 line.
DRAM_PIECE_BYTES = 128
# Fields a probe does not measure (CUDA limit tables, architecture constants, estimates); every other
# field of a probed profile has a source that starts with "probed".
UNPROBED_FIELDS = frozenset({"regs_per_thread_max", "max_ctas_per_sm", "smem_bytes_per_clock",
                             "fp32_lanes_per_sm", "sfu_ops_per_clock", "l2_latency_ns", "dram_latency_ns",
                             "mma_latency_clocks", "dram_piece_bytes"})


class NoGpuError(RuntimeError):
    """The command needs a CUDA GPU and this machine has none (or torch cannot see it)."""


class PartitionError(ValueError):
    """--sms asks for an SM partition (green context) this device cannot make."""


def require_cuda():
    """Import torch and check that a CUDA device is visible; raise NoGpuError with a clear message."""
    try:
        import torch
    except ImportError as exc:
        raise NoGpuError("torch is not installed; this command needs torch with CUDA and a GPU") from exc
    if not torch.cuda.is_available():
        raise NoGpuError("no CUDA GPU is visible (torch.cuda.is_available() is False); run this "
                         "command on a machine with an NVIDIA GPU")
    return torch


def _nvml(query: Callable, default):
    """`query(pynvml)` inside one NVML session (no torch, no CUDA context: milliseconds); `default`
    without a driver or pynvml, or when the query fails."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return query(pynvml)
        finally:
            pynvml.nvmlShutdown()
    except Exception:  # no driver, no library, an old driver
        return default


def nvml_gpu_count() -> int:
    """How many GPUs the NVIDIA driver sees, asked through NVML (CUDA_VISIBLE_DEVICES does not apply);
    0 without a driver or pynvml."""
    return _nvml(lambda nvml: int(nvml.nvmlDeviceGetCount()), 0)


def gpu_visible() -> bool:
    """Whether the NVIDIA driver sees a GPU (`nvml_gpu_count`): a fast first check before starting
    work that `require_cuda` would refuse later."""
    return nvml_gpu_count() > 0


@functools.cache
def nvml_index(device: int = 0) -> int:
    """NVML's index of torch's CUDA device `device`, matched by UUID: NVML numbers every GPU of the
    machine, CUDA only those CUDA_VISIBLE_DEVICES lists (a sweep worker's one GPU is its device 0).
    `device` itself where no UUID matches (no pynvml, an old torch). Fixed for a process's life, so
    asked once per device (every timing pass reads clocks through it)."""
    import torch

    try:
        uuid = str(torch.cuda.get_device_properties(device).uuid).lower().removeprefix("gpu-")
    except Exception:  # no uuid attribute, no such device: assume the numbers agree
        return device

    def find(nvml) -> int:
        for index in range(nvml.nvmlDeviceGetCount()):
            nvml_uuid = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(index))
            nvml_uuid = nvml_uuid.decode() if isinstance(nvml_uuid, bytes) else str(nvml_uuid)
            if nvml_uuid.lower().removeprefix("gpu-") == uuid:
                return index
        return device

    return _nvml(find, device)


def _visible_entry(device: int) -> str:
    """CUDA device `device`'s entry in CUDA_VISIBLE_DEVICES (a `--gpus` worker's is the GPU it was given),
    else its CUDA number."""
    listed = [e.strip() for e in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if e.strip()]
    return listed[device] if device < len(listed) else str(device)


def device_label(device: int = 0) -> str:
    """Which GPU measures, as a dataset records it: 'gpu I: NAME', I the device's `_visible_entry`."""
    torch = require_cuda()
    return f"gpu {_visible_entry(device)}: {torch.cuda.get_device_name(device)}"


def _nvml_handle(nvml, device: int):
    """NVML's handle of CUDA device `device` without torch: its `_visible_entry` where that is an index,
    else `device` (`nvml_index` matches UUIDs, but needs torch)."""
    entry = _visible_entry(device)
    return nvml.nvmlDeviceGetHandleByIndex(int(entry) if entry.isdigit() else device)


def nvml_gpu_name(device: int = 0) -> str | None:
    """The driver's name for CUDA device `device` through NVML (no torch, no CUDA context), or None
    without a GPU or NVML."""
    def name(nvml) -> str:
        raw = nvml.nvmlDeviceGetName(_nvml_handle(nvml, device))
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    return _nvml(name, None)


def nvml_compute_capability(device: int = 0) -> tuple[int, int] | None:
    """CUDA device `device`'s compute capability through NVML (no torch, no CUDA context), or None where
    NVML cannot tell (no GPU, no driver, an old one): what compile workers need to build for this GPU
    before this process has a CUDA context."""
    return _nvml(lambda nvml: tuple(int(v) for v in nvml.nvmlDeviceGetCudaComputeCapability(
        _nvml_handle(nvml, device))), None)


def sm_group(compute_capability) -> int:
    """How many SMs a green context's partition is made of a multiple of on a GPU of this compute capability."""
    return SM_GROUP_FROM_9_0 if tuple(compute_capability) >= (9, 0) else SM_GROUP_BEFORE_9_0


def granted_sms(requested: int, compute_capability) -> int:
    """The SMs a green context asked for `requested` of them runs on: the request rounded up to whole groups
    (`sm_group`). What the model must count for `--sms`, and what `hwprobe --sms` records."""
    group = sm_group(compute_capability)
    return max(group, -(-int(requested) // group) * group)


def _rule_source(requested: int, cc, why: str = "") -> str:
    """The source of an SM count given by `granted_sms`'s rule rather than counted (`why`: what stopped the count)."""
    return (f"rule{why}: a green context asked for {requested} SMs gets whole groups of {sm_group(cc)} on compute "
            f"capability {cc[0]}.{cc[1]}")


def partition_profile(profile: HardwareProfile, sms: int | None) -> HardwareProfile:
    """`profile` as the model must see the GPU inside `sm_partition(sms)`: its SMs the partition's granted count
    (waves, split-K, persistent grids); `profile` itself without a partition."""
    if sms is None:
        return profile
    return dataclasses.replace(profile, sm_count=granted_sms(sms, profile.compute_capability))


@contextlib.contextmanager
def sm_partition(num_sms: int | None, device: int = 0) -> Iterator[object | None]:
    """Run the body in a green context of `num_sms` SMs (None: the whole device, no context): the driver grants
    `granted_sms(num_sms, ...)` of them, whole groups of `sm_group`; a request whose groups would pass the
    device's SMs is refused.

    torch's API changed names across releases (set_context/pop_context, earlier
    make_current/pop_current); both are accepted."""
    if num_sms is None:
        yield None
        return
    torch = require_cuda()
    props = torch.cuda.get_device_properties(device)
    total = props.multi_processor_count
    if not 0 < num_sms <= total:
        raise PartitionError(f"--sms must be between 1 and {total} on this device, got {num_sms}")
    cc = (props.major, props.minor)
    granted, group = granted_sms(num_sms, cc), sm_group(cc)
    if granted > total:
        raise PartitionError(f"--sms {num_sms}: this GPU (compute capability {cc[0]}.{cc[1]}) gives a partition "
                             f"whole groups of {group} SMs, {granted} here, more than its {total}; "
                             f"ask for at most {total // group * group}")
    from torch.cuda.green_contexts import GreenContext

    # The primary context first, as a green context needs (else torch warns, then makes one itself).
    torch.cuda.synchronize(device)
    ctx = GreenContext.create(num_sms=num_sms, device_id=device)
    enter = getattr(ctx, "set_context", None) or ctx.make_current
    leave = getattr(ctx, "pop_context", None) or ctx.pop_current
    enter()
    # Inside, eager launches go to the green context's default stream (torch makes it current), but torch captures
    # CUDA graphs, the timing harness's, on a side stream: one per process, drawn from a pool of streams made at
    # the process's first request. Where whole-GPU work came first, those streams belong to the whole GPU, and the
    # graphs would run there (measured: 4096³ timed at 180 µs inside 66 SMs as outside). So captures inside use
    # a stream of the green context itself where torch offers one (GreenContext.Stream, torch 2.11 on), else a
    # fresh pool stream (right in a fresh process, as every CLI command is); and a fresh one again after.
    _set_capture_stream(torch, _partition_stream(torch, ctx))
    try:
        yield ctx
    finally:
        torch.cuda.synchronize()
        _set_capture_stream(torch, None)
        leave()


def _partition_stream(torch, ctx) -> object | None:
    """A torch.cuda.Stream on the green context `ctx`'s own SMs, or None where this torch has none."""
    make = getattr(ctx, "Stream", None)
    if make is None:
        return None
    stream = make()
    if isinstance(stream, torch.cuda.Stream):
        return stream
    return torch.cuda.Stream(stream_id=stream.stream_id, device_index=stream.device_index,
                             device_type=stream.device_type)


def _set_capture_stream(torch, stream) -> None:
    graph = getattr(torch.cuda, "graph", None)
    if graph is not None and hasattr(graph, "default_capture_stream"):
        graph.default_capture_stream = stream


def _today() -> str:
    return datetime.date.today().isoformat()


def _median_ms(fn: Callable[[], None], reps: int, warmup: int = 3) -> float:
    """Median event-timed milliseconds of `fn` over `reps` runs after `warmup` runs."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def dram_bw_gbps(nbytes: int = 2 << 30, reps: int = 10) -> float:
    """Device-to-device copy of `nbytes`: bandwidth = 2 · nbytes (read + written) / time, in GB/s."""
    import torch

    src = torch.randint(0, 255, (nbytes,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = _median_ms(lambda: dst.copy_(src), reps)
    return 2 * nbytes / (ms * 1e-3) / 1e9


@functools.cache
def _l2_read_kernel():
    """A Triton kernel (built on first use: this module loads triton only when a probe runs) in which
    program p sums `iters` consecutive blocks of BLOCK fp32 values of a buffer of `n_blocks` blocks,
    starting at block p mod n_blocks and wrapping around, and stores its sum (so no load is dead)."""
    import triton
    import triton.language as tl

    @triton.jit
    def l2_read(x_ptr, out_ptr, n_blocks, iters, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        offs = tl.arange(0, BLOCK)
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        block = pid % n_blocks
        for _ in range(iters):
            acc += tl.load(x_ptr + block * BLOCK + offs)
            block = (block + 1) % n_blocks
        tl.store(out_ptr + pid, tl.sum(acc, axis=0))

    return l2_read


L2_READ_BLOCK = 4096  # fp32 values per load step: 16 KB per program, 64 B per thread of 8 warps


def l2_read(buf, programs: int, iters: int, out=None):
    """Run the L2 read kernel over `buf` (1-D fp32, a multiple of L2_READ_BLOCK values) with `programs`
    programs of `iters` block loads each; returns each program's sum (fp32, [programs]; into `out`
    when given, so a timed loop allocates nothing)."""
    import torch

    if buf.dim() != 1 or buf.dtype != torch.float32 or buf.numel() % L2_READ_BLOCK:
        raise ValueError(f"buf must be 1-D fp32 with a multiple of {L2_READ_BLOCK} values")
    if out is None:
        out = torch.empty(programs, device=buf.device, dtype=torch.float32)
    _l2_read_kernel()[(programs,)](buf, out, buf.numel() // L2_READ_BLOCK, iters, BLOCK=L2_READ_BLOCK,
                                   num_warps=8)
    return out


def l2_bw_gbps(l2_bytes: int, sm_count: int, read_bytes: int = 8 << 30, reps: int = 10) -> float:
    """L2 read bandwidth: 8 programs per SM re-read a buffer of l2_bytes/4 (resident in L2 after the
    warm-up) in 16 KB vector loads, `read_bytes` in all over 4 back-to-back kernels of ~2 GB each, so
    launch gaps do not count:
    bandwidth = bytes read / time, in GB/s. Reads are what GEMM tiles draw from L2. Two earlier methods
    measured something else on the H200: copies inside L2 (read + write, many short kernels) gave
    5.2 TB/s, and torch's sum over a stride-0 view of the buffer, bound by the reduction's own
    instruction rate, 2.8 TB/s, below the 4.2 TB/s of a DRAM copy."""
    import torch

    values = max(l2_bytes // 16 // L2_READ_BLOCK, 1) * L2_READ_BLOCK  # l2_bytes / 4, in fp32 values
    buf = torch.randn(values, device="cuda", dtype=torch.float32)
    programs = 8 * sm_count
    out = torch.empty(programs, device="cuda", dtype=torch.float32)
    # `launches` back-to-back kernels between one pair of events: only the first launch's host
    # latency (tens of µs) can leave the GPU idle, against ~launches ms of reading.
    launches = 4
    iters = max(1, read_bytes // (launches * programs * L2_READ_BLOCK * 4))

    def run():
        for _ in range(launches):
            l2_read(buf, programs, iters, out)

    ms = _median_ms(run, reps)
    return launches * programs * iters * L2_READ_BLOCK * 4 / (ms * 1e-3) / 1e9


def matmul_tflops(dtype: str, size: int = 8192, reps: int = 10) -> float:
    """Dense size³ torch.matmul on random data (never zeros): 2·size³ / time, in TFLOP/s.
    'tf32' is fp32 operands with TF32 matrix units allowed; 'fp32' with them disallowed."""
    import torch

    torch_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "tf32": torch.float32,
                   "fp32": torch.float32}[dtype]
    if dtype == "fp32":
        size, reps = min(size, 4096), min(reps, 5)  # plain fp32 is ~15x slower; keep the probe short
    a = torch.randn(size, size, device="cuda", dtype=torch_dtype)
    b = torch.randn(size, size, device="cuda", dtype=torch_dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    try:
        ms = _median_ms(lambda: torch.matmul(a, b), reps)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * size**3 / (ms * 1e-3) / 1e12


@functools.cache
def _record_sm_kernel():
    """A Triton kernel (built on first use) whose every program spins `spin_ns` on the global timer, so that the
    programs stay resident and spread over every SM they may run on, then stores the id of the SM it ran on."""
    import triton
    import triton.language as tl
    from triton.language.extra.cuda import globaltimer, smid

    @triton.jit
    def record_sm(out_ptr, spin_ns):
        start = globaltimer()
        while globaltimer() - start < spin_ns:
            pass
        tl.store(out_ptr + tl.program_id(0), smid())

    return record_sm


def sms_in_use(programs: int, spin_us: float = 20.0) -> int:
    """How many distinct SMs ran `programs` one-warp programs of `_record_sm_kernel` in the current context: a green
    context's own SMs when launched inside `sm_partition` (torch's current stream is then the context's)."""
    import torch

    out = torch.full((programs,), -1, dtype=torch.int32, device="cuda")
    _record_sm_kernel()[(programs,)](out, int(spin_us * 1000), num_warps=1)
    torch.cuda.synchronize()
    return int(torch.unique(out).numel())


def partition_sm_count(requested: int, props, date: str, measure: Callable[[int], int] = sms_in_use
                       ) -> tuple[int, str]:
    """The SMs of a green context asked for `requested` (run inside it) and the source to record: counted, as the
    distinct SMs that ran 8 programs per SM of the whole device; where that kernel cannot run, `granted_sms`'s rule."""
    cc = (props.major, props.minor)
    rule = granted_sms(requested, cc)
    try:
        counted = measure(8 * props.multi_processor_count)
    except Exception as exc:  # a probe keeps the rule rather than fail for want of this kernel
        return rule, _rule_source(requested, cc, f", not counted ({type(exc).__name__})")
    agrees = "as the rule of groups says" if counted == rule else f"the rule of groups says {rule}"
    return counted, (f"probed {date}: {counted} distinct SMs ran a kernel in a green context asked for {requested} "
                     f"SMs ({agrees})")


def launch_overhead_us(launches: int = 1000, reps: int = 10) -> float:
    """GPU-side cost of one more kernel in a stream: a CUDA graph of `launches` one-element kernels
    replayed back to back, time per kernel in µs. This is what a split-K reduction kernel adds to a
    timed GEMM; host-side launch latency (tens of µs from Python) overlaps with earlier GPU work."""
    import torch

    x = torch.zeros(1, device="cuda")
    x.add_(1)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            x.add_(1)
    return _median_ms(graph.replay, reps) * 1e3 / launches


def _nvml_facts(device: int) -> dict[str, object]:
    """Max SM and memory clocks (MHz) and the driver version through pynvml; absent on failure."""
    facts: dict[str, object] = {}
    try:
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(device)
        facts["sm_clock_mhz"] = float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_SM))
        facts["mem_clock_mhz"] = float(pynvml.nvmlDeviceGetMaxClockInfo(handle, pynvml.NVML_CLOCK_MEM))
        driver = pynvml.nvmlSystemGetDriverVersion()
        facts["driver"] = driver.decode() if isinstance(driver, bytes) else str(driver)
    except Exception as exc:
        facts["error"] = f"pynvml: {exc}"
    return facts


def installed_triton() -> str | None:
    """The installed Triton's version (e.g. '3.6.0'), read from its package metadata without importing it;
    None where Triton is not installed."""
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def triton_release(version: str) -> str:
    """'3.6.0' -> '3.6': a Triton version's release, major.minor, which residuals and datasets are keyed by (a patch
    release keeps the code generator)."""
    return ".".join(str(version).split("+")[0].split(".")[:2])


def software_versions(device: int = 0) -> dict[str, str]:
    """GPU name, driver, torch, triton and CUDA versions: the `meta` of profiles and datasets."""
    torch = require_cuda()
    import triton

    nvml = _nvml_facts(device)
    return {"gpu": torch.cuda.get_device_name(device), "driver": str(nvml.get("driver", "unknown")),
            "torch": torch.__version__, "triton": triton.__version__,
            "cuda": str(torch.version.cuda), "date": _today()}


def probe(name: str | None = None, sms: int | None = None, device: int = 0,
          log: Callable[[str], None] = lambda _: None) -> HardwareProfile:
    """Measure the visible GPU (or a green context of `sms` SMs on it) as a HardwareProfile."""
    torch = require_cuda()
    torch.cuda.set_device(device)
    props = torch.cuda.get_device_properties(device)
    nvml = _nvml_facts(device)
    if "sm_clock_mhz" not in nvml:
        raise RuntimeError(f"cannot read clocks: {nvml.get('error', 'pynvml unavailable')}")
    date = _today()
    with sm_partition(sms, device):
        counted = partition_sm_count(sms, props, date) if sms else None
        if counted:
            log(f"sm_count: {counted[0]} ({counted[1]})")
        # the SMs the work runs on: a partition's (counted), else the device's; the L2 probe's programs scale with them
        in_use = counted[0] if counted else props.multi_processor_count
        measured = {}
        for key, fn in (("dram_bw_gbps", dram_bw_gbps),
                        ("l2_bw_gbps", lambda: l2_bw_gbps(props.L2_cache_size, in_use)),
                        ("bf16_tflops", lambda: matmul_tflops("bf16")),
                        ("fp16_tflops", lambda: matmul_tflops("fp16")),
                        ("tf32_tflops", lambda: matmul_tflops("tf32")),
                        ("fp32_tflops", lambda: matmul_tflops("fp32")),
                        ("launch_overhead_us", launch_overhead_us)):
            measured[key] = fn()
            log(f"{key}: {measured[key]:.1f}")
    values, sources = profile_fields(props, nvml, measured, name=name, sms=sms, date=date, partition=counted)
    meta = {**software_versions(device), "kind": "probed"}
    if sms:
        meta["sm_partition"] = (f"torch.cuda.green_contexts, {sms} of {props.multi_processor_count} SMs asked for, "
                                f"{values['sm_count']} granted")
    return HardwareProfile(**values, sources=sources, meta=meta)


def profile_fields(props, nvml: dict, measured: dict, *, name: str | None, sms: int | None,
                   date: str, partition: tuple[int, str] | None = None) -> tuple[dict, dict[str, str]]:
    """The profile's values and their sources from device properties (torch's), pynvml facts and
    the measured rates: everything `probe` writes except `meta`. With `sms` (a green context asked for that
    many SMs), `partition` is its SM count and source (`partition_sm_count`; default: `granted_sms`'s rule)."""
    cc = (props.major, props.minor)
    if sms and partition is None:
        partition = (granted_sms(sms, cc), _rule_source(sms, cc))
    read = f"probed {date}: torch.cuda.get_device_properties"
    values = dict(
        name=name or (props.name if sms is None else f"{props.name} ({sms} SMs)"),
        sm_count=partition[0] if sms else props.multi_processor_count,
        sm_clock_mhz=nvml["sm_clock_mhz"], mem_clock_mhz=nvml["mem_clock_mhz"],
        smem_per_sm_bytes=props.shared_memory_per_multiprocessor,
        smem_per_block_bytes=props.shared_memory_per_block_optin,
        regs_per_sm=props.regs_per_multiprocessor, regs_per_thread_max=REGS_PER_THREAD_MAX,
        max_threads_per_sm=props.max_threads_per_multi_processor,
        max_ctas_per_sm=MAX_CTAS_PER_SM.get(cc, 32), l2_bytes=props.L2_cache_size,
        smem_bytes_per_clock=SMEM_BYTES_PER_CLOCK, fp32_lanes_per_sm=FP32_LANES_PER_SM.get(cc, 128),
        sfu_ops_per_clock=SFU_OPS_PER_CLOCK, l2_latency_ns=L2_LATENCY_NS_ESTIMATE,
        dram_latency_ns=DRAM_LATENCY_NS_ESTIMATE, mma_latency_clocks=MMA_LATENCY_CLOCKS_ESTIMATE,
        dram_piece_bytes=DRAM_PIECE_BYTES, compute_capability=cc, **measured)
    how = {
        "sm_count": partition[1] if sms else read,
        "sm_clock_mhz": f"probed {date}: pynvml max SM clock (not locked)",
        "mem_clock_mhz": f"probed {date}: pynvml max memory clock",
        "regs_per_thread_max": "CUDA limit (compute capability >= 3.5)",
        "smem_bytes_per_clock": "architecture: 32 banks x 4 bytes per clock (every SM since Volta)",
        "fp32_lanes_per_sm": (f"architecture: CUDA guide table for compute capability {cc[0]}.{cc[1]}"
                              if cc in FP32_LANES_PER_SM else "estimate: 128, compute capability not in the table"),
        "sfu_ops_per_clock": ("architecture: CUDA guide table (16 per SM for compute capability 7.0-9.0)"
                              if cc in FP32_LANES_PER_SM else "estimate: 16, compute capability not in the table"),
        "l2_latency_ns": "estimate, not measured by hwprobe: effective pipelined L2 load latency",
        "dram_latency_ns": "estimate, not measured by hwprobe: effective pipelined DRAM load latency",
        "mma_latency_clocks": "estimate, not measured by hwprobe: the H200's cross-validated figure",
        "dram_piece_bytes": "architecture: the L2 line (128 bytes on NVIDIA GPUs since Fermi), not measured",
        "max_ctas_per_sm": f"CUDA limit table for compute capability {cc[0]}.{cc[1]}",
        "dram_bw_gbps": f"probed {date}: 2 GiB device copy, bytes read + written",
        "l2_bw_gbps": f"probed {date}: 8 programs per SM re-reading an L2-resident buffer (L2/4), bytes read",
        "bf16_tflops": f"probed {date}: 8192^3 torch.matmul on random data",
        "fp16_tflops": f"probed {date}: 8192^3 torch.matmul on random data",
        "tf32_tflops": f"probed {date}: 8192^3 fp32 torch.matmul, TF32 allowed",
        "fp32_tflops": f"probed {date}: 4096^3 fp32 torch.matmul, TF32 disallowed",
        "launch_overhead_us": f"probed {date}: per kernel in a CUDA graph of 1000 tiny kernels",
    }
    sources = {key: how.get(key, read) for key in values if key != "name"}
    return values, sources
