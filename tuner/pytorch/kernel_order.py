"""The generic model's order of any Triton kernel's configs for one call: each config read from its compiled binary
and its IR (kernels/introspect/analyze.py), costed (roofline/generic.py, times the generic residual where one is
shipped for the GPU and the installed Triton release), fastest first.

The fallback: a config that could not be read (its grid, lowering, compile or IR) gets no prediction and comes
after every predicted one, in the user's order; where none could be read, the user's order stands, with the reason
(`Ordering.fallback`), which `rooftune.autotune` warns of once. Nothing here raises into the user's call: an
unexpected failure of the analysis itself is a fallback too.

The compile workers are started once per process and kept (`shared_pool`): $ROOFTUNE_COMPILE_WORKERS sets how many
(0: compile in the calling process), default every core this process may use.
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from rooftune.hwprofiles import HardwareProfile
from rooftune.hwprofiles.hwprobe import installed_triton
from rooftune.roofline.generic import GenericBreakdown, predict_generic
from rooftune.roofline.generic_residual import GenericResidual, shipped_generic_residual

WORKERS_ENV = "ROOFTUNE_COMPILE_WORKERS"
_pools: dict = {}
# Where this process's last `generic_order` spent its seconds: "pool" (starting the compile workers, once per
# process), "residual" (finding the shipped one), the analysis's "lower", "read", "launcher" and "compile"
# (kernels/introspect/analyze.py `analyze_calls`), and "rank".
last_seconds: dict[str, float] = {}


@dataclass(frozen=True)
class Ordering:
    """`order`: indices into the configs, predicted fastest first, then the unpredicted in the user's order;
    `analyses`: each config's analysis or error; `predicted`: the indices with a row in `breakdown` (in its row
    order) and `corrected_us` their time with the residual's factor; `fallback`: why the user's order stands."""

    order: list[int]
    analyses: list = field(default_factory=list)
    predicted: list[int] = field(default_factory=list)
    breakdown: GenericBreakdown | None = None
    corrected_us: np.ndarray | None = None
    residual: GenericResidual | None = None
    fallback: str | None = None


def compile_workers() -> int | None:
    """$ROOFTUNE_COMPILE_WORKERS as a count (None: every usable core)."""
    text = os.environ.get(WORKERS_ENV, "").strip()
    if not text:
        return None
    try:
        return max(0, int(text))
    except ValueError:
        raise ValueError(f"${WORKERS_ENV} must be a whole number of compile workers, got {text!r}") from None


def shared_pool():
    """This process's compile pool for user kernels (None with 0 workers), started on first use, kept until exit."""
    from rooftune.kernels.introspect.analyze import analysis_pool

    workers = compile_workers()
    if workers == 0:
        return None
    if workers not in _pools:
        _pools[workers] = pool = analysis_pool(workers)
        atexit.register(pool.close, kill=True)
    return _pools[workers]


def warm_up() -> None:
    """Start now, in the background, what this process's first tune of a new key would otherwise start and wait for:
    the compile workers (`shared_pool`), the hash of Triton's own files (kernels/introspect/lowering.py
    `prefetch_triton_key`) and, on a GPU, Triton's CUDA utilities (a C build: `warm_launchers`). For a program with
    a start-up of its own (a serving engine loading its weights): called first, the first new key finds them ready.
    Returns at once. A bad $ROOFTUNE_COMPILE_WORKERS is a ValueError, as a tune's would be."""
    from rooftune.kernels.introspect.lowering import prefetch_triton_key, warm_launchers

    shared_pool()
    prefetch_triton_key()
    threading.Thread(target=warm_launchers, args=({},), name="rooftune-cuda-utils", daemon=True).start()


def pool_ready_seconds() -> float | None:
    """Seconds this process's compile pool took to start every worker (None: none started, or not yet ready)."""
    ready = [p.ready_seconds() for p in _pools.values()]
    return max((r for r in ready if r is not None), default=None)


def rank_analyses(analyses: list, profile: HardwareProfile, residual: GenericResidual | None) -> Ordering:
    """The order of analysed configs (module docstring)."""
    from rooftune.kernels.introspect.analyze import ConfigAnalysis

    predicted = [i for i, a in enumerate(analyses) if isinstance(a, ConfigAnalysis)]
    if not predicted:
        why = "; ".join(sorted({f"{a.stage}: {a.error}" for a in analyses}))[:400]
        return Ordering(list(range(len(analyses))), analyses, fallback=f"no config could be read ({why})")
    counts = [analyses[i].counts for i in predicted]
    bd = predict_generic(counts, profile)
    factor = np.exp(residual.correction(bd, counts)) if residual is not None else np.ones(len(predicted))
    corrected = np.where(bd.fits, bd.time_us * factor, np.inf)
    ranked = [predicted[j] for j in np.argsort(corrected, kind="stable")]
    rest = [i for i in range(len(analyses)) if i not in set(predicted)]
    return Ordering(ranked + rest, analyses, predicted, bd, corrected, residual)


def generic_order(kernel, configs: list, args: dict, grid, profile: HardwareProfile, *,
                  residual: GenericResidual | str | None = "shipped") -> Ordering:
    """`configs` of `kernel` on the call `args` with launch `grid` ranked by the generic model on `profile`
    ('shipped': the shipped generic residual where there is one; None: the model alone). Never raises."""
    last_seconds.clear()
    try:
        from rooftune.kernels.harness.offline import arch_of
        from rooftune.kernels.introspect.analyze import analyze

        started = time.perf_counter()
        pool = shared_pool()
        last_seconds["pool"], started = time.perf_counter() - started, time.perf_counter()
        chosen = shipped_generic_residual(profile, installed_triton()) if residual == "shipped" else residual
        last_seconds["residual"] = time.perf_counter() - started
        analyses = analyze(kernel, configs, args, grid, arch=arch_of(profile), pool=pool, phases=last_seconds)
        started = time.perf_counter()
        ranked = rank_analyses(analyses, profile, chosen)
        last_seconds["rank"] = time.perf_counter() - started
        return ranked
    except Exception as exc:  # the user's call goes on in their order
        return Ordering(list(range(len(configs))), fallback=f"the analysis failed: {type(exc).__name__}: {exc}"[:400])
