"""A user's kernel lowered to Triton IR in the calling process, for one config and one call: the half of a compile
that needs the user's program (the Python function, its globals), so that compile workers never import it.

`lower` specializes the kernel as a launch of the call would (Triton's own binder: integer arguments equal to 1
become constants, divisibility by 16 is marked, tensors' alignment read), catching Triton's compile request
through its `jit_cache_hook` (which then compiles nothing), runs Triton's frontend and its TTIR passes, and
returns the TTIR text with the backend options and the hash of the cache key that very launch will look up. A
compile worker (kernels/introspect/binary.py) compiles the text from there and stores the binary under that key,
so the launches of the configs then timed load it instead of compiling again.

The lowering runs on a fresh copy of the kernel's JITFunction, for the profile's architecture (a stand-in
driver: kernels/harness/offline.py `stand_in_target`), so the user's kernel object keeps no state of it. Under
Triton's interpreter (TRITON_INTERPRET=1) the kernel's Python function is lowered as a JITFunction, in the view of
the process kernels/introspect/interpreted.py makes for the frontend.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from triton import knobs
from triton._C.libtriton import ir
from triton.backends.compiler import GPUTarget
from triton.compiler.compiler import ASTSource, get_cache_invalidating_env_vars, make_backend
from triton.runtime.cache import get_cache_key
from triton.runtime.jit import JITFunction

from rooftune.kernels.harness.offline import stand_in_target
from rooftune.kernels.introspect.interpreted import frontend_view


class LoweringError(RuntimeError):
    """The kernel could not be lowered for this config and call (its message says why)."""


@dataclass(frozen=True)
class LoweredConfig:
    """One config's kernel as Triton IR: the TTIR text (after Triton's TTIR passes), the backend options a
    compile takes, the target, and the hash of the cache key a launch of it looks up (`launch_hash`)."""

    name: str
    ttir: str
    options: dict
    arch: int
    warp_size: int
    launch_hash: str
    triton_key: str = ""  # the lowering process's Triton key (`triton_identity`), that a compile worker adopts
    triton_file: str = ""


def jit_function(kernel) -> tuple[JITFunction, dict]:
    """A fresh JITFunction of `kernel` (a JITFunction, an interpreted one, or a `triton.heuristics` wrapper around
    either) and the heuristics' functions by meta-parameter ({} without)."""
    heuristics: dict = {}
    while not isinstance(kernel, JITFunction) and hasattr(kernel, "fn"):
        if hasattr(kernel, "values") and isinstance(kernel.values, dict):
            heuristics = {**kernel.values, **heuristics}
        if type(kernel).__name__ == "InterpretedFunction":
            return JITFunction(kernel.fn, **kernel.kwargs), heuristics
        kernel = kernel.fn
    if not isinstance(kernel, JITFunction):
        raise LoweringError(f"{type(kernel).__name__} is not a Triton kernel (@triton.jit)")
    return JITFunction(kernel.fn, version=kernel.version, do_not_specialize=kernel.do_not_specialize,
                       do_not_specialize_on_alignment=kernel.do_not_specialize_on_alignment, debug=kernel.debug,
                       noinline=kernel.noinline, launch_metadata=kernel.launch_metadata), heuristics


def _compile_request(fn: JITFunction, kwargs: dict) -> dict:
    """What Triton asks to compile for a launch with `kwargs` (its jit_cache_hook's `compile`), nothing compiled."""
    captured: dict = {}

    def hook(*, key, repr, fn, compile, is_manual_warmup, already_compiled):
        captured.update(compile)
        return True  # skip the compile: only the request is wanted

    previous = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = hook
    try:
        fn.run(grid=(1,), warmup=True, **kwargs)
    finally:
        knobs.runtime.jit_cache_hook = previous
    if not captured:
        raise LoweringError("Triton asked for no compile (a kernel already in this process's cache?)")
    return captured


