"""Pictures for `rooftune eval`, `report` and `explain --plot`: one function per picture, each drawing
plain data (lists of numbers and labels) into a file. matplotlib is an optional extra (`.[plot]`),
imported inside the functions; figures are drawn without pyplot (no window, no global state) and
written only once complete, whole or not at all."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np

from rooftune.eval.scoring.metrics import WORST_FRACTION
from rooftune.outputs import write_atomic
from rooftune.tuner.cli.args import ArgumentError, check_output

INSTALL_HINT = 'pip install -e ".[plot]"'
FORMATS = ("png", "svg", "pdf")
# The mission's bar for the mean score within 20 configs (README, "Where it stands").
TARGET_SCORE = 0.98
_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


def check_plot(path: str | Path | None, inputs=()) -> None:
    """Before any work, for a command's --plot: the file can be written, its suffix names a format
    (PNG, SVG or PDF), it is none of the command's `inputs`, and matplotlib is installed; else an ArgumentError (exit 2) saying which."""
    if path is None:
        return
    check_output(path, "--plot", inputs=inputs)
    if Path(path).suffix.lstrip(".").lower() not in FORMATS:
        raise ArgumentError(f"--plot {path}: give a file ending in {', '.join('.' + f for f in FORMATS)}")
    require_matplotlib()


def require_matplotlib() -> None:
    """Raise ArgumentError (exit 2 from the CLI) naming the extra to install, where matplotlib is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ArgumentError(f"--plot needs matplotlib, an optional extra: {INSTALL_HINT}") from None


def _figure(width_in: float = 7.5, height_in: float = 5.0):
    """A Figure on its own Agg canvas: not registered with pyplot, and no global backend switched."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _save(fig, path: str | Path) -> None:
    """Render the whole figure to memory, then write it whole or not at all (rooftune/outputs.py), so no
    reader sees half a picture (format from the suffix, one of FORMATS)."""
    buf = io.BytesIO()
    fmt = Path(path).suffix.lstrip(".").lower()
    fig.savefig(buf, format=fmt, **({"pil_kwargs": {"optimize": True}} if fmt == "png" else {}))  # smaller PNGs
    write_atomic(path, buf.getvalue())


def eval_cdf(scores: dict[str, list[list[float]]], path: str | Path, *, title: str,
             labels: dict[str, str] | None = None, lowest: float = 0.5, zoom: float = 0.9) -> None:
    """Per method, the CDF over shapes of its score (best time ÷ pick's time): x a score, y the fraction
    of shapes at or below it; left panel from `lowest` (scores below it sit at the left edge: the
    curve's height there is their share), right panel zoomed on [`zoom`, 1], where the best methods
    differ. `scores[method]`: one list per run (random's seeds), pooled, so the curve is the runs'
    average CDF. Marked: the mission's mean bar (TARGET_SCORE) and the worst tenth (y = 0.1)."""
    fig = _figure(11.0, 5.2)
    axes = fig.subplots(1, 2, sharey=True)
    top = 1.0
    for i, (method, runs) in enumerate(scores.items()):
        pooled = np.sort(np.concatenate([np.asarray(r, dtype=float) for r in runs])) if runs else np.array([])
        if pooled.size == 0:
            continue
        top = max(top, float(pooled[-1]))
        x = np.concatenate([[min(lowest, pooled[0]) - 1.0], pooled])  # enter from the left edge at 0
        y = np.concatenate([[0.0], np.arange(1, pooled.size + 1) / pooled.size])
        label = method + (f"  {labels[method]}" if labels and method in labels else "")
        for ax in axes:
            ax.step(x, y, where="post", color=_COLOURS[i % len(_COLOURS)], linewidth=2.2 if i == 0 else 1.4,
                    label=label if ax is axes[0] else None, zorder=3 if i == 0 else 2)
    for ax, left in zip(axes, (lowest, zoom)):
        ax.axvline(TARGET_SCORE, color="black", linestyle="--", linewidth=1)
        ax.axhline(WORST_FRACTION, color="grey", linestyle=":", linewidth=1.2)
        ax.set_xlim(left, top + (0.01 if ax is axes[0] else 0.002))
        ax.set_ylim(0, 1.0)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("fraction of shapes scoring at or below")
    axes[0].set_xlabel(f"score (below {lowest}: at the left edge)")
    axes[1].set_xlabel(f"score, zoomed on {zoom} to 1")
    axes[1].annotate(f"mission: mean ≥ {TARGET_SCORE}", (TARGET_SCORE, 0.52), xytext=(4, 0), textcoords="offset points",
                     rotation=90, ha="left", va="center", fontsize=8)
    axes[0].annotate("worst tenth of shapes", (lowest + 0.06 * (1 - lowest), WORST_FRACTION), xytext=(0, -3),
                     textcoords="offset points", ha="left", va="top", fontsize=8, color="dimgrey")
    fig.suptitle(f"{title}\nscore = best recorded time ÷ recorded time of the method's pick", fontsize=10)
    fig.legend(loc="outside lower center", ncols=3, fontsize=8, title="method  (mean / worst-tenth mean)",
               title_fontsize=8)
    _save(fig, path)


