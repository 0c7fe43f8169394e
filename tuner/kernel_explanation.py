"""What `rooftune explain kernel` and `rooftune.explain_kernel` show for any Triton kernel: its configs on one call
ranked as `rooftune.autotune` ranks them (tuner/pytorch/kernel_order.py), each config's predicted breakdown, the
best one's loops and terms, and the stated rules the counts applied; a config that could not be read, and why.

`explain_kernel(kernel, args, grid)`: `kernel` is a `@rooftune.autotune` (or `@triton.autotune`) kernel, whose
configs it ranks, or a `@triton.jit` one with `configs=`; `args` the call's arguments by parameter name; `grid` the
launch grid (a tuple or a callable of the meta-parameters). `print(explanation)` prints its table.
`explain_script(path, name)`: the same for a script whose function `name()` returns (kernel, args, grid) or
(kernel, args, grid, configs), what `rooftune explain kernel SCRIPT --call NAME` runs.
"""

from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass

import numpy as np

from rooftune.hwprofiles import HardwareProfile, load_profile
from rooftune.inputs import check_input
from rooftune.roofline.generic import LIMITERS, TERMS
from rooftune.tuner.pytorch.autotune import call_device
from rooftune.tuner.pytorch.kernel_order import Ordering, generic_order
from rooftune.tuner.pytorch.ops import device_profile

COLUMNS = ("#", "config", "µs", "model µs", "resid ×", "bound", "dominant", "CTA/SM", "occ", "waves", "wave eff",
           "regs", "smem KiB", "spill B", "DRAM MB", "wgmma")
# A config's whole-GPU terms, as the breakdown names them, in the order the best config's line lists them.
TERM_FIELDS = (("tensor", "compute_us"), ("vector", "vector_us"), ("sfu", "sfu_us"), ("smem", "smem_us"),
               ("L2", "l2_us"), ("DRAM", "memory_us"), ("latency", "latency_us"), ("serial", "serial_us"),
               ("launch", "launch_us"))


def triton_config_label(config) -> str:
    """'BLOCK=256 w4 s1': a triton.Config's meta-parameters, warps and stages."""
    meta = " ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{meta} w{config.num_warps} s{config.num_stages}".strip()


@dataclass(frozen=True)
class KernelExplanation:
    """One call's ranking (`ordering`) of `configs` of kernel `name` on `profile`."""

    name: str
    profile: str
    configs: list
    ordering: Ordering

    def rows(self, top: int | None = None) -> list[dict[str, str]]:
        """The table's rows (COLUMNS -> text), predicted configs fastest first, then those the model could not read."""
        o, bd = self.ordering, self.ordering.breakdown
        row_of = {i: j for j, i in enumerate(o.predicted)}
        out = []
        for rank, i in enumerate(o.order[:top], start=1):
            cells = dict.fromkeys(COLUMNS, "")
            cells.update({"#": str(rank), "config": triton_config_label(self.configs[i])})
            if i in row_of and bd is not None:
                cells.update(_cells(bd, row_of[i], float(o.corrected_us[row_of[i]])))
            else:
                cells["µs"] = "not read"
            out.append(cells)
        return out

    def details(self) -> list[str]:
        """Lines on the best predicted config (its terms, loops, rules) and on each config that was not read."""
        o, lines = self.ordering, []
        if o.fallback is not None:
            lines.append(f"the given order stands: {o.fallback}")
        if o.breakdown is not None and o.predicted:
            lines += _best_lines(self, o)
        for i, analysis in enumerate(o.analyses):
            if hasattr(analysis, "stage"):
                lines.append(f"not read: {triton_config_label(self.configs[i])}: {analysis.stage}: {analysis.error}")
        return lines

    def __str__(self) -> str:
        rows = self.rows()
        widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in COLUMNS}
        head = "  ".join(c.ljust(widths[c]) for c in COLUMNS)
        body = ["  ".join(r[c].ljust(widths[c]) for c in COLUMNS) for r in rows]
        return "\n".join([f"{self.name} on {self.profile}: {len(self.configs)} configs as rooftune ranks them",
                          head, *body, *self.details()])


def _cells(bd, j: int, corrected_us: float) -> dict[str, str]:
    return {"µs": f"{corrected_us:.2f}", "model µs": f"{bd.time_us[j]:.2f}",
            "resid ×": f"{corrected_us / bd.time_us[j]:.3f}", "bound": str(bd.bound[j]),
            "dominant": TERMS[int(bd.dominant[j])],
            "CTA/SM": f"{bd.ctas_per_sm[j]} {LIMITERS[int(bd.occupancy_limiter[j])]}",
            "occ": f"{bd.occupancy[j]:.0%}", "waves": f"{bd.waves[j]:.2f}", "wave eff": f"{bd.wave_efficiency[j]:.2f}",
            "regs": str(bd.regs_per_thread[j]), "smem KiB": f"{bd.smem_bytes_per_cta[j] / 1024:.1f}",
            "spill B": str(bd.local_bytes_per_thread[j]), "DRAM MB": f"{bd.dram_bytes[j] / 1e6:.2f}",
            "wgmma": "yes" if bd.uses_wgmma[j] else "no"}


