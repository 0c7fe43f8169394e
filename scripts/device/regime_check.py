"""Timing-regime check (dev only, one GPU, about 4 minutes): does each recorded best GEMM config stay the
best when timed in short bursts after idle gaps (boost clocks) instead of the sweep's sustained passes
(power-limited clocks)? docs/timing.md says why it matters; the figure goes to docs/results.md.

For the SHAPES largest held-out GEMM shapes of datasets/h200/gemm/heldout (by 2·M·N·K), each shape's TOP
fastest recorded configs (by time_us, configs of the space) and cuBLAS are timed on this GPU twice:
  (a) harness: the sweep's own method, `live_measurer` with the sweep's settings (kernels/harness/measure.py:
      every config checked against the reference, interleaved CUDA-graph rounds of ~0.5 ms, then two final
      passes of 15 rounds of ~2 ms graphs over them and cuBLAS, medians pooled);
  (b) burst: each config and cuBLAS reference-checked again, captured as a CUDA graph of back-to-back launches
      of about --burst-ms, and replayed --replays times in a row after an idle gap of --idle-ms, in a fresh
      shuffled order each of --bursts rounds; its time is the median over its bursts.
Per shape: the recorded best's burst time ÷ the burst-best time (within 2%?) and cuBLAS ÷ best as recorded,
under (a) and under (b). Writes OUT/regime_check.json after every shape (a call cut short keeps what it
did) and prints the table.

    python3 -m pip install -q --no-deps --no-build-isolation -e .
    python3 scripts/device/regime_check.py --out "$OUT"

Nothing here imports torch or touches the GPU at import: the pure parts (shape selection, the burst schedule,
the summary and its table) are tested on the CPU (tests/scripts/test_regime_check.py).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Hashable, Sequence
from pathlib import Path

from rooftune.candidates import KERNELS, Config, GemmShape, kernel_of
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import read_dataset
from rooftune.outputs import json_text, write_atomic

REPO = Path(__file__).resolve().parents[2]
HELDOUT = REPO / "datasets" / "h200" / "gemm" / "heldout"
BASELINE = "cublas"
WITHIN = 0.02  # the recorded best "stays" where its burst time is within 2% of the burst-best's


# --- the pure parts -------------------------------------------------------------------------------------

def largest_shapes(records: Sequence[ShapeRecords], count: int) -> list[ShapeRecords]:
    """The `count` GEMM shapes with the most FLOPs (2·M·N·K), largest first; ties by the shape's text."""
    gemm = [r for r in records if kernel_of(r.shape) is KERNELS["gemm"]]
    return sorted(gemm, key=lambda r: (-r.shape.flops, str(r.shape)))[:count]


def top_configs(records: ShapeRecords, count: int) -> list[tuple[Config, float]]:
    """The `count` fastest successful configs of the space as recorded, with their time_us, fastest first."""
    space = set(records.candidate_configs())
    ok = [(t.config, t.time_us) for t in records.trials if t.ok and t.config in space]
    return sorted(ok, key=lambda ct: (ct[1], str(ct[0])))[:count]


def burst_medians(keys: Sequence[Hashable], burst: Callable[[Hashable], float], idle: Callable[[], None],
                  bursts: int, rng: random.Random) -> dict[Hashable, list[float]]:
    """Every key's burst times (µs per launch): `bursts` rounds, each over all keys in a fresh shuffled order,
    `idle()` (the gap that lets the clocks recover) before each key's `burst()`."""
    times: dict[Hashable, list[float]] = {k: [] for k in keys}
    for _ in range(bursts):
        order = list(keys)
        rng.shuffle(order)
        for key in order:
            idle()
            times[key].append(float(burst(key)))
    return times


def _best(times: dict[str, float | None]) -> tuple[str | None, float | None]:
    """The fastest config (not the baseline) with a time, and its time."""
    timed = {k: v for k, v in times.items() if k != BASELINE and v is not None}
    if not timed:
        return None, None
    best = min(timed, key=timed.get)
    return best, timed[best]


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None