def report_scatter(flops: list[float], ratios: list[float], classes: list[str], path: str | Path, *,
                   title: str, baseline_label: str, faint: list[bool] | None = None) -> None:
    """Per shape, baseline time ÷ best-of-space time (above 1: the space is faster) against the problem's
    FLOPs, both log; colour by class; `faint[i]`: drawn hollow (GEMM: rows not 16-byte aligned, where
    cuBLAS runs slow kernels). Rows without a ratio are left out by the caller."""
    fig = _figure()
    from matplotlib.ticker import NullLocator

    ax = fig.add_subplot()
    faint = faint or [False] * len(flops)
    x, y = np.asarray(flops, dtype=float), np.asarray(ratios, dtype=float)
    for i, cls in enumerate(sorted(set(classes))):
        colour = _COLOURS[i % len(_COLOURS)]
        mine = np.array([c == cls for c in classes])
        solid = mine & ~np.asarray(faint, dtype=bool)
        hollow = mine & np.asarray(faint, dtype=bool)
        geo = math.exp(float(np.mean(np.log(y[solid])))) if solid.any() else math.nan
        ax.scatter(x[solid], y[solid], s=22, color=colour, alpha=0.8,
                   label=f"{cls}: geomean {geo:.3f} over {int(solid.sum())}"
                         + (f" (+{int(hollow.sum())} hollow)" if hollow.any() else ""))
        if hollow.any():
            ax.scatter(x[hollow], y[hollow], s=22, facecolors="none", edgecolors=colour, alpha=0.9)
    if any(faint):
        ax.scatter([], [], s=22, facecolors="none", edgecolors="black",
                   label="hollow: N or K rows not 16-byte aligned (cuBLAS's slow kernels)")
    ax.axhline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    lo, hi = float(y.min()) if y.size else 0.5, float(y.max()) if y.size else 2.0
    ax.set_ylim(min(lo, 0.9) / 1.08, max(hi, 1.1) * 1.08)
    ticks = [t for t in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.5, 2, 3, 4, 6, 8) if min(lo, 0.9) / 1.08 <= t <= max(hi, 1.1) * 1.08]
    ax.set_yticks(ticks, [f"{t:g}" for t in ticks])
    ax.yaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("problem size (FLOPs)")
    ax.set_ylabel(f"{baseline_label} time ÷ best config's time  (above 1: the space is faster)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="major")
    ax.legend(loc="best", fontsize=8)
    _save(fig, path)


def explain_scatter(predicted_us: list[float], measured_us: list[float], path: str | Path, *, title: str,
                    tried: list[int], zero_trial: int | None, best: int, winner: int | None = None,
                    predicted_label: str = "predicted µs") -> None:
    """Predicted against measured time over one shape's recorded space, log-log, with y = x; marked (by
    index): the configs the search measured (`tried`), the zero-trial pick (the predicted fastest), the
    search's pick and the exhaustive best. An inset zooms on the fast corner, numbering `tried` in order."""
    fig = _figure(7.0, 6.2)
    ax = fig.add_subplot()
    x, y = np.asarray(predicted_us, dtype=float), np.asarray(measured_us, dtype=float)
    lo, hi = float(min(x.min(), y.min())) / 1.1, float(max(x.max(), y.max())) * 1.1
    _explain_layers(ax, x, y, tried, zero_trial, best, winner, lo, hi, labels=True)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(predicted_label)
    ax.set_ylabel("measured µs (recorded)")
    ax.set_title(title, fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    marked = [i for i in (*tried, best, zero_trial, winner) if i is not None]
    z_lo = float(min(x[marked].min(), y[marked].min())) / 1.04
    z_hi = float(max(x[marked].max(), y[marked].max())) * 1.04
    if z_hi / z_lo < (hi / lo) ** 0.6:  # the marked configs sit in a corner: zoom on it
        inset = ax.inset_axes([0.56, 0.05, 0.42, 0.42])
        _explain_layers(inset, x, y, tried, zero_trial, best, winner, z_lo, z_hi, labels=False)
        for n, i in enumerate(tried, start=1):
            inset.annotate(str(n), (x[i], y[i]), xytext=(3, 2), textcoords="offset points", fontsize=6, color="#b35900")
        inset.set_xlim(z_lo, z_hi)
        inset.set_ylim(z_lo, z_hi)
        inset.tick_params(labelsize=7)
        inset.set_title("fast corner; the search's trials in order", fontsize=7)
        ax.indicate_inset_zoom(inset, edgecolor="grey")
    _save(fig, path)


def _explain_layers(ax, x, y, tried, zero_trial, best, winner, lo: float, hi: float, *, labels: bool) -> None:
    """The explain picture's points on `ax` (the whole space or an inset), log-log with plain-number ticks."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    def label(text: str) -> str | None:
        return text if labels else None

    ax.scatter(x, y, s=8, color="#b3c6dd", linewidths=0, label=label(f"recorded configs ({x.size})"), zorder=1)
    if tried:
        ax.scatter(x[tried], y[tried], s=36, facecolors="none", edgecolors="#ff7f0e", linewidths=1.4,
                   label=label(f"measured by the search ({len(tried)})"), zorder=3)
    if zero_trial is not None:
        ax.scatter([x[zero_trial]], [y[zero_trial]], s=150, marker="*", color="#2ca02c", edgecolors="black",
                   linewidths=0.6, label=label("zero-trial pick (predicted fastest)"), zorder=4)
    if winner is not None:
        ax.scatter([x[winner]], [y[winner]], s=110, marker="s", facecolors="none", edgecolors="#9467bd",
                   linewidths=1.6, label=label("search's pick"), zorder=4)
    ax.scatter([x[best]], [y[best]], s=70, marker="D", color="#d62728", edgecolors="black", linewidths=0.6,
               label=label("exhaustive best (measured fastest)"), zorder=5)
    ax.plot([lo, hi], [lo, hi], color="black", linewidth=0.8, linestyle="--", label=label("predicted = measured"),
            zorder=2)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if hi / lo > 8 else tuple(range(1, 10))))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        axis.set_minor_formatter(NullFormatter())
    ax.grid(alpha=0.3, which="major")
