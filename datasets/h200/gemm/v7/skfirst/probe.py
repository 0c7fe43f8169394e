"""Levers on shapes drawn by a rule, beside space 7's model-ranked configs and cuBLAS: SK-first stream-K (skf.py),
space 7's composite tiles where its legality leaves them out, and tall tiles (../tallM/tallm.py).

None of the ten training shapes of skfirst.py has stream-K's textbook case: a large M against a modest N and a
long K, where every large tile leaves the last of one to three waves part-filled, composite widths included
(at least 15% of the SM slots idle), so the wave quantization cannot be tiled away and the K loop is long
enough to pay for a fix-up. This script draws such shapes by that rule with a fixed seed (`draw`). It reads the
training and held-out lists only to leave their shapes out. Sets (PROBE_SET): probe (8 shapes), family (16 more,
another seed, the probe shapes left out: the set to choose on) and train (the 10 training shapes of
../streamk/shapes.txt). On each shape it times:
- "base": space 7's 40 legal configs ranked first by the model and the shipped residual (`--prepare` writes them
  to SET_configs.json on the CPU; for train, the sweep's 6 fastest first). Their best stands in for the space's
  best; on held-out the model's first 20 alone reach 0.990 of it in mean;
- the round's lever (ROUND, below);
- cuBLAS;
with v6/levers/cntiles.py's machinery (reference check, one interleaved pass, compiles in worker processes).

usage (repository root):
  [PROBE_SET=family|train] python3 datasets/h200/gemm/v7/skfirst/probe.py --prepare   (CPU: shapes and configs)
  [PROBE_ROUND=2|3|4|5] [PROBE_SET=family|train] python3 datasets/h200/gemm/v7/skfirst/probe.py OUT SECONDS DONE
  python3 datasets/h200/gemm/v7/skfirst/probe.py --summary probe.json
"""

import json
import os
import random
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tallM"))
import skfirst  # noqa: E402  (sets up cntiles's machinery)
import tallm  # noqa: E402

ct = skfirst.ct
lever_summary = skfirst.lever_summary
LISTS = HERE.parents[1]
# PROBE_SET probe: the 8 probe shapes (rounds 1-3). family: 16 more of the family, drawn with another seed and
# leaving the probe shapes out, where round 4 times both levers together (family.json): shapes to choose a
# later space's rules on, with the probe shapes kept apart as their check.
# train: the 10 training shapes of ../streamk/shapes.txt, with their sweep's 6 fastest configs beside the 40.
PROBE_SET = os.environ.get("PROBE_SET", "probe")
SEED, COUNT = {"probe": (20261201, 8), "family": (1, 16), "train": (0, 10)}[PROBE_SET]
CONFIGS = HERE / f"{PROBE_SET}_configs.json"
TOP = 40
SMS = ct.SMS  # the H200 profile's SMs
# (BLOCK_M, columns): the tiles of 128 rows or more that space 7 holds, composite widths included
BIG_TILES = ((128, 256), (256, 128), (128, 320), (128, 288), (128, 192), (128, 160), (256, 256))


