"""`rooftune.autotune`: `@triton.autotune` for any Triton kernel, benchmarking only the `budget` configs
rooftune's model ranks fastest, in that order, and keeping the choice per key.

On the first call for a new key (Triton's: the `key` arguments' values and the tensor arguments' dtypes) the
user's configs, after their own `prune_configs_by`, are ranked by one of two models:
- the generic model (the default): each config compiled in parallel workers that never import the user's program
  and read from its binary and its IR (tuner/pytorch/kernel_order.py: occupancy, waves and the work of the call),
  costed by roofline/generic.py (times the shipped generic residual where one is fitted for this GPU). A config that
  cannot be read comes after the others; where none can, the given order stands, with one warning. Its binary
  stays in Triton's cache under its launch's key, so timing it compiles nothing again;
- with `gemm=` or `layout=` (a GEMM-like kernel, as before the generic model): the configs read as rooftune GEMM
  configs (`rooftune_config`) and ranked by the GEMM model with its shipped residual (`corrected_prior`), blind
  to the user's epilogue.
The GPU's profile is found as the ops find it (tuner/pytorch/ops.py `device_profile`: $ROOFTUNE_PROFILE, else the
shipped one by GPU name; a ProfileError naming the fix on another GPU). The first `budget` are timed with Triton's
own benchmarking (`do_bench`, `reset_to_zero`, `restore_value`, hooks: Triton's Autotuner, kernels/autotune.py).
The fastest is kept in memory and in autotune.json beside the tune cache (`autotune_cache_path`): a file of its
own, since its entries are a user kernel's configs, not `rooftune tune` results.
"""

from __future__ import annotations

import hashlib
import numbers
import warnings
from pathlib import Path

import numpy as np

from rooftune.candidates import Config, GemmShape, kernel_spec
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.outputs import OutputError
from rooftune.tuner.cache import CacheFile, cache_path
from rooftune.tuner.pytorch.kernel_order import generic_order
from rooftune.tuner.pytorch.ops import device_profile
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.search.strategies import corrected_prior

AUTOTUNE_CACHE_FORMAT = "rooftune-autotune-cache-1"
# rooftune's GEMM parameter <- the names a user's kernel may give it (the Triton tutorial's first)
PARAM_NAMES = {
    "BLOCK_M": ("BLOCK_SIZE_M", "BLOCK_M"),
    "BLOCK_N": ("BLOCK_SIZE_N", "BLOCK_N"),
    "BLOCK_K": ("BLOCK_SIZE_K", "BLOCK_K"),
    "GROUP_M": ("GROUP_SIZE_M", "GROUP_M"),
    "SPLIT_K": ("SPLIT_K", "SPLIT_SIZE_K"),
}
PARAM_DEFAULTS = {"GROUP_M": 1, "SPLIT_K": 1}  # absent: no grouped tile order, no split of K
TORCH_DTYPE_NAMES = {"torch.float16": "fp16", "torch.bfloat16": "bf16", "torch.float32": "fp32"}


def rooftune_config(triton_config) -> Config | None:
    """The rooftune GEMM config a `triton.Config` stands for: its tile parameters under rooftune's names
    (PARAM_NAMES; GROUP_M and SPLIT_K default to 1), then its other integer parameters, kept as they
    are and ignored by the model; None where a BLOCK_M, BLOCK_N or BLOCK_K is missing."""
    kwargs = dict(triton_config.kwargs)
    params: dict[str, int] = {}
    for name, aliases in PARAM_NAMES.items():
        given = next((kwargs.pop(a) for a in aliases if a in kwargs), PARAM_DEFAULTS.get(name))
        if given is None:
            return None
        params[name] = int(given)
    params.update((k, int(v)) for k, v in kwargs.items() if isinstance(v, int) and k not in params)
    return Config.make(triton_config.num_warps, triton_config.num_stages, **params)


