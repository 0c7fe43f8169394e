"""Triton's on-disk cache for a GPU, built on a machine without one: the sweep's binaries compiled, packed, unpacked.

Triton's frontend, its passes and its bundled ptxas need no GPU; a compile asks the driver only for
the target, a device and a stream, so an `OfflineTarget` stand-in answers those. The compiled binary
lands in Triton's file cache under a key (triton/runtime/cache.py `get_cache_key`) made of
`triton_key()` (triton's version and the hashes of its sources and of libtriton.so, whose build
differs between the wheels of two Python versions), the kernel's source, the target and the options:
so the builder's Python and triton wheel must be the GPU machine's (e.g. a Python 3.12 venv with
triton 3.6.0 for an image of Python 3.12), and the device's launches then find every binary there.

TRITON_INTERPRET must be unset before triton is imported: `triton.jit` picks the interpreter at
decoration time, and an interpreted kernel compiles nothing. `prebuild` therefore compiles in spawned
workers whose environment lacks it (and whose TRITON_CACHE_DIR is the cache being built);
`offline_target` raises `InterpreterActive` where it is set.

The key's CUDA backend part is `ptxas --version` of the ptxas Triton calls (TRITON_PTXAS_PATH, and under
3.9 TRITON_PTXAS_BLACKWELL_PATH from sm_90 on), and its environment part holds Triton's cache-invalidating
variables (under 3.9 TRITON_DEFAULT_FP_FUSION): the builder sets those as the GPU machine does. The archive's
PREBUILD.json records all of it (`compile_environment`) and the kernel modules' source digests, and
`unpack` warns of each difference, each of which means binaries recompile there.

On the GPU machine, from the repository (same Python and triton as the builder):

    python -m rooftune.kernels.harness.prebuild unpack OUT.tar.xz            # into triton.knobs.cache.dir
    python -m rooftune.kernels.harness.prebuild unpack OUT.tar.gz --cache DIR

An archive named *.xz is xz (a fifth of the gzip's size for GEMM binaries: what a device call can carry),
else gzip; `unpack` reads either.

Not `tar xzf` alone: Triton's group files (`__grp__*.json`) list their children by absolute path,
and `unpack` rewrites those paths from the build's cache dir to the one it unpacks into.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import triton
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from rooftune.candidates import (
    KERNELS,
    AttentionShape,
    Config,
    GemmShape,
    KernelSpec,
    MoeFp8Shape,
    MoeShape,
    Shape,
    kernel_of,
    legal_configs,
    load_implementation,
)
from rooftune.candidates.shapes import ShapeListError
from rooftune.hwprofiles import HardwareProfile, ProfileError, load_profile
from rooftune.kernels import gemm
from rooftune.kernels.harness.compile_pool import CompilePool
from rooftune.kernels.harness.offline import InterpreterActive, arch_of, interpreter_active, offline_target
from rooftune.outputs import file_digest

MANIFEST = "PREBUILD.json"  # tar member: where and with what the cache was built
GROUP_PREFIX = "__grp__"
PACKED_SUFFIXES = (".cubin", ".json")  # what a cache hit reads: the binary, its metadata, the group


class PrebuildError(ValueError):
    """Bad input to a build or an unpack: a shape list, a profile, an archive."""


# --- which binaries ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class BinaryJob:
    """One `compile_kernels(shape, config)` call of the shape's kernel module. kind 'gemm': config with
    SPLIT_K = 1 (or a FIXUP config, which has no reduction kernel), the GEMM's binary alone; 'reduce': a
    split-K config of the shape, for the split-K reduction's binary (the GEMM's binary it also asks for is
    a 'gemm' job's, a cache hit); 'attention': the attention forward's binary; 'moe': the fused-MoE GEMM's."""

    shape: Shape
    config: Config
    kind: str = "gemm"


def reduce_key(shape: GemmShape) -> tuple:
    """Shapes with equal keys share the split-K reduction's binary: it specializes N (and the C row
    stride, N) but not M, which only matters as int64."""
    align_n, _ = gemm.alignments(shape.layout, shape.n, shape.k, gemm.shape_strides(shape))
    return shape.dtype, align_n, gemm.int_class(shape.n), shape.m >= 2**31


def _with_split(config: Config, split_k: int) -> Config:
    params = tuple((name, split_k if name == "SPLIT_K" else value) for name, value in config.params)
    return replace(config, params=params)