def _best_lines(explanation: KernelExplanation, o: Ordering) -> list[str]:
    """The best predicted config's whole-GPU terms, its call's counts, its loops with their mean trips, its rules."""
    i = o.order[0]
    j, bd, analysis = o.predicted.index(i), o.breakdown, o.analyses[i]
    counts = analysis.counts
    terms = ", ".join(f"{name} {getattr(bd, field)[j]:.2f}" for name, field in TERM_FIELDS)
    flops = ", ".join(f"{d} {f / 1e9:.3g} GFLOP" for d, f in counts.mma_flops) or "no dot"
    lines = [f"best predicted: {triton_config_label(explanation.configs[i])}: each term alone (µs): {terms}",
             (f"  grid {analysis.grid} = {counts.programs} programs; {flops}; loads {counts.load_bytes / 1e6:.3g} MB, "
              f"stores {counts.store_bytes / 1e6:.3g} MB, DRAM {bd.dram_bytes[j] / 1e6:.3g} MB; "
              f"{counts.vector_ops / 1e6:.3g} M elementwise, {counts.sfu_ops / 1e6:.3g} M special-function results")]
    lines += [f"  {loop.describe()}: {trips:g} trips per program on average"
              for loop, trips in zip(analysis.work.loops, analysis.loop_trips)]
    lines += [f"  rule: {note}" for note in counts.notes]
    if o.residual is not None:
        parts = o.residual.contributions(bd, [a.counts for a in (o.analyses[k] for k in o.predicted)])[j]
        lines.append("  residual: " + ", ".join(f"{name} ×{np.exp(v):.3g}" for name, v in parts))
    return lines


def _profile(profile, args: dict) -> HardwareProfile:
    if isinstance(profile, HardwareProfile):
        return profile
    return load_profile(profile) if profile is not None else device_profile(call_device(args))


def explain_kernel(kernel, args: dict, grid, *, configs=None, profile: HardwareProfile | str | None = None,
                   residual="shipped") -> KernelExplanation:
    """`kernel`'s configs on the call `args` with launch `grid`, ranked and explained (module docstring).
    `profile`: a HardwareProfile, a shipped name or path, or None (the call's device's, as rooftune.autotune finds
    it); `residual`: 'shipped', None (the model alone) or a GenericResidual."""
    configs = list(configs if configs is not None else getattr(kernel, "configs", None) or ())
    if not configs:
        raise ValueError("explain_kernel needs configs: a @rooftune.autotune / @triton.autotune kernel, or configs=")
    fn = getattr(kernel, "fn", kernel) if hasattr(kernel, "configs") else kernel
    chosen = _profile(profile, args)
    ordering = generic_order(fn, configs, args, grid, chosen, residual=residual)
    return KernelExplanation(getattr(fn, "__name__", "kernel"), chosen.name, configs, ordering)


class ScriptError(ValueError):
    """A script `rooftune explain kernel` cannot explain: missing, no such function, or an unusable return."""


def script_call(path, name: str) -> tuple:
    """(kernel, args, grid, configs or None) that the function `name` of the Python script at `path` returns: the
    script is imported (its `if __name__ == "__main__":` block does not run) and `name()` called."""
    path = check_input(path)
    if not path.is_file():
        raise ScriptError(f"{path}: no such script")
    spec = importlib.util.spec_from_file_location(f"rooftune_explained_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses and pickling look the module up by name
    spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if not callable(function):
        raise ScriptError(f"{path} defines no function {name!r} (it returns the kernel, the call's arguments by "
                          f"name and the grid)")
    returned = function()
    if not isinstance(returned, tuple) or len(returned) not in (3, 4) or not isinstance(returned[1], dict):
        raise ScriptError(f"{path}: {name}() must return (kernel, args dict, grid) or (kernel, args dict, grid, "
                          f"configs); got {type(returned).__name__}")
    return (*returned, None) if len(returned) == 3 else returned


def explain_script(path, name: str, profile, residual="shipped") -> KernelExplanation:
    """`explain_kernel` on the call the script's function `name` returns (`script_call`)."""
    kernel, args, grid, configs = script_call(path, name)
    return explain_kernel(kernel, args, grid, configs=configs, profile=profile, residual=residual)