def gemm_shape(args: dict, dims: tuple[str, str, str], layout) -> GemmShape:
    """The GemmShape of a call: M, N, K from the arguments named `dims`; B's layout given ('kn', 'nk')
    or read from the names of B's strides (stride along K, stride along N): 'kn' where the N stride is 1,
    'nk' where the K stride is; the dtype of the first tensor argument (A)."""
    m, n, k = (int(args[d]) for d in dims)
    if not isinstance(layout, str):
        stride_k, stride_n = (int(args[name]) for name in layout)
        # Neither stride 1 (a strided view): the model has no such layout; 'kn' is the nearer guess.
        layout = "nk" if stride_k == 1 and stride_n != 1 else "kn"
    a = _first_tensor(args)
    dtype = TORCH_DTYPE_NAMES.get(str(a.dtype))
    if dtype is None:
        raise ValueError(f"rooftune.autotune models fp16, bf16 and fp32 GEMMs; the first tensor argument is {a.dtype}")
    return GemmShape(m, n, k, layout=layout, dtype=dtype)


def _first_tensor(args: dict):
    return next(v for v in args.values() if hasattr(v, "dtype"))


def call_device(args: dict):
    """The device of a call: its first tensor's (a tensor descriptor's tensor's); CUDA's where it has none."""
    for value in args.values():
        device = getattr(getattr(value, "base", value), "device", None)
        if device is not None and hasattr(device, "type"):
            return device
    import torch

    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def model_order(triton_configs: list, shape: GemmShape, profile) -> list:
    """`triton_configs` fastest first by the model (+ the shipped residual); configs the model cannot
    place (no tile size, or over a per-block limit of `profile`) after them, in their given order."""
    views = [rooftune_config(c) for c in triton_configs]
    known = [i for i, v in enumerate(views) if v is not None]
    model_configs = [Config.make(views[i].num_warps, views[i].num_stages,
                                 **{name: views[i][name] for name in PARAM_NAMES}) for i in known]
    residual = shipped_residual(kernel_spec("gemm"), profile)
    fitting, prior = corrected_prior(shape, model_configs, profile, residual)
    log_us = dict(zip(fitting, prior.tolist()))
    # stable: configs equal in the model's eyes (differing only in what it ignores) keep the user's order
    scored = [(log_us[c], i) for i, c in zip(known, model_configs) if c in log_us]
    ranked = [i for _, i in sorted(scored, key=lambda s: s[0])]
    placed = set(ranked)
    return [triton_configs[i] for i in ranked] + [c for i, c in enumerate(triton_configs) if i not in placed]


# --- the persistent cache ------------------------------------------------------------------------------

def autotune_cache_path() -> Path:
    """autotune.json beside the tune cache (tuner/cache.py `cache_path`: $ROOFTUNE_CACHE's folder, else
    ~/.cache/rooftune)."""
    return cache_path().with_name("autotune.json")


def autotune_cache() -> CacheFile:
    """The autotune cache file (tuner/cache.py `CacheFile`: read whole, written atomically)."""
    return CacheFile(autotune_cache_path(), AUTOTUNE_CACHE_FORMAT, kind="autotune")


def entry_key(profile_name: str, kernel_id: str, tuning_key: tuple, candidates: list, order: str) -> str:
    """GPU profile | kernel (name and source digest) | the installed Triton (a choice made under another
    compiler is made again) | Triton's key | digest of the candidates (the user's configs after their own pruning,
    in order) and `order` (which model and budget chose among them): what a process about to tune the key knows
    before it orders anything, so that a stored choice is found without compiling the list."""
    digest = hashlib.sha256("\n".join([order, *map(str, candidates)]).encode()).hexdigest()[:12]
    return "|".join((profile_name, kernel_id, f"triton={installed_triton()}", repr(tuning_key), digest))