def fill(m, n, bm, width):
    tiles = -(-m // bm) * -(-n // width)
    return tiles / (-(-tiles // SMS) * SMS), tiles / SMS


def in_family(m, n, k):
    """128x256 tiles make one to three waves, and whichever large tile, at least 15% of the waves' SM slots
    stay idle; K ≥ 4096."""
    waves = fill(m, n, 128, 256)[1]
    return k >= 4096 and 1.0 < waves <= 3.0 and max(fill(m, n, bm, w)[0] for bm, w in BIG_TILES) < 0.85


def draw():
    """COUNT shapes of the family: M uniform in [2048, 12288], N and K from common model widths; B as [N, K]."""
    if PROBE_SET == "train":
        return (HERE.parent / "streamk" / "shapes.txt").read_text().split()
    listed = set()
    for name in ("shapes_train.json", "shapes_heldout.json"):
        listed |= {(s["m"], s["n"], s["k"]) for s in json.loads((LISTS / name).read_text())}
    if PROBE_SET != "probe":
        listed |= {tuple(map(int, t.removesuffix("-nk").split("x"))) for t in
                   json.loads((HERE / "probe_configs.json").read_text())}
    rng = random.Random(SEED)
    out = []
    while len(out) < COUNT:
        m, n, k = rng.randint(2048, 12288), rng.choice((1024, 1280, 1536, 1792, 2048, 2560, 3072)), \
            rng.choice((4096, 6144, 8192, 11008, 14336))
        if in_family(m, n, k) and (m, n, k) not in listed and f"{m}x{n}x{k}-nk" not in out:
            out.append(f"{m}x{n}x{k}-nk")
    return out


def prepare():
    from rooftune.candidates import GEMM_SPACE, GemmShape, legal_configs
    from rooftune.hwprofiles import load_profile
    from rooftune.roofline.residual import load_residual
    from rooftune.tuner.strategies import corrected_prior
    import numpy as np
    profile = load_profile("h200")
    residual = load_residual("gemm", profile)
    out = {}
    for text in draw():
        m, n, k, layout = ct.parse(text)
        shape = GemmShape(m, n, k, layout=layout, dtype="bf16")
        configs, prior = corrected_prior(shape, legal_configs(GEMM_SPACE, shape, profile).configs, profile, residual)
        out[text] = [dict(configs[i]) for i in np.argsort(prior, kind="stable")[:TOP]]
        if PROBE_SET == "train":  # the sweep's 6 fastest first, then the ranked ones they do not repeat
            fastest = [dict(c) for c in ct.sweep_configs(text)[:6]]
            out[text] = fastest + [c for c in out[text] if c not in fastest]
        print(text, "waves of 128x256", round(fill(m, n, 128, 256)[1], 2), "first", out[text][0])
    CONFIGS.write_text(json.dumps(out, indent=1))


# ROUND 1 (probe.json): SK_WAVE 0, FIX 0 and 1, on 128x256 (3 and 4 stages) and 256x128. ROUND 2 (probe2.json):
# FIX 1 (round 1's better fix-up where they differ), SK_WAVE 0 and 1, on 128x256 and 256x128 (3 stages) and
# 128x128 (4 warps, 4 stages). ROUND 3 (probe3.json): no stream-K; space 7's composite tiles ("cn"), which its
# legality leaves out of every probe shape (their waves are filled under 0.8): every composite tile of the space
# (BLOCK_M 64 or 128, BLOCK_N 128 or 256, BLOCK_N2 32 or 64) with the warps and stages that fit. ROUND 4
# (PROBE_SET family, family.json): SK-first (FIX 1; 128x128 with SK_WAVE 0 and 1, 128x256 and 256x128 with
# SK_WAVE 0) and the composite tiles, beside the 40 configs and cuBLAS. ROUND 5 (probe5.json, or family5.json):
# ../tallM/tallm.py's tall tiles, cuBLAS's tile heights (the 4 part splits that best fill the waves, 3 and 4
# stages, 8 warps), beside the 40 configs and cuBLAS.
ROUND = int(os.environ.get("PROBE_ROUND", "1"))


def variants(text):
    out = [("base", c) for c in json.loads(CONFIGS.read_text())[text]]
    if ROUND == 5:
        m, n, _, _ = ct.parse(text)
        for w1, w2, w3 in tallm.plans(m, n):
            for stages in (3, 4):
                out.append(("tm", dict(BLOCK_R=128, W1=w1, W2=w2, W3=w3, BLOCK_K=64, GROUP=8, num_warps=8,
                                       num_stages=stages)))
        return out
    if ROUND == 4:
        plans = [((128, 128, 4, 4), 0, 1), ((128, 128, 4, 4), 1, 1), ((128, 256, 8, 3), 0, 1),
                 ((256, 128, 8, 3), 0, 1)]
        out += composites(text)
    elif ROUND == 3:
        return out + composites(text)
    elif ROUND == 1:
        plans = [(t, 0, fix) for t in ((128, 256, 8, 3), (128, 256, 8, 4), (256, 128, 8, 3)) for fix in (0, 1)]
    else:
        plans = [(t, wave, 1) for t in ((128, 256, 8, 3), (256, 128, 8, 3), (128, 128, 4, 4)) for wave in (0, 1)]
    for (bm, bn, warps, stages), wave, fix in plans:
        out.append(("skf", dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SK_WAVE=wave, FIX=fix,
                                num_warps=warps, num_stages=stages)))
    return out


def composites(text):
    """Every composite tile of space 7 for the shape, legal or not, with the warps and stages that fit."""
    m, n, _, _ = ct.parse(text)
    out = []
    for bm, bn, bn2 in ((bm, bn, bn2) for bm in (64, 128) for bn in (128, 256) for bn2 in (32, 64)):
        if bn + bn2 > ct.next_pow2(n):
            continue
        for warps in (4, 8):
            if bm * (bn + bn2) / (32 * warps) > ct.MAX_ACC_PER_THREAD or (bm == 64 and warps == 8):
                continue
            for stages in (3, 4):
                if stages * (bm + bn + bn2) * 64 * 2 <= ct.SMEM_LIMIT:
                    out.append(("cn", dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1,
                                           PERSISTENT=0, FIXUP=0, BLOCK_N2=bn2, num_warps=warps,
                                           num_stages=stages)))
    return out


def build(text, v, inputs, out):
    """skfirst.py's, with a composite config ("cn") built by space 7's kernel like the base configs, and a
    tall tile ("tm") by ../tallM/tallm.py."""
    if v[0] == "tm":
        return tallm.make_launcher(v[1], inputs, out)
    return skfirst.build(text, ("base", v[1]) if v[0] == "cn" else v, inputs, out)


def summary(results):
    for kind, label in (("skf", "SK-first"), ("cn", "composite"), ("tm", "tall tile")):
        if any(k.startswith(kind + " ") for k in results[0]["times_us"]):
            lever_summary.summary(results, ct.best_of, kind, label)


# As skfirst.py's: the worker processes import this module (their main), so cntiles's loop finds these there too;
# skfirst.compile_job, which cntiles's pool already runs, then calls this module's `build`.
ct.variants, ct.build, ct.summary = variants, build, summary
ct.summary_line = lambda r: summary([r]) or ""


def main(out_dir, seconds, done_path):
    ct.main(out_dir, seconds, done_path, list(json.loads(CONFIGS.read_text())))
    if (out_dir / "cntiles.json").exists():
        name = {"probe": "probe" + ("" if ROUND == 1 else str(ROUND)), "train": f"train{ROUND}",
                "family": "family" + ("" if ROUND == 4 else str(ROUND))}[PROBE_SET]
        (out_dir / "cntiles.json").replace(out_dir / f"{name}.json")


if __name__ == "__main__":
    if sys.argv[1] == "--prepare":
        prepare()
    elif sys.argv[1] == "--summary":
        summary(json.loads(Path(sys.argv[2]).read_text()))
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3])
