"""Which config rooftune's PyTorch ops (kernels/ops.py) run: a tune cache entry, a tune on first use, or
the zero-trial pick; resolved once per (shape, device) in a process.

The cache is the one `rooftune tune` writes (tuner/cache.py's `TuneCache` at `cache_path`), keyed exactly as there for a budget of
TUNE_BUDGET (`tune_key`: GPU profile, shape, space version, kernel digest, Triton version, residual), so a shape
tuned from the command line is found by the ops and a shape the ops tune is found by the command.
Where it is: $ROOFTUNE_CACHE, else ~/.cache/rooftune/tune.json ($XDG_CACHE_HOME for ~/.cache).
The GPU's profile: $ROOFTUNE_PROFILE (a shipped name or a JSON path), else the shipped profile for
the GPU's driver name (hwprofiles/shipped.py); CPU tensors run in Triton's interpreter, which has no
GPU to name, and get INTERPRETER_PROFILE's configs; a tune asked for there (`tune=True`, $ROOFTUNE_TUNE=1) has
no GPU to time on, so they run the untuned choice below, with one warning.

Where the tune (cached or on first use) timed the library's own op (cuBLAS through torch.matmul, SDPA)
faster than its winner, side by side in its confirming pass, the answer is LIBRARY_ROUTE and the op runs
the library's op for that shape: a tuned shape runs whichever of the two its tune timed faster. An untuned shape
(the zero-trial pick, nothing measured) runs the library's op where the shipped route (tuner/routing.py, fitted
on the training sets' recorded library times) does not predict the pick clearly faster, and wherever no shipped
route applies (a GPU, Triton release or residual no route was fitted for: nothing recorded there says the pick beats
the library, and an untuned op must not lose to it). $ROOFTUNE_KERNEL_ONLY=1 keeps rooftune's kernel either way (to
benchmark it, or to run the kernel through the interpreter on a CPU).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

from rooftune.candidates import LIBRARY_ROUTE, Config, kernel_of, legal_configs, no_legal_config
from rooftune.environment import env_flag
from rooftune.hwprofiles import HardwareProfile, load_profile
from rooftune.hwprofiles.hwprobe import NoGpuError, installed_triton
from rooftune.hwprofiles.shipped import shipped_profile_name
from rooftune.tuner.cache import CACHE_ENV, TuneCache, cache_path, tune_key
from rooftune.tuner.live_tune import tune_shape
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.routing import route_choice, untuned_choice
from rooftune.tuner.tune import TuneResult

PROFILE_ENV = "ROOFTUNE_PROFILE"
KERNEL_ONLY_ENV = "ROOFTUNE_KERNEL_ONLY"
TUNE_BUDGET = 20  # `rooftune tune`'s default: the cache key holds the budget
INTERPRETER_PROFILE = "h200"

# (shape, device, tune, the environment that locates cache and profile or keeps the kernel) -> the answer
_memo: dict[tuple, Config | str] = {}
_no_gpu_warned: list[bool] = []  # non-empty once this process has warned that no GPU can time a tune


def device_profile(device) -> HardwareProfile:
    """The profile the model ranks configs with for a torch.device (module docstring)."""
    if os.environ.get(PROFILE_ENV):
        return load_profile(os.environ[PROFILE_ENV])
    if device.type == "cpu":
        return load_profile(INTERPRETER_PROFILE)
    import torch

    return load_profile(shipped_profile_name(torch.cuda.get_device_name(device)))


def library_faster(result: TuneResult) -> bool:
    """Whether `result`'s tune timed the library's op faster than its winner (side by side, live only)."""
    return result.baseline_us is not None and result.baseline_us < result.time_us


def tune_or_none(shape, profile: HardwareProfile, cache: Path) -> TuneResult | None:
    """A live tune of `shape` within TUNE_BUDGET configs (stored in the cache); None, with a warning, on a
    machine without a GPU to time it on (the CPU runs Triton's interpreter): the untuned choice serves."""
    try:
        return tune_shape(shape, profile, TUNE_BUDGET, cache=cache)
    except NoGpuError:  # one message for every shape, kept here: Python's own once-per-place registry is cleared
        if not _no_gpu_warned:  # whenever anything changes the warning filters (an import can)
            _no_gpu_warned.append(True)
            warnings.warn("rooftune: no GPU to tune on (a tune times configs on a CUDA GPU); the op runs its "
                          "untuned choice", RuntimeWarning, stacklevel=2)
        return None


def choose_config(shape, profile: HardwareProfile, cache: Path, tune: bool, kernel_only: bool = False) -> Config | str:
    """The cache's winner for `shape` on `profile`; else, with `tune`, the winner of a live tune
    within TUNE_BUDGET configs (stored in the cache); else the zero-trial pick (model + shipped
    residual, nothing measured). LIBRARY_ROUTE instead of a tune's winner where that tune timed the
    library's op faster, and instead of the zero-trial pick where the shipped route sends the untuned op to
    the library or no shipped route applies, unless `kernel_only`. Raises TuneCacheError, NoLegalConfigError,
    TuneError."""
    spec = kernel_of(shape)
    triton = installed_triton()  # one release for the residual and the route beside it
    residual = shipped_residual(spec, profile, triton)
    result = TuneCache(cache).get(tune_key(shape, profile, TUNE_BUDGET, residual))
    if result is None and tune:
        result = tune_or_none(shape, profile, cache)
        if result is not None and result.cache_error:  # the winner stands for this process; the next one tunes the shape again
            warnings.warn(f"rooftune: the tune of {shape} was not kept: {result.cache_error}", RuntimeWarning,
                          stacklevel=2)
    if result is not None:
        return LIBRARY_ROUTE if library_faster(result) and not kernel_only else result.winner
    configs = legal_configs(spec.space, shape, profile).configs
    route = route_choice(spec, profile, residual, triton)[0]
    choice = untuned_choice(shape, configs, profile, residual, route, kernel_only)
    if choice is None:
        raise no_legal_config(spec.name, shape, profile)
    return LIBRARY_ROUTE if choice.library else choice.pick


def resolve_config(shape, device, tune: bool) -> Config | str:
    """`choose_config` for `shape` on a torch.device, once per process for each shape, device, `tune`
    and setting of the environment variables that locate the cache and the profile or keep the kernel."""
    env = tuple(os.environ.get(name) for name in (CACHE_ENV, PROFILE_ENV, "XDG_CACHE_HOME", KERNEL_ONLY_ENV))
    key = (shape, str(device), tune, env)
    config = _memo.get(key)
    if config is None:
        config = _memo[key] = choose_config(shape, device_profile(device), cache_path(), tune,
                                            env_flag(KERNEL_ONLY_ENV))
    return config


def clear_memo() -> None:
    """Forget every resolved config (the next call of each op reads the cache again) and that the no-GPU warning
    was given."""
    _memo.clear()
    _no_gpu_warned.clear()


def torch_ops():
    """kernels/ops.py with `resolve_config` installed: what `rooftune.matmul` and the others come from."""
    from rooftune.kernels import ops

    ops.set_config_resolver(resolve_config)
    return ops