ShapeConfigs = Callable[[Shape], list[Config]]


def _shape_configs(spec: KernelSpec, shape: Shape, profile: HardwareProfile, configs: ShapeConfigs | None,
                   max_configs: int | None) -> list[Config]:
    """`configs(shape)`, else the shape's legal configs and its family's extras; the first `max_configs`."""
    if configs is not None:
        return configs(shape)[:max_configs]
    legal = legal_configs(spec.space, shape, profile).configs
    return (legal + spec.extras(shape, legal))[:max_configs]


def _distinct_jobs(spec: KernelSpec, shapes: Sequence, profile: HardwareProfile, max_configs: int | None,
                   configs: ShapeConfigs | None) -> list[BinaryJob]:
    """One job per (`specialization_key`, config distinct in all but the family's `runtime_params`)."""
    module = load_implementation(spec.module)
    seen, jobs = set(), []
    for shape in shapes:
        group = module.specialization_key(shape)
        for config in _shape_configs(spec, shape, profile, configs, max_configs):
            key = (group, *(v for p, v in config.items() if p not in spec.runtime_params))
            if key not in seen:
                seen.add(key)
                jobs.append(BinaryJob(shape, config, spec.name))
    return jobs


def attention_jobs(shapes: Sequence[AttentionShape], profile: HardwareProfile, *, max_configs: int | None = None,
                   configs: ShapeConfigs | None = None) -> list[BinaryJob]:
    """One job per distinct binary an attention sweep of `shapes` on `profile` compiles: per
    `attention.specialization_key`, each legal config (every parameter of the space is a constexpr).
    `max_configs`: only the first that many configs of each shape; `configs(shape)`: other configs."""
    return _distinct_jobs(KERNELS["attention"], shapes, profile, max_configs, configs)


def moe_jobs(shapes: Sequence[MoeShape], profile: HardwareProfile, *, max_configs: int | None = None,
             configs: ShapeConfigs | None = None) -> list[BinaryJob]:
    """One job per distinct binary a fused-MoE sweep of `shapes` on `profile` compiles: per `moe.specialization_key`,
    the legal configs distinct in all but GROUP_SIZE_M (a run-time integer). `max_configs`: only the first that
    many configs of each shape; `configs(shape)`: other configs."""
    return _distinct_jobs(KERNELS["moe"], shapes, profile, max_configs, configs)