@dataclass(frozen=True)
class LoweredIR:
    """A config's TTIR before its launch key: what `lower_ir` makes and `with_launch_key` completes. The key hashes
    Triton's own files once per process (`triton_identity`), so a list's TTIRs can be made while that runs."""

    name: str
    ttir: str
    arch: int
    warp_size: int
    source: Any
    backend: Any
    options: Any
    env_vars: dict


def lower_ir(kernel, config, args: dict[str, Any], arch: int, warp_size: int = 32, *,
             copy: tuple[JITFunction, dict] | None = None, sources: dict | None = None) -> LoweredIR:
    """`lower`'s first half: `kernel` with `config` specialized for the call `args` and run through Triton's frontend
    and TTIR passes (arguments as `lower`'s)."""
    fn, heuristics = copy if copy is not None else jit_function(kernel)
    kwargs = {**args, **config.all_kwargs()}
    for name, heuristic in heuristics.items():
        kwargs[name] = heuristic(kwargs)
    kwargs = {k: v for k, v in kwargs.items() if k in fn.arg_names or k in _OPTION_NAMES}
    with stand_in_target(arch, warp_size), frontend_view(fn):
        request = _compile_request(fn, kwargs)
        target = GPUTarget("cuda", arch, warp_size)
        backend = make_backend(target)
        options = backend.parse_options(_options_of(request))
        source = ASTSource(fn, request["signature"], request["constants"], request["configs"][0])
        if sources is not None:
            sources.setdefault(repr((sorted(source.signature.items()), sorted(source.constants, key=repr))), source)
        env_vars = get_cache_invalidating_env_vars()
        same_ir = _ttir_key(source, options, env_vars, arch, warp_size)
        ttir = _ttir_memo.get(same_ir)
        if ttir is None:  # made before the launch key: the text is the same under any hash (test_lowering.py)
            ttir = _frontend(source, backend, target, options, env_vars, same_ir)
            if len(_ttir_memo) >= TTIR_MEMO_SIZE:
                _ttir_memo.pop(next(iter(_ttir_memo)))
            _ttir_memo[same_ir] = ttir
    return LoweredIR(fn.__name__, ttir, arch, warp_size, source, backend, options, env_vars)


def with_launch_key(ir: LoweredIR) -> LoweredConfig:
    """`lower`'s second half: the hash of the cache key the config's launch will look up, and the config as a
    compile worker takes it."""
    await_triton_key()
    with stand_in_target(ir.arch, ir.warp_size):
        key = get_cache_key(ir.source, ir.backend, ir.options, ir.env_vars)
    return LoweredConfig(ir.name, ir.ttir, dict(ir.options.__dict__), ir.arch, ir.warp_size,
                         hashlib.sha256(key.encode()).hexdigest(), *triton_identity())


def lower(kernel, config, args: dict[str, Any], arch: int, warp_size: int = 32, *,
          copy: tuple[JITFunction, dict] | None = None, sources: dict | None = None) -> LoweredConfig:
    """`kernel` with `config` (a triton.Config) on the call `args` (by parameter name), lowered for compute
    capability `arch` (e.g. 90). `copy`: `jit_function(kernel)`, made once for a list of configs (a lowering
    compiles nothing, so the copy keeps nothing between configs; its source's hash and argument binder are
    computed once). `sources`, where given, keeps the launch's source per launcher it needs (`warm_launchers`).
    Raises LoweringError, or Triton's own error where its frontend fails."""
    return with_launch_key(lower_ir(kernel, config, args, arch, warp_size, copy=copy, sources=sources))


_key_thread: threading.Thread | None = None


def prefetch_triton_key() -> None:
    """Start computing this process's Triton key (`triton_identity`) in a thread, where it is not known yet: hashing
    releases the GIL, so a list's frontends run meanwhile; `with_launch_key` waits for it."""
    global _key_thread
    from triton.runtime import cache as triton_cache

    known = getattr(triton_cache.triton_key, "cache_info", None)
    if _key_thread is not None or known is None or known().currsize:
        return
    _key_thread = threading.Thread(target=triton_identity, name="rooftune-triton-key", daemon=True)
    _key_thread.start()


def triton_key_ready() -> bool:
    """Whether `with_launch_key` would find the Triton key known now, without waiting."""
    thread = _key_thread
    return thread is None or not thread.is_alive()