def shape_summary(shape: str, recorded: dict[str, float | None], harness: dict[str, float | None],
                  burst: dict[str, float | None], within: float = WITHIN) -> dict:
    """One shape's verdict from three {config text or 'cublas': µs (None: failed its check or untimed)}: the
    recorded times, the harness's, the bursts'. `recorded_best_vs_burst_best`: the recorded best's burst
    time ÷ the burst-best's (1: still the best), `stays` where that is within `within`; the same against the
    harness; cuBLAS ÷ best under each; the best's burst time ÷ its harness time (below 1: faster in bursts)."""
    recorded_best, recorded_us = _best(recorded)
    harness_best, harness_us = _best(harness)
    burst_best, burst_us = _best(burst)
    in_bursts = _ratio(burst.get(recorded_best), burst_us)
    return {
        "shape": shape,
        "recorded_best": recorded_best, "harness_best": harness_best, "burst_best": burst_best,
        "recorded_best_vs_harness_best": _ratio(harness.get(recorded_best), harness_us),
        "recorded_best_vs_burst_best": in_bursts,
        "stays": None if in_bursts is None else in_bursts <= 1 + within,
        "cublas_over_best": {"recorded": _ratio(recorded.get(BASELINE), recorded_us),
                             "harness": _ratio(harness.get(BASELINE), harness_us),
                             "burst": _ratio(burst.get(BASELINE), burst_us)},
        "burst_over_harness_best_us": _ratio(burst_us, harness_us),
        "failed": sorted({k for times in (harness, burst) for k, v in times.items() if v is None}),
    }