def gemm_jobs(shapes: Sequence[GemmShape], profile: HardwareProfile, *, max_configs: int | None = None,
              configs: ShapeConfigs | None = None) -> list[BinaryJob]:
    """GEMM: per `specialization_key`, the legal configs and the tutorial extras (or `configs(shape)`: e.g. a
    backfill's), distinct in (FIXUP, BLOCK_N2, BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) (GROUP_M and
    SPLIT_K are runtime integers); then one reduction per `reduce_key` of the shapes with a split-K config that
    sums in the reduction kernel. `max_configs`: only the first that many configs of each shape."""
    seen, reduced = set(), set()
    jobs, reduce_jobs = [], []
    for shape in shapes:
        listed = _shape_configs(KERNELS["gemm"], shape, profile, configs, max_configs)
        group = gemm.specialization_key(shape)
        for config in listed:
            fixup = gemm.uses_fixup(config)  # a constexpr: its own binary, compiled with its SPLIT_K
            key = (group, fixup, gemm.composite_cols(config),
                   *(config[p] for p in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")))
            if key not in seen:
                seen.add(key)
                jobs.append(BinaryJob(shape, config if fixup else _with_split(config, 1)))
        split = next((c for c in listed if c["SPLIT_K"] > 1 and not gemm.uses_fixup(c)), None)
        if split is not None and reduce_key(shape) not in reduced:
            reduced.add(reduce_key(shape))
            reduce_jobs.append(BinaryJob(shape, split, "reduce"))
    # reductions after the GEMMs: their GEMM binaries are then mostly built
    return jobs + reduce_jobs


def binary_jobs(shapes: Sequence[Shape], profile: HardwareProfile, *, max_configs: int | None = None,
                configs: ShapeConfigs | None = None) -> list[BinaryJob]:
    """One job per distinct binary a sweep of `shapes` on `profile` compiles: each registered family's `jobs`
    over its shapes, families in registry order (GEMM's, then attention's, then MoE's). `configs(shape)`:
    the configs of each shape (e.g. a backfill's) instead of its legal configs and extras; `max_configs`:
    only the first that many configs of each shape."""
    jobs = []
    for spec in KERNELS.values():
        mine = [s for s in shapes if kernel_of(s) is spec]
        if mine:
            jobs += load_implementation(spec.jobs)(mine, profile, max_configs=max_configs, configs=configs)
    return jobs


# --- building ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PrebuildSummary:
    jobs: int
    compiled: int
    failed: dict[BinaryJob, str] = field(default_factory=dict)  # job -> its compile error
    seconds: float = 0.0


class OverSharedMemory(RuntimeError):
    """A binary needs more shared memory per block than the GPU has: it would not launch there."""


def _compile_job(shape: Shape, job: BinaryJob, device: str, *, arch: int, warp_size: int,
                 smem_limit: int | None = None) -> float:
    """A CompilePool warmup: compile `job` for `arch`; returns the seconds spent. Raises OverSharedMemory
    where a compiled kernel's shared memory is above `smem_limit` bytes (the binary still lands in the cache)."""
    started = time.perf_counter()
    with offline_target(arch, warp_size):
        kernels = load_implementation(kernel_of(shape).module).compile_kernels(shape, job.config)
    shared = max(k.metadata.shared for k in kernels)
    if smem_limit is not None and shared > smem_limit:
        raise OverSharedMemory(f"{shared} bytes of shared memory, over the GPU's {smem_limit} per block")
    return time.perf_counter() - started


@contextmanager
def _compile_env(cache_dir: Path) -> Iterator[None]:
    """os.environ for workers spawned inside the block (they copy it at start): the cache being built,
    no interpreter."""
    saved = {name: os.environ.get(name) for name in ("TRITON_CACHE_DIR", "TRITON_INTERPRET")}
    os.environ["TRITON_CACHE_DIR"] = str(cache_dir)
    os.environ.pop("TRITON_INTERPRET", None)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def prebuild(jobs: Sequence[BinaryJob], cache_dir: str | os.PathLike, *, workers: int | None = None,
             arch: int = 90, warp_size: int = 32, on_done: Callable[[int], None] | None = None,
             smem_limit: int | None = None) -> PrebuildSummary:
    """Compile `jobs` for `arch` into the Triton cache `cache_dir`, in `workers` spawned processes
    (default: one per core; 0: in this process, which must not be interpreting). A failed compile, or
    with `smem_limit` (the GPU's shared memory per block, bytes) a binary above it, is recorded in the
    summary, never raised; jobs already in the cache are loads."""
    if workers == 0 and interpreter_active():
        raise InterpreterActive("TRITON_INTERPRET is set in this process: build with workers > 0")
    cache = Path(cache_dir).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    compile_job = functools.partial(_compile_job, arch=arch, warp_size=warp_size, smem_limit=smem_limit)
    compile_job.needs_torch = False  # its workers compile offline (kernels/harness/compile_pool.py `_forgo_torch`)
    started = time.perf_counter()
    with _compile_env(cache), CompilePool(compile_job, workers=workers) as pool:
        results = pool.compile([(job.shape, job) for job in jobs], on_done=on_done)
    failed = {job: result for job, result in results.items() if isinstance(result, str)}
    return PrebuildSummary(len(results), len(results) - len(failed), failed, time.perf_counter() - started)


# --- carrying it to the GPU machine -------------------------------------------------------------------

def triton_key_sha256() -> str:
    """What must match between builder and GPU machine for a cache hit (module docstring): `triton_key()`,
    Triton's version and the hashes of its compiler's sources and of libtriton.so."""
    from triton.runtime.cache import triton_key

    return hashlib.sha256(triton_key().encode()).hexdigest()


def ptxas_key(arch: int) -> str | None:
    """The CUDA backend's part of a binary's cache key for `arch` (`ptxas --version` of the ptxas Triton calls
    for it, then the arch); None where Triton finds no ptxas."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    try:
        return make_backend(GPUTarget("cuda", arch, 32)).hash()
    except (RuntimeError, OSError, subprocess.SubprocessError):
        return None


def ptxas_release(key: str | None) -> str:
    """A `ptxas_key` in one line: its release and build."""
    if key is None:
        return "no ptxas"
    lines = [line.strip() for line in key.splitlines() if line.startswith(("Cuda compilation tools", "Build "))]
    return "; ".join(lines) or key.strip()


def cache_env() -> dict[str, str]:
    """Triton's cache-invalidating environment variables as set here (part of every binary's key)."""
    from triton._C.libtriton import get_cache_invalidating_env_vars

    return dict(sorted(get_cache_invalidating_env_vars().items()))


def fp_fusion() -> bool:
    """Whether a kernel launched without `enable_fp_fusion` fuses multiplies and adds (an option in its key)."""
    language = triton.knobs.language
    return bool(language.default_fp_fusion and not getattr(language, "force_disable_fp_fusion", False))


def kernel_sources() -> dict[str, str]:
    """Each registered kernel module's source digest: a binary's key holds its jitted functions' source, so an
    archive built from other sources is not found for the kernels that changed."""
    return {spec.module: file_digest(importlib.util.find_spec(spec.module).origin) for spec in KERNELS.values()}


def compile_environment(archs: Sequence[int]) -> dict:
    """What of this process's Triton enters a binary's key besides the kernel and its config: the triton key's
    hash, the ptxas of each arch (`ptxas_key`), the cache-invalidating environment and the default fp fusion."""
    return {"triton_key_sha256": triton_key_sha256(), "ptxas": {str(arch): ptxas_key(arch) for arch in archs},
            "cache_env": cache_env(), "fp_fusion": fp_fusion()}


def environment_warnings(built_with: dict) -> list[str]:
    """How this process would key binaries otherwise than the build that `built_with` (an archive's PREBUILD.json)
    records, one line per difference: each means the archive's binaries are not found here and recompile. A
    field the manifest lacks (an archive from before it was recorded) is not compared."""
    warnings = []
    if built_with.get("triton_key_sha256") != triton_key_sha256():
        warnings.append(f"built with triton {built_with.get('triton')} on Python {built_with.get('python')}, whose "
                        f"cache keys differ from this triton's ({triton.__version__} on Python "
                        f"{platform.python_version()}): these binaries will not be found")
    for arch, built in sorted(built_with.get("ptxas", {}).items()):
        here = ptxas_key(int(arch))
        if here != built:
            warnings.append(f"built with another ptxas for sm_{arch}: {ptxas_release(built)}; here "
                            f"{ptxas_release(here)}: its binaries will recompile")
    if "cache_env" in built_with and built_with["cache_env"] != cache_env():
        warnings.append(f"built under Triton's cache-invalidating variables {built_with['cache_env']}, here "
                        f"{cache_env()} (TRITON_DEFAULT_FP_FUSION=1 as the build?): the binaries will recompile")
    if "fp_fusion" in built_with and built_with["fp_fusion"] != fp_fusion():
        warnings.append(f"built with fp fusion {'on' if built_with['fp_fusion'] else 'off'}, here "
                        f"{'on' if fp_fusion() else 'off'}: the binaries will recompile")
    changed = sorted(m for m, digest in built_with.get("kernel_sources", {}).items()
                     if kernel_sources().get(m, digest) != digest)
    if changed:
        warnings.append(f"kernel sources changed since the build ({', '.join(changed)}): where a jitted function "
                        "changed, its binaries will recompile (rebuild the archive from this tree)")
    return warnings


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    tar.addfile(info, io.BytesIO(data))


def _open_for_writing(tar_path: str | os.PathLike) -> tarfile.TarFile:
    """xz at preset 9 where the name ends in .xz (.tar.xz, .txz), else gzip."""
    if str(tar_path).endswith(".xz"):
        return tarfile.open(tar_path, "w:xz", preset=9)
    return tarfile.open(tar_path, "w:gz")


def pack(cache_dir: str | os.PathLike, tar_path: str | os.PathLike) -> int:
    """Write `cache_dir`'s binaries, metadata and group files (no IR or PTX: a cache hit reads only a
    group's files that exist) to the tar.xz or tar.gz `tar_path` (`_open_for_writing`), paths relative to
    `cache_dir`, with a PREBUILD.json naming the build's cache dir, targets, triton, Python and what else
    keys the binaries (`compile_environment`, `kernel_sources`). Group files list only packed children.
    Returns the number of cache entries packed; unpack with `unpack` (module docstring)."""
    cache = Path(cache_dir).resolve()
    entries = sorted(d for d in cache.iterdir() if d.is_dir() and any(d.glob(f"{GROUP_PREFIX}*.json")))
    archs = set()
    with _open_for_writing(tar_path) as tar:
        for entry in entries:
            for path in sorted(entry.iterdir()):
                if not path.name.endswith(PACKED_SUFFIXES):
                    continue
                name = str(path.relative_to(cache))
                if not path.name.startswith(GROUP_PREFIX):
                    tar.add(path, arcname=name)
                    if path.suffix == ".json":  # a binary's metadata (or another of Triton's JSON files)
                        archs.add(json.loads(path.read_text()).get("target", {}).get("arch"))
                    continue
                children = json.loads(path.read_text())["child_paths"]
                kept = {c: p for c, p in children.items() if c.endswith(PACKED_SUFFIXES) and Path(p).is_file()}
                _add_bytes(tar, name, json.dumps({"child_paths": kept}).encode())
        archs = sorted(archs - {None})
        manifest = {"cache_dir": str(cache), "archs": archs, "entries": len(entries),
                    "triton": triton.__version__, "python": platform.python_version(), **compile_environment(archs),
                    "kernel_sources": kernel_sources()}
        _add_bytes(tar, MANIFEST, json.dumps(manifest, indent=1).encode())
    return len(entries)


@dataclass(frozen=True)
class UnpackSummary:
    cache_dir: str
    files: int
    groups: int
    built_with: dict  # the archive's PREBUILD.json
    same_triton: bool  # this triton makes the builder's cache keys: its binaries will be hits here
    warnings: tuple[str, ...] = ()  # each way this process keys binaries otherwise (`environment_warnings`)


def unpack(tar_path: str | os.PathLike, cache_dir: str | os.PathLike | None = None) -> UnpackSummary:
    """Extract a `pack` archive (tar.gz or tar.xz) into `cache_dir` (default: Triton's, `triton.knobs.cache.dir`)
    and point its group files there; the summary says whether its binaries will be found here."""
    cache = Path(cache_dir if cache_dir is not None else triton.knobs.cache.dir).resolve()
    try:
        tar = tarfile.open(tar_path, "r:*")
    except (OSError, tarfile.TarError) as exc:
        reason = str(exc).splitlines()[0]  # r:* lists each compression's failure, one a line
        raise PrebuildError(f"{tar_path}: not a readable tar.gz or tar.xz ({reason})") from None
    with tar:
        try:
            built_with = json.load(tar.extractfile(MANIFEST))
        except KeyError:
            raise PrebuildError(f"{tar_path}: no {MANIFEST}; not made by `prebuild build`") from None
        except (ValueError, tarfile.TarError) as exc:
            raise PrebuildError(f"{tar_path}: unreadable {MANIFEST} ({exc})") from None
        if not isinstance(built_with, dict):
            raise PrebuildError(f"{tar_path}: {MANIFEST} is not a JSON object")
        members = [m for m in tar.getmembers() if m.isfile() and m.name != MANIFEST]
        cache.mkdir(parents=True, exist_ok=True)
        tar.extractall(cache, members=members, filter="data")
    groups = [cache / m.name for m in members if Path(m.name).name.startswith(GROUP_PREFIX)]
    for group in groups:
        children = json.loads(group.read_text())["child_paths"]
        # Triton writes a group's children beside the group file (one directory per cache key), so the
        # new path is the group's directory and the child's name, whatever the build's cache dir was.
        moved = {c: str(group.parent / Path(p).name) for c, p in children.items()}
        temp = group.with_suffix(".tmp")
        temp.write_text(json.dumps({"child_paths": {c: p for c, p in moved.items() if Path(p).is_file()}}))
        os.replace(temp, group)  # a Triton reading the cache meanwhile sees the old or the new file
    return UnpackSummary(str(cache), len(members), len(groups), built_with,
                         built_with.get("triton_key_sha256") == triton_key_sha256(),
                         tuple(environment_warnings(built_with)))


# --- command line -------------------------------------------------------------------------------------

def read_shapes(path: str | os.PathLike, kernel: str = "gemm") -> list[Shape]:
    """A `rooftune sweep KERNEL` --shapes file (the kernel's shape-list reader), its errors as PrebuildError."""
    try:
        return KERNELS[kernel].load_list(path)
    except ShapeListError as exc:
        raise PrebuildError(str(exc)) from None


def build_and_pack(jobs: Sequence[BinaryJob], cache: str | os.PathLike, profile: HardwareProfile, *,
                   arch: int | None = None, workers: int | None = None, tar: str | os.PathLike | None = None,
                   ) -> PrebuildSummary:
    """`prebuild` the jobs for `arch` (default the profile's) with a progress bar, each binary checked against the
    profile's shared memory per block where `arch` is its own; print failures and the summary; pack into `tar`."""
    arch = arch or arch_of(profile)
    columns = (TextColumn("compiling"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns) as progress:
        task = progress.add_task("compile", total=len(jobs))
        # The profile's per-block limit holds for its own architecture only (--arch may name another).
        limit = profile.smem_per_block_bytes if arch == arch_of(profile) else None
        summary = prebuild(jobs, cache, workers=workers, arch=arch, smem_limit=limit,
                           on_done=lambda k: progress.advance(task, k))
    for job, error in summary.failed.items():
        print(f"failed: {job.shape} {job.config} ({job.kind}): {error}")
    print(f"compiled {summary.compiled} of {summary.jobs}, failed {len(summary.failed)}; {summary.seconds:.0f} s")
    if limit is not None and not summary.failed:
        print(f"every binary fits {profile.name}'s {limit} bytes of shared memory per block")
    if tar:
        entries = pack(cache, tar)
        print(f"packed {entries} cache entries into {tar}; on the GPU machine, with the same Python "
              f"and triton: python -m rooftune.kernels.harness.prebuild unpack {Path(tar).name} [--cache DIR]")
    return summary


def _build(args: argparse.Namespace) -> None:
    shapes = [s for path in args.shapes for s in read_shapes(path, args.kernel)]
    try:
        profile = load_profile(args.gpu)
    except ProfileError as exc:
        raise PrebuildError(str(exc)) from None
    arch = args.arch or arch_of(profile)
    jobs = binary_jobs(shapes, profile, max_configs=args.max_configs)
    print(f"{len(shapes)} shapes -> {len(jobs)} binaries for sm_{arch} into {args.cache}", flush=True)
    build_and_pack(jobs, args.cache, profile, arch=arch, workers=args.workers, tar=args.tar)


def _unpack(args: argparse.Namespace) -> None:
    done = unpack(args.tar, args.cache)
    for warning in done.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    verdict = ("keyed as built (triton, ptxas, environment, kernels): cache hits" if not done.warnings
               else f"{len(done.warnings)} difference(s) from the build: these binaries will recompile")
    print(f"unpacked {done.files} files ({done.groups} binaries) into {done.cache_dir}; {verdict}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m rooftune.kernels.harness.prebuild", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="compile a sweep's binaries into a Triton cache (and pack it), each "
                                "checked against the profile's shared memory per block")
    build.add_argument("--shapes", nargs="+", required=True, help="JSON shape lists, as for `rooftune sweep`")
    build.add_argument("--kernel", choices=sorted(KERNELS), default="gemm", help="the kernel the lists are of")
    build.add_argument("--gpu", required=True, help="hardware profile: a shipped name (h200) or a JSON path")
    build.add_argument("--arch", type=int, help="compute capability as an integer, e.g. 90 (default: the profile's)")
    build.add_argument("--cache", required=True, help="the Triton cache dir to build into")
    build.add_argument("--workers", type=int, help="compile processes (default: one per core)")
    build.add_argument("--tar", help="then pack the cache into this .tar.xz (xz, preset 9) or .tar.gz")
    build.add_argument("--max-configs", type=int, help="only the first N configs of each shape (a smoke test)")
    build.set_defaults(run=_build)
    unpacking = commands.add_parser("unpack", help="extract a packed cache and point its group files there")
    unpacking.add_argument("tar", help="the .tar.xz or .tar.gz that `build --tar` wrote")
    unpacking.add_argument("--cache", help="the Triton cache dir (default: triton.knobs.cache.dir)")
    unpacking.set_defaults(run=_unpack)
    args = parser.parse_args(argv)
    try:
        args.run(args)
    except PrebuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    # The package's module, not this __main__ copy: the spawned workers unpickle the jobs from it.
    from rooftune.kernels.harness.prebuild import main as package_main

    package_main()


def moe_fp8_jobs(shapes: Sequence[MoeFp8Shape], profile: HardwareProfile, *, max_configs: int | None = None,
                 configs: ShapeConfigs | None = None) -> list[BinaryJob]:
    """As `moe_jobs`, for the FP8 fused MoE (`moe_fp8.specialization_key`: the MoE's and the scale layout)."""
    return _distinct_jobs(KERNELS["moe-fp8"], shapes, profile, max_configs, configs)
