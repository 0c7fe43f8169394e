"""Data-parallel waves + a split-K tail, timed on training shapes beside their space-7 best configs and cuBLAS,
to decide whether a later space holds the schedule.

The schedule: a shape whose tiles make W full waves and a fraction runs as two GEMMs of space 7's kernel on
views of A, B and C. The first covers the whole tile rows (axis M) or tile columns (axis N) that fit in the
W full waves, one tile per program as today; the rest, the tail, runs with SPLIT_K = S (fp32 partials summed
by the reduction kernel), so its K iterations spread over the SMs the last wave would leave idle. Three
launches, no waiting between programs (Triton 3.6's spin-waiting fix-up is what made stream-K lose,
v2/streamk/README.md).

Per shape (datasets/h200/gemm/v7/train only): the 6 fastest space-7 configs ("base"); for each of the
3 fastest distinct tiles among its 12 fastest configs (persistent ones run with one tile per program) and
128x256 (8 warps, 3 and 4 stages) and 128x128 (4 and 8 warps, 4 stages), and each axis, the tail splits S in (2, 3, 4, 6) with 4 or more K blocks a split ("tail"). Every launcher passes
kernels/check.py's bound against an fp64 reference, then all are timed in one interleaved pass with cuBLAS
(v6/levers/cntiles.py's machinery, imported, not copied). Resumable (DONE: a previous call's tailsplit.json).

usage (repository root):
  python3 datasets/h200/gemm/v7/tailsplit/tailsplit.py OUT SECONDS DONE SHAPE...   (GPU; SHAPE: MxNxK-layout)
  python3 datasets/h200/gemm/v7/tailsplit/tailsplit.py --plan SHAPE...            (the variants, no GPU)
  python3 datasets/h200/gemm/v7/tailsplit/tailsplit.py --summary tailsplit.json   (the figures)
  TRITON_INTERPRET=1 python3 datasets/h200/gemm/v7/tailsplit/tailsplit.py --check (the split on the CPU)
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parents[1] / "v6" / "levers"))
import cntiles as ct  # noqa: E402
import lever_summary  # noqa: E402

ct.TRAIN = HERE.parent / "train"
SPLITS = (2, 3, 4, 6)
MIN_K_BLOCKS_PER_SPLIT = 4
TILES = 3
# Tiles tried on every shape besides its own fastest: (BLOCK_M, BLOCK_N, BLOCK_N2, BLOCK_K, warps, stages).
CANON = ((128, 256, 0, 64, 8, 3), (128, 256, 0, 64, 8, 4), (128, 128, 0, 64, 4, 4), (128, 128, 0, 64, 8, 4))


def cdiv(a, b):
    return -(-a // b)


def resident(c):
    """CTAs of config `c` an SM holds, by shared memory (the H200 profile's per-block limit, as the
    measured plans used) and accumulator registers (its registers per SM): a plain estimate."""
    cols = c["BLOCK_N"] + c.get("BLOCK_N2", 0)
    smem = c["num_stages"] * (c["BLOCK_M"] + cols) * c["BLOCK_K"] * 2
    regs = (c["BLOCK_M"] * cols // (32 * c["num_warps"]) + 40) * 32 * c["num_warps"]
    return max(1, min(ct.H200.smem_per_block_bytes // max(smem, 1), ct.H200.regs_per_sm // regs))


def plans(m, n, k, c, slots=None):
    """[(axis, cut, split)]: the tail starts at row (M) or column (N) `cut` and runs with SPLIT_K `split`;
    `slots`: programs the GPU runs at once (default the H200's SMs x `resident`)."""
    bm, cols, bk = c["BLOCK_M"], c["BLOCK_N"] + c.get("BLOCK_N2", 0), c["BLOCK_K"]
    rows, colt = cdiv(m, bm), cdiv(n, cols)
    slots = slots or ct.SMS * resident(c)
    tiles = rows * colt
    if tiles <= slots or tiles % slots == 0:
        return []
    full = (tiles // slots) * slots
    out = []
    for axis, whole, per, size in (("M", rows, colt, bm), ("N", colt, rows, cols)):
        keep = full // per
        if 0 < keep < whole:
            for s in SPLITS:
                if cdiv(k, bk) >= MIN_K_BLOCKS_PER_SPLIT * s:
                    out.append((axis, keep * size, s))
    return out


def tail_config(c, split):
    return {**c, "BLOCK_N2": 0, "SPLIT_K": split, "PERSISTENT": 0, "FIXUP": 0}


def variants(text):
    """[(kind, config)]: base (a space-7 config) or tail (its first GEMM's config with AXIS, CUT and SPLIT)."""
    m, n, k, layout = ct.parse(text)
    ranked = ct.sweep_configs(text)
    out = [("base", c) for c in ranked[:6]]
    tiles = []
    for c in ranked[:12]:
        tile = (c["BLOCK_M"], c["BLOCK_N"], c.get("BLOCK_N2", 0), c["BLOCK_K"], c["num_warps"], c["num_stages"])
        if tile not in tiles and c["SPLIT_K"] == 1 and len(tiles) < TILES:
            tiles.append(tile)
    tiles += [t for t in CANON if t not in tiles and t[0] <= max(64, ct.next_pow2(m)) and t[1] <= ct.next_pow2(n)]
    for bm, bn, bn2, bk, warps, stages in tiles:
        dp = {**ranked[0], "BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_N2": bn2, "BLOCK_K": bk, "GROUP_M": 8, "SPLIT_K": 1,
              "PERSISTENT": 0, "FIXUP": 0, "num_warps": warps, "num_stages": stages}
        for axis, cut, split in plans(m, n, k, dp):
            out.append(("tail", {"AXIS": axis, "CUT": cut, "SPLIT": split, **dp}))
    return out


def halves(layout, a, b, out, axis, cut):
    """((a, b, out) of the first GEMM, (a, b, out) of the tail): views, nothing copied."""
    if axis == "M":
        return (a[:cut], b, out[:cut]), (a[cut:], b, out[cut:])
    if layout == "nk":
        return (a, b[:cut], out[:, :cut]), (a, b[cut:], out[:, cut:])
    return (a, b[:, :cut], out[:, :cut]), (a, b[:, cut:], out[:, cut:])


def hybrid_launcher(c, layout, inputs, out):
    from rooftune.kernels import gemm
    dp = {p: v for p, v in c.items() if p not in ("AXIS", "CUT", "SPLIT")}
    parts = [halves(layout, a, b, out, c["AXIS"], c["CUT"]) for a, b in inputs]
    first = gemm.make_launcher(dp, layout, [p[0][:2] for p in parts], parts[0][0][2])
    tail = gemm.make_launcher(tail_config(dp, c["SPLIT"]), layout, [p[1][:2] for p in parts], parts[0][1][2])

    def launch(i):
        first(i)
        tail(i)
    return launch


def build(text, v, inputs, out):
    from rooftune.kernels import gemm
    kind, c = v
    layout = ct.parse(text)[3]
    return gemm.make_launcher(c, layout, inputs, out) if kind == "base" else hybrid_launcher(c, layout, inputs, out)


def summary(results):
    lever_summary.summary(results, ct.best_of, "tail", "tail-split")


# The worker processes import this module, so cntiles's functions find these there too.
ct.variants, ct.build, ct.summary = variants, build, summary
ct.summary_line = lambda r: summary([r]) or ""
_cntiles_compile_job = ct.compile_job


def compile_job(job):
    """A worker's compile: cntiles's, run where this module is imported, so its `build` is this one's."""
    return _cntiles_compile_job(job)


ct.compile_job = compile_job


def check_on_cpu():
    """The split, on small shapes through Triton's interpreter (fp16: the interpreter mishandles bf16)."""
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    base = dict(BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8, SPLIT_K=1, TMA=0, PERSISTENT=0, FIXUP=0,
                BLOCK_N2=0, num_warps=4, num_stages=2)
    worst = 0.0
    for m, n, k, layout in ((150, 70, 256, "nk"), (70, 150, 256, "kn"), (97, 96, 800, "nk")):
        shape = GemmShape(m, n, k, layout=layout, dtype="fp16")
        a, b = gemm.make_inputs(shape, "cpu", 1)
        ref = gemm.reference(a, b, layout)
        for axis, cut, split in plans(m, n, k, base, slots=5):
            out = torch.full((m, n), float("nan"), dtype=a.dtype)
            hybrid_launcher({**base, "AXIS": axis, "CUT": cut, "SPLIT": split}, layout, [(a, b)], out)(0)
            err = ((out.double() - ref.double()).norm() / ref.double().norm()).item()
            if not err < 1e-2:  # NaN too: a part of C left unwritten
                raise SystemExit(f"wrong result: rel err {err}")
            worst = max(worst, err)
            print(f"{m}x{n}x{k}-{layout} axis {axis} cut {cut} split {split}: rel err {err:.2e}")
    print(f"ok, worst rel err {worst:.2e}")


def main(out_dir, seconds, done_path, shapes):
    """cntiles's loop; its results file is renamed tailsplit.json, the name run.sh resumes from."""
    ct.main(out_dir, seconds, done_path, shapes)
    if (out_dir / "cntiles.json").exists():
        (out_dir / "cntiles.json").replace(out_dir / "tailsplit.json")


if __name__ == "__main__":
    if sys.argv[1] == "--plan":
        for s in sys.argv[2:]:
            vs = variants(s)
            print(s, len(vs), sorted({f"{c['BLOCK_M']}x{c['BLOCK_N']}+{c.get('BLOCK_N2', 0)} {c['AXIS']}@{c['CUT']} "
                                      f"S{c['SPLIT']}" for kind, c in vs if kind == "tail"}))
    elif sys.argv[1] == "--summary":
        summary(json.loads(Path(sys.argv[2]).read_text()))
    elif sys.argv[1] == "--check":
        check_on_cpu()
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
