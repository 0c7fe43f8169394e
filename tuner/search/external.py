"""Baselines from outside libraries for `rooftune eval gemm`: Optuna's TPE sampler (`tpe`) and NVIDIA's
nvMatmulHeuristics (`nvmmh`), each present only where its optional extra imports."""

from __future__ import annotations

import functools
import importlib
import math
from dataclasses import dataclass

import numpy as np

from rooftune.candidates import Config, GemmShape, Trial
from rooftune.hwprofiles import HardwareProfile
from rooftune.tuner.search.strategies import (
    MeasureBatch,
    Strategy,
    measure_in_order,
    nearest_legal,
    nearest_legal_twins,
)

TPE_SEEDS = tuple(range(5))


def importable(module: str) -> bool:
    """Whether `module` imports here (an optional extra installed and working)."""
    try:
        importlib.import_module(module)
    except ImportError:
        return False
    return True


def _shape_seed(seed: int, shape) -> int:
    """One sampler seed per (seed, shape), so shapes do not share one sequence of draws."""
    salt = [ord(ch) for ch in str(shape)]
    return int(np.random.SeedSequence([seed, *salt]).generate_state(1)[0])


def tpe_strategy(seed: int) -> Strategy:
    """Optuna's TPE sampler (its defaults: the first 10 trials are its own random start-up draws)
    choosing `budget` configs, one trial at a time, minimizing log time; a failed trial is worse than
    any success (+inf: TPE ranks values only).

    The choice is encoded per parameter: one categorical over each parameter's values among the
    shape's candidates, and the suggested point mapped to its nearest legal config not yet measured
    (`nearest_legal_twins` over the unmeasured candidates; the suggestion itself where legal). TPE
    models each parameter's good and bad values, which carries what a trial teaches (BLOCK_K 64 is
    good) to unmeasured configs; a single categorical over the candidates' indices (hundreds to
    thousands of them) would learn nothing within 20 trials that it could apply to an index not yet
    tried: it is random search. Mapping to an unmeasured config spends every trial on a new config."""

    def strategy(shape, candidates: list[Config], measure: MeasureBatch, budget: int,
                 profile: HardwareProfile) -> list[Trial]:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        if not candidates:
            return []
        names = list(candidates[0])
        domain = {n: sorted({c[n] for c in candidates}) for n in names}
        study = optuna.create_study(direction="minimize",
                                    sampler=optuna.samplers.TPESampler(seed=_shape_seed(seed, shape)))
        left = list(candidates)
        trials: list[Trial] = []
        while left and len(trials) < budget:
            asked = study.ask()
            values = {n: asked.suggest_categorical(n, domain[n]) for n in names}
            warps, stages = values.pop("num_warps"), values.pop("num_stages")
            point = Config.make(warps, stages, **values)
            config = nearest_legal_twins([point], left)[0]
            left.remove(config)
            trial = measure([config])[0]
            trials.append(trial)
            study.tell(asked, math.log(trial.time_us) if trial.ok else math.inf)
        return trials

    strategy.__name__ = f"tpe({seed})"
    return strategy


# nvMatmulHeuristics' precision strings: A and B, compute, C and D (its header's supported list).
NVMMH_PRECISION = {"bf16": "BSB", "fp16": "HSH", "fp32": "SSS", "tf32": "SFS"}
# Its predefined GPUs, found by a word of the profile's name.
NVMMH_GPUS = {"H200": "H200_SXM", "H100": "H100_SXM", "A100": "A100_SXM_80GB", "B200": "B200"}
# As many configs as it will give: it returns about 3 to 11 per shape, whatever is asked.
NVMMH_REQUEST = 64


@functools.cache
def _nvmmh(precision: str, layout: int, gpu: str):
    """One library handle (with its discovery data loaded for `layout`) and hardware descriptor per
    process. The handle is never destroyed: nvMatmulHeuristics 0.1.0.27 crashes (SIGSEGV) in
    nvMatmulHeuristicsDestroy, which its wrapper calls when the handle is collected."""
    import nvMatmulHeuristics as nv

    class Heuristics(nv.NvMatmulHeuristicsInterface):
        def __del__(self):
            pass

    lib = Heuristics(nv.NvMatmulHeuristicsTarget.TRITON, precision=precision,
                     flags=nv.NvMatmulHeuristicsFlags.PERF_MODEL_BASED_AUTO_TUNING)
    descriptor = lib.createHardwareDescriptor()
    lib.setHardwarePredefinedGpu(descriptor, nv.NvMatmulHeuristicsNvidiaGpu[gpu])
    lib.loadInternalDiscoverySet(nv.NvMatmulHeuristicsMatmulLayout(layout), descriptor)
    return lib, descriptor


