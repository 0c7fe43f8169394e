"""Whether a first call could compile only part of a config list: rank every config by the generic model with the
compiler's registers guessed (64 or 128 per thread, no spills; shared memory and wgmma left as compiled: an upper
bound on what a guess before compiling could do), compile the first K of that ranking, rank those by the
model with their real binaries, time the first five. Scored on a suite dataset's TRAINING kernels: the share of calls
whose five equal the full analysis's, and the best-of-five score of both.

    python experiments/suite_picks/two_stage.py datasets/h100/suite
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np

from rooftune.eval.datasets.suite import kernels_in, read_manifest, read_suite
from rooftune.hwprofiles import load_profile
from rooftune.roofline.generic import predict_generic
from rooftune.tuner.generic_fitting import geometric_mean


def guessed(counts, regs: int):
    c = counts.compiled
    return replace(counts, compiled=replace(c, regs_per_thread=regs, local_bytes_per_thread=0))


def main(folder: str) -> None:
    profile = load_profile("h100_sxm")
    manifest = read_manifest(folder)
    calls = [c for c in read_suite(folder, kernels_in(manifest, "train"))]
    for regs in (64, 128):
        for top in (8, 12, 16, 24):
            same, full_scores, two_scores, compiled_share = 0, [], [], []
            for call in calls:
                keep = [i for i, c in enumerate(call.counts) if c is not None]
                t = call.time_us[keep]
                if len(keep) < 6 or not np.isfinite(t).any():
                    continue
                counts = [call.counts[i] for i in keep]
                best = np.nanmin(t)
                real = predict_generic(counts, profile)
                full = np.argsort(np.where(real.fits, real.time_us, np.inf), kind="stable")[:5]
                guess = predict_generic([guessed(c, regs) for c in counts], profile)
                first = np.argsort(np.where(guess.fits, guess.time_us, np.inf), kind="stable")[:top]
                two = first[np.argsort(np.where(real.fits[first], real.time_us[first], np.inf), kind="stable")][:5]
                same += set(full) == set(two)
                full_scores.append(best / np.nanmin(t[full]))
                two_scores.append(best / np.nanmin(t[two]) if np.isfinite(t[two]).any() else 0.0)
                compiled_share.append(min(top, len(keep)) / len(keep))
            print(f"regs {regs:3d} top {top:2d}: same five {same}/{len(full_scores)}, best of five "
                  f"{geometric_mean(full_scores):.4f} (all compiled) vs {geometric_mean(two_scores):.4f}, "
                  f"compiled {np.mean(compiled_share):.2f} of the list")


if __name__ == "__main__":
    main(sys.argv[1])
