"""The generic model against a family's own on recorded ground truth: at budget 1 (the first config each ranks), the
best recorded time over the pick's, on shapes of a recorded dataset (the H200's: no H100 data exist yet), each
shape's configs a seeded sample of its recorded space (both models rank the same sample). The generic model reads
every config from its sm_90 IR, compiled on this CPU (scripts/ir_family_check.py builds each family's launches; a
config of several launches, split-K's reduction kernel after the GEMM, costs the sum of its launches').

    python scripts/generic_family_replay.py gemm --data datasets/h200/gemm/heldout --shapes 12 --configs 150

Prints one line per shape and the geometric means: the family model alone, the family model × its shipped
residual, the generic model alone.
"""

from __future__ import annotations

import argparse
import os
import random
import sys

os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, os.path.dirname(__file__))

import numpy as np  # noqa: E402

import ir_family_check as family  # noqa: E402
from rooftune import roofline  # noqa: E402
from rooftune.candidates import configs_to_columns, kernel_spec  # noqa: E402
from rooftune.eval.datasets.readers import load_records  # noqa: E402
from rooftune.hwprofiles import load_profile  # noqa: E402
from rooftune.kernels.introspect.analyze import ConfigAnalysis, analysis_pool, analyze_calls  # noqa: E402
from rooftune.roofline.generic import predict_generic  # noqa: E402
from rooftune.tuner.residual_choice import shipped_residual  # noqa: E402
from rooftune.tuner.search.strategies import corrected_prior  # noqa: E402


def _score(times: dict, pick) -> float:
    best = min(times.values())
    return best / times[pick] if pick in times else 0.0


def replay_shape(kernel: str, records, configs: list, profile, residual, pool) -> tuple[float, float, float]:
    """(family model alone, family × residual, generic alone) scores of one shape's sampled configs. A config of
    several launches (split-K's reduction kernel) costs the sum of its launches' predictions."""
    shape = records.shape
    times = {t.config: t.time_us for t in records.trials if t.ok}
    launches, kept = [], []
    for c in configs:
        try:
            launches.append(family.LAUNCHES[kernel](shape, c))
            kept.append(c)
        except NotImplementedError:
            continue
    bd = roofline.predict(shape, configs_to_columns(kept), profile)
    alone = kept[int(np.argmin(np.where(bd.fits, bd.time_us, np.inf)))]
    ranked, prior = corrected_prior(shape, kept, profile, residual)
    corrected = ranked[int(np.argmin(prior))]
    flat = [(fn, tc, args, grid) for calls in launches for fn, args, grid, tc in calls]
    analyses = analyze_calls(flat, arch=90, pool=pool)
    read = [i for i, a in enumerate(analyses) if isinstance(a, ConfigAnalysis)]
    gbd = predict_generic([analyses[i].counts for i in read], profile)
    predicted = dict(zip(read, np.where(gbd.fits, gbd.time_us, np.inf)))
    totals, at = [], 0
    for calls in launches:
        parts = [predicted.get(at + j, np.inf) for j in range(len(calls))]
        totals.append(sum(parts))
        at += len(calls)
    generic = kept[int(np.argmin(totals))]
    sample = {c: times[c] for c in kept if c in times}
    return _score(sample, alone), _score(sample, corrected), _score(sample, generic)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kernel", choices=sorted(family.CALLS))
    parser.add_argument("--data", required=True)
    parser.add_argument("--gpu", default="h200")
    parser.add_argument("--shapes", type=int, default=12)
    parser.add_argument("--configs", type=int, default=150)
    parser.add_argument("--seed", type=int, default=58)
    options = parser.parse_args()
    profile = load_profile(options.gpu)
    residual = shipped_residual(kernel_spec(options.kernel), profile)
    records = load_records(options.data, kernel=options.kernel)
    rng = random.Random(options.seed)
    chosen = rng.sample(records, min(options.shapes, len(records)))
    pool = analysis_pool()
    scores = []
    try:
        for r in chosen:
            ok = [t.config for t in r.trials if t.ok]
            sample = rng.sample(ok, min(options.configs, len(ok)))
            scores.append(replay_shape(options.kernel, r, sample, profile, residual, pool))
            print(f"{r.shape}: family {scores[-1][0]:.3f}, family × residual {scores[-1][1]:.3f}, "
                  f"generic {scores[-1][2]:.3f}", flush=True)
    finally:
        pool.close()
    means = np.exp(np.log(np.maximum(np.array(scores), 1e-9)).mean(axis=0))
    print(f"geometric mean over {len(scores)} shapes: family {means[0]:.3f}, family × residual {means[1]:.3f}, "
          f"generic {means[2]:.3f}")


if __name__ == "__main__":
    main()