def stored_choice(stored, candidates: list):
    """The config of `candidates` an autotune cache entry names; a ValueError saying what is wrong where the entry is
    not {"config": one of `candidates`, "time_ms": {config: ms}} with a finite, positive time for the config it names
    (tuner/cache.py `CacheFile.entry` then ignores it, with a warning, and the configs are timed again)."""
    if not isinstance(stored, dict):
        raise ValueError(f"an entry must be a JSON object, got {type(stored).__name__}")
    times = stored.get("time_ms")
    if not isinstance(times, dict):
        raise ValueError(f"time_ms must map configs to times, got {times!r}")
    choice = next((c for c in candidates if str(c) == stored.get("config")), None)
    if choice is None:
        raise ValueError(f"its config {stored.get('config')!r} is none of the kernel's configs")
    time = times.get(str(choice))
    if isinstance(time, bool) or not isinstance(time, (int, float)) or not np.isfinite(time) or time <= 0:
        raise ValueError(f"its config's time {time!r} ms is not a finite, positive time")
    return choice


def _median_ms(timing) -> float:
    return float(timing[0] if isinstance(timing, (list, tuple)) else timing)


# --- the decorator -------------------------------------------------------------------------------------

def _names(value) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)


def check_arguments(configs, key, gemm, layout, budget) -> None:
    """The decorator's arguments, before it sees the kernel: TypeError or ValueError saying which is wrong."""
    if isinstance(budget, bool) or not isinstance(budget, numbers.Integral):
        raise TypeError(f"rooftune.autotune: budget must be an int (configs to time per key), got {budget!r}")
    if budget < 1:
        raise ValueError(f"rooftune.autotune: budget must be at least 1, got {budget}")
    if not isinstance(configs, (list, tuple)) or not configs:
        raise ValueError(f"rooftune.autotune: configs must be a non-empty list of triton.Config (the configs the "
                         f"model orders and the budget's first are timed), got {configs!r}")
    odd = [c for c in configs if not (hasattr(c, "kwargs") and hasattr(c, "num_warps"))]
    if odd:
        raise TypeError(f"rooftune.autotune: configs must be triton.Config objects, got {odd[0]!r}")
    if not _names(key):
        raise TypeError(f"rooftune.autotune: key must be a list of the kernel's argument names, got {key!r}")
    if gemm is not None and (not _names(gemm) or len(gemm) != 3):
        raise ValueError(f"rooftune.autotune: gemm names the kernel's M, N and K arguments, three names such as "
                         f"('M', 'N', 'K'); got {gemm!r}")
    if layout is not None and layout not in ("kn", "nk") and not (_names(layout) and len(layout) == 2):
        raise ValueError(f"rooftune.autotune: layout is 'kn', 'nk' or the names of B's two strides (along K, "
                         f"along N), e.g. ('stride_bk', 'stride_bn'); got {layout!r}")


def check_kernel(fn, key, dims: tuple[str, ...], layout) -> None:
    """The decorated function: a Triton kernel (@triton.jit, under the decorator) whose arguments include the
    names `key`, `dims` (the GEMM view's) and a `layout` of stride names give; TypeError or ValueError naming
    what is not."""
    from triton.runtime.jit import KernelInterface

    if not isinstance(fn, KernelInterface) or not hasattr(fn, "arg_names"):
        raise TypeError(f"rooftune.autotune decorates a Triton kernel: put @triton.jit under it (got "
                        f"{getattr(fn, '__qualname__', type(fn).__name__)})")
    wanted = {"key": list(key), "gemm": list(dims), "layout": [] if isinstance(layout, str) else list(layout)}
    for what, names in wanted.items():
        missing = [n for n in names if n not in fn.arg_names]
        if missing:
            raise ValueError(f"rooftune.autotune: {what} names {', '.join(map(repr, missing))}, not an argument of "
                             f"{getattr(fn, '__name__', 'the kernel')}({', '.join(fn.arg_names)})")