def aggregate(summaries: Sequence[dict], within: float = WITHIN) -> dict:
    """How many shapes' recorded best stays within `within` of the burst-best, and the median cuBLAS ÷ best
    under each regime (over the shapes where it is defined)."""
    judged = [s for s in summaries if s["stays"] is not None]

    def median(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    return {"shapes": len(summaries), "judged": len(judged), "stays": sum(s["stays"] for s in judged),
            "within": within,
            "cublas_over_best_median": {regime: median(s["cublas_over_best"][regime] for s in summaries)
                                        for regime in ("recorded", "harness", "burst")},
            "burst_over_harness_best_median": median(s["burst_over_harness_best_us"] for s in summaries)}


def _f(value: float | None, spec: str = ".3f") -> str:
    return "-" if value is None else format(value, spec)


def table(summaries: Sequence[dict], totals: dict) -> str:
    """The printed table: per shape, the recorded best's burst time ÷ the burst-best's and whether it stays
    within the tolerance, cuBLAS ÷ best as recorded, under the harness and in bursts, and the best's burst ÷
    harness time; then the totals."""
    head = (f"{'shape':<28} {'rec.best/burst.best':>19} {'stays':>5} {'cuBLAS/best: rec':>16} {'harness':>7} "
            f"{'burst':>6} {'burst/harness':>13}")
    lines = [head, "-" * len(head)]
    for s in summaries:
        c = s["cublas_over_best"]
        stays = "-" if s["stays"] is None else ("yes" if s["stays"] else "NO")
        lines.append(f"{s['shape']:<28} {_f(s['recorded_best_vs_burst_best']):>19} {stays:>5} {_f(c['recorded']):>16} "
                     f"{_f(c['harness']):>7} {_f(c['burst']):>6} {_f(s['burst_over_harness_best_us']):>13}")
    m = totals["cublas_over_best_median"]
    lines.append(f"recorded best within {totals['within']:.0%} of the burst-best in {totals['stays']} of "
                 f"{totals['judged']} shapes; median cuBLAS/best: recorded {_f(m['recorded'])}, harness "
                 f"{_f(m['harness'])}, burst {_f(m['burst'])}; median best burst/harness time "
                 f"{_f(totals['burst_over_harness_best_median'])}")
    return "\n".join(lines)


# --- the GPU parts --------------------------------------------------------------------------------------

def capture_burst(launch: Callable[[int], None], burst_ms: float, replays: int):
    """`burst()` -> µs per launch: a CUDA graph of n back-to-back launches of about `burst_ms` (n from one
    timed launch), replayed `replays` times in a row between two events."""
    import torch

    from rooftune.kernels.harness.timing import launches_per_replay

    launch(0)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    launch(1)
    end.record()
    end.synchronize()
    n = launches_per_replay(start.elapsed_time(end) * 1000.0, burst_ms)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            launch(i)
    graph.replay()
    torch.cuda.synchronize()

    def burst() -> float:
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1000.0 / (replays * n)

    return burst


def time_bursts(bench, shape: GemmShape, configs: list[Config], profile, args, clock) -> tuple[dict, dict]:
    """(b) for one shape: {config text or 'cublas': median µs, or None where the config fails its reference
    check or cannot run}, and the SM clock range read after the bursts."""
    import torch

    from rooftune.kernels.harness.timing import input_sets_needed

    sets = input_sets_needed(bench.bytes_per_set(shape), profile.l2_bytes)
    inputs = [bench.inputs(shape, "cuda", 1000 + i) for i in range(sets)]
    out = bench.output(shape, "cuda")
    bursts, result = {}, {}
    for c in configs:
        try:
            problem = bench.check(c, shape, "cuda", 7)
            if not problem:
                bursts[str(c)] = capture_burst(bench.launcher(c, shape, inputs, out), args.burst_ms, args.replays)
        except Exception as exc:  # a config that cannot run is a result (None), not the end of the check
            problem = f"{type(exc).__name__}: {exc}"
        if problem:
            print(f"  burst: {c}: {problem}", flush=True)
            result[str(c)] = None
    bursts[BASELINE] = capture_burst(bench.baseline(shape, inputs, out), args.burst_ms, args.replays)
    mhz = []

    def burst(key):
        us = bursts[key]()
        mhz.append(clock().sm_mhz)
        return us

    times = burst_medians(list(bursts), burst, lambda: time.sleep(args.idle_ms / 1000.0), args.bursts,
                          random.Random(0))
    result.update({k: statistics.median(v) for k, v in times.items()})
    bursts.clear()  # the graphs and their memory, before the next shape
    del inputs, out
    torch.cuda.empty_cache()
    readings = [m for m in mhz if m is not None]
    return result, {"clock_mhz_min": min(readings, default=None), "clock_mhz_max": max(readings, default=None)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=HELDOUT)
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ".")))
    parser.add_argument("--gpu", default="h200", help="the profile: legality, the L2 size for input sets")
    parser.add_argument("--shapes", type=int, default=10)
    parser.add_argument("--top", type=int, default=5)
    parser.add_argument("--bursts", type=int, default=15)
    parser.add_argument("--replays", type=int, default=3)
    parser.add_argument("--burst-ms", type=float, default=0.2)
    parser.add_argument("--idle-ms", type=float, default=50.0)
    parser.add_argument("--max-seconds", type=float, default=480.0, help="start no shape after this")
    args = parser.parse_args(argv)

    from rooftune.hwprofiles import hwprobe, load_profile
    from rooftune.kernels.harness.live import live_measurer
    from rooftune.kernels.harness.measure import SweepSettings
    from rooftune.kernels.harness.timing import NvmlClock

    t0 = time.monotonic()
    profile = load_profile(args.gpu)
    chosen = largest_shapes(read_dataset(args.data), args.shapes)
    tops = {r.shape: top_configs(r, args.top) for r in chosen}
    report = {"data": str(args.data), "settings": vars(args) | {"data": str(args.data), "out": str(args.out)},
              "harness": "the sweep's SweepSettings() through live_measurer", "shapes": []}
    # The compile workers start first (as in a tune), torch and CUDA in this process after them.
    with live_measurer("gemm", profile, settings=SweepSettings()) as measurer:
        for records in chosen:  # every compile at once: the workers build them while the first shape is timed
            measurer.prefetch(records.shape, [c for c, _ in tops[records.shape]])
        torch = hwprobe.require_cuda()
        report["gpu"] = torch.cuda.get_device_name(0)
        clock = NvmlClock(hwprobe.nvml_index(0))
        for records in chosen:
            if time.monotonic() - t0 > args.max_seconds:
                print(f"stopping: {args.max_seconds:.0f} s used", flush=True)
                break
            shape, configs = records.shape, [c for c, _ in tops[records.shape]]
            t_shape = time.monotonic()
            trials = measurer.measure(shape, configs)
            harness = {str(t.config): t.time_us for t in trials} | {BASELINE: measurer.baseline_us()}
            for t in trials:
                if not t.ok:
                    print(f"  harness: {t.config}: {t.error}", flush=True)
            time.sleep(1.0)  # the sustained pass's heat, then bursts from idle gaps
            burst, clocks = time_bursts(measurer.km.bench, shape, configs, profile, args, clock)
            recorded = {str(c): us for c, us in tops[shape]} | {BASELINE: records.baselines_us.get(BASELINE)}
            summary = shape_summary(str(shape), recorded, harness, burst)
            report["shapes"].append({"shape": str(shape), "flops": shape.flops, "recorded_us": recorded,
                                     "harness_us": harness, "burst_us": burst, "burst_clocks": clocks,
                                     "recorded_clocks": {k: records.meta.get(k) for k in
                                                         ("clock_mhz_min", "clock_mhz_max")},
                                     "summary": summary, "seconds": round(time.monotonic() - t_shape, 1)})
            report["totals"] = aggregate([s["summary"] for s in report["shapes"]])
            report["seconds"] = round(time.monotonic() - t0, 1)
            write_atomic(args.out / "regime_check.json", json_text(report))
            print(f"{shape}: {report['shapes'][-1]['seconds']} s", flush=True)
    if not report["shapes"]:
        print("no shape timed", file=sys.stderr)
        return 1
    print(table([s["summary"] for s in report["shapes"]], report["totals"]))
    print(f"wrote {args.out / 'regime_check.json'} ({report['seconds']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