def nvmmh_gpu(profile: HardwareProfile) -> str | None:
    """nvMatmulHeuristics' predefined GPU for `profile` (by a word of its name), or None: it knows no other."""
    return next((g for word, g in NVMMH_GPUS.items() if word in profile.name), None)


def nvmmh_unknown_gpu(profile: HardwareProfile) -> str:
    return (f"nvMatmulHeuristics has no predefined GPU for {profile.name} (it knows "
            f"{', '.join(NVMMH_GPUS)}), so it cannot propose configs for it")


def nvmmh_configs(shape: GemmShape, profile: HardwareProfile, names: list[str]) -> list[Config]:
    """nvMatmulHeuristics' configs for `shape` on `profile`'s GPU (Triton target, its perf-model
    ranking), best first, in the space's terms: BLOCK_* the CTA tile, num_warps the CTA tile over the
    warp tile, GROUP_M the grid swizzle, SPLIT_K its split; `names` are the space's parameters, in order."""
    import nvMatmulHeuristics as nv

    gpu = nvmmh_gpu(profile)
    if gpu is None:
        raise ValueError(nvmmh_unknown_gpu(profile))
    layout = nv.boolsToNvMatmulHeuristicsLayout(shape.a_layout == "km", shape.layout == "nk")
    lib, descriptor = _nvmmh(NVMMH_PRECISION[shape.dtype], int(layout), gpu)
    configs = []
    for found in lib.get_with_mnk(shape.m, shape.n, shape.k, layout, NVMMH_REQUEST, descriptor):
        k = found["kernel"]
        warps = (k.cta_tile_m // k.warp_tile_m) * (k.cta_tile_n // k.warp_tile_n) * (k.cta_tile_k // k.warp_tile_k)
        params = {"BLOCK_M": k.cta_tile_m, "BLOCK_N": k.cta_tile_n, "BLOCK_K": k.cta_tile_k,
                  "GROUP_M": k.swizzle_factor, "SPLIT_K": k.split_k}
        configs.append(Config.make(warps, k.stages, **{n: params[n] for n in names if n in params}))
    return configs


def nvmmh_strategy(shape, candidates: list[Config], measure: MeasureBatch, budget: int,
                   profile: HardwareProfile) -> list[Trial]:
    """nvMatmulHeuristics' top configs in its order, each mapped to its nearest legal twin (repeats
    dropped): at most the few it proposes, however large the budget. A GEMM method (`external_gemm_methods`)."""
    if not candidates:
        return []
    names = [n for n in candidates[0] if n not in ("num_warps", "num_stages")]
    return measure_in_order(nearest_legal(nvmmh_configs(shape, profile, names), candidates), measure, budget)


nvmmh_strategy.__name__ = "nvmmh"


def external_gemm_methods(seeds=TPE_SEEDS, profile: HardwareProfile | None = None) -> dict:
    """The outside-library GEMM baselines whose package imports here: `tpe` (one strategy per seed,
    like `random`) and `nvmmh` (where it knows `profile`'s GPU; None: not checked)."""
    methods: dict = {}
    if importable("optuna"):
        methods["tpe"] = [tpe_strategy(seed) for seed in seeds]
    if importable("nvMatmulHeuristics") and (profile is None or nvmmh_gpu(profile) is not None):
        methods["nvmmh"] = nvmmh_strategy
    return methods


@dataclass(frozen=True)
class Unavailable:
    """Why an outside-library baseline cannot run here; `installed`: its package imports (so it was expected to run,
    and leaving it out deserves a note), else the extra to install."""

    why: str
    installed: bool


def unavailable_gemm_methods(profile: HardwareProfile) -> dict[str, Unavailable]:
    """The outside-library GEMM baselines that `external_gemm_methods` leaves out for `profile`, with why."""
    missing: dict[str, Unavailable] = {}
    if not importable("optuna"):
        missing["tpe"] = Unavailable('Optuna is not installed: pip install -e ".[tpe]"', False)
    if not importable("nvMatmulHeuristics"):
        missing["nvmmh"] = Unavailable('nvMatmulHeuristics is not installed: pip install -e ".[nvmmh]"', False)
    elif nvmmh_gpu(profile) is None:
        missing["nvmmh"] = Unavailable(nvmmh_unknown_gpu(profile), True)
    return missing