def await_triton_key() -> None:
    """Wait for `prefetch_triton_key`'s thread, where one runs (the key is then known: nothing hashes twice)."""
    global _key_thread
    thread = _key_thread
    if thread is not None:
        thread.join()
        _key_thread = None


def triton_identity() -> tuple[str, str]:
    """(Triton's key of its own files, the file that computes it) in this process: the key hashes the compiler's
    files, libtriton's ~0.4 GB among them (0.4 s on a CPU here, once per process); a compile worker given it by the
    process that lowered the config skips that hashing before its first compile (binary.py `adopt_triton_key`).
    ("", "") where this Triton has no such key."""
    from triton.runtime import cache as triton_cache

    compute = getattr(triton_cache, "triton_key", None)
    return (compute(), triton_cache.__file__) if callable(compute) else ("", "")


def warm_launchers(sources: dict) -> int:
    """Build now, into Triton's cache, what the first launch of each source of `sources` builds with the host's C
    compiler: Triton's CUDA utilities (once per process) and the kernel's launcher (one C module per signature).
    Done in a side thread while the list lowers and compiles, the first config timed finds both built. It uses the
    NVIDIA backend's own classes, not `driver.active` (which a lowering's stand-in target replaces for its moment).
    Best effort: skipped where CUDA is not available or a signature holds tensor descriptors (their launcher
    depends on the binary), any failure ignored (the launch builds it then, as it would have). The launchers
    built."""
    try:
        from triton.backends.nvidia import driver as nvidia

        if not nvidia.CudaDriver.is_active():  # no GPU here (a CPU, the interpreter)
            return 0
        nvidia.CudaUtils()
    except Exception:
        return 0
    built = 0
    for source in list(sources.values()):
        if any("tensordesc" in str(kind) for kind in source.signature.values()):
            continue
        stub = SimpleNamespace(tensordesc_meta=None, num_ctas=1, global_scratch_size=0, global_scratch_align=1,
                               profile_scratch_size=0, profile_scratch_align=1, launch_cooperative_grid=False,
                               launch_pdl=False)
        try:
            nvidia.CudaLauncher(source, stub)
            built += 1
        except Exception:
            continue
    return built


# Options that reach a compile only after TTIR (its TTGIR conversion and the passes after it): configs that differ
# in nothing else share one TTIR text, lowered once (a list's configs are mostly its tiles × these).
AFTER_TTIR_OPTIONS = ("num_warps", "num_stages")
TTIR_MEMO_SIZE = 512
_ttir_memo: dict[str, str] = {}


def _ttir_key(source: ASTSource, options, env_vars: dict, arch: int, warp_size: int) -> str:
    """What one TTIR text depends on: the kernel's source, its specialization, and every option but
    AFTER_TTIR_OPTIONS (checked: tests/kernels/introspect/test_lowering.py lowers both ways)."""
    kept = {k: v for k, v in sorted(options.__dict__.items()) if k not in AFTER_TTIR_OPTIONS}
    return hashlib.sha256(repr((source.hash(), kept, sorted(env_vars.items()), arch, warp_size)).encode()).hexdigest()


# Launch options a config or a call may set beside the kernel's parameters.
_OPTION_NAMES = {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_cooperative_grid",
                 "launch_pdl", "debug"}


def _options_of(request: dict) -> dict:
    """The backend options of a compile request (as Triton's `preload` reads them back)."""
    options = json.loads(request["specialization_data"])["options"]
    return {k: tuple(v) if isinstance(v, list) else v for k, v in options.items()}


def _frontend(source: ASTSource, backend, target: GPUTarget, options, env_vars: dict, launch_hash: str) -> str:
    """Triton's frontend and TTIR passes on `source` (what `triton.compile` runs before its TTGIR stage)."""
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = source.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                            context)
    stages: dict = {}
    backend.add_stages(stages, options, source.language)
    metadata = {"hash": launch_hash, "target": target, **options.__dict__, **env_vars}
    return str(stages["ttir"](module, metadata))