def autotune(configs, key, *, gemm=None, layout=None, budget: int = 20, prune_configs_by=None, reset_to_zero=None,
             restore_value=None, pre_hook=None, post_hook=None, warmup=None, rep=None, use_cuda_graph=False,
             do_bench=None, cache_results=False):
    """`triton.autotune` (same arguments, same behaviour) that times at most `budget` of `configs` per new key, in
    the model's order (module docstring): the generic model of any kernel, or with `gemm` or `layout` the GEMM
    model. `gemm`: the names of the kernel's M, N and K arguments (default ('M', 'N', 'K') where `layout` alone is
    given); `layout`: B's layout, 'kn' ([K, N] row-major, the default) or 'nk' ([N, K], an nn.Linear weight), or
    the names of B's (K, N) strides to read it from each call. `cache_results` is accepted for Triton's signature;
    the choice is always kept in autotune.json (`autotune_cache_path`). Arguments that cannot work are refused
    here, at decoration (`check_arguments`, `check_kernel`), not at the first call."""
    check_arguments(configs, key, gemm, layout, budget)
    gemm_view = gemm is not None or layout is not None
    dims = tuple(gemm or ("M", "N", "K")) if gemm_view else ()
    layout = layout or "kn"

    order_id = f"{'gemm' if gemm_view else 'generic'} model, budget {budget}"

    def entry_id(kernel_id, tuning_key, candidates, args) -> str:
        return entry_key(device_profile(call_device(args)).name, kernel_id, tuning_key, candidates, order_id)

    def recall(kernel_id, tuning_key, candidates, args):
        return autotune_cache().entry(entry_id(kernel_id, tuning_key, candidates, args),
                                      lambda key, stored: stored_choice(stored, candidates))

    def remember(kernel_id, tuning_key, candidates, args, choice, timings):
        times = {str(c): _median_ms(t) for c, t in timings.items()}
        if not any(np.isfinite(t) for t in times.values()):  # every config failed: nothing worth keeping
            return
        key = entry_id(kernel_id, tuning_key, candidates, args)
        try:  # the file is read again just before writing: another process may have written since
            autotune_cache().put_entry(key, {"config": str(choice), "time_ms": times})
        except OutputError as exc:  # the choice stands for this process; only its keeping failed
            warnings.warn(f"rooftune.autotune: the choice was not kept: {exc}", RuntimeWarning, stacklevel=2)

    def decorator(fn):
        from rooftune.kernels.autotune import OrderedAutotuner

        check_kernel(fn, key, dims, layout if gemm_view else "kn")

        def order(candidates: list, args: dict) -> list:
            profile = device_profile(call_device(args))
            if gemm_view:
                return model_order(candidates, gemm_shape(args, dims, layout), profile)[:budget]
            return generic_model_order(fn, candidates, args, profile)[:budget]

        return OrderedAutotuner(fn, configs, key, order=order, recall=recall, remember=remember,
                                reset_to_zero=reset_to_zero, restore_value=restore_value, pre_hook=pre_hook,
                                post_hook=post_hook, prune_configs_by=prune_configs_by, warmup=warmup, rep=rep,
                                use_cuda_graph=use_cuda_graph, do_bench=do_bench, cache_results=cache_results)

    return decorator


# What Triton's launch passes beside the kernel's arguments (kernels/autotune.py sees them in the call).
LAUNCH_KEYWORDS = ("grid", "warmup")


def generic_model_order(fn, candidates: list, call: dict, profile) -> list:
    """`candidates` in the generic model's order for the call (its arguments and `grid`, as the launch passes
    them); the given order, with one warning naming why, where the model could read none of them."""
    args = {k: v for k, v in call.items() if k not in LAUNCH_KEYWORDS}
    ordering = generic_order(fn, candidates, args, call.get("grid", (1,)), profile)
    if ordering.fallback is not None:
        warnings.warn(f"rooftune.autotune: {getattr(fn, '__name__', 'the kernel')}'s configs are timed in the given "
                      f"order: {ordering.fallback}", RuntimeWarning, stacklevel=4)
    return [candidates[i] for i in ordering.order]
