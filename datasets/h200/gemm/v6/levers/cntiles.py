"""Composite-width tiles (cnexp.py: BLOCK_N + BLOCK_N2 columns, e.g. 128x160) timed on training shapes beside
their space-6 best configs and cuBLAS, to decide whether a later space holds them.

Per shape (datasets/h200/gemm/v6/train, training shapes only): the 6 fastest space-6 configs as they are
("base"); the composite tiles that best fill the SMs' waves (`tiles`: the count of tiles against the H200's
132 SMs, weighed by a tile's operand reuse, a plain rule of this script, not the model), each with the warps
and stages that fit ("cn": one tile per program; "pcn": persistent, where the tiles make 2 waves or more).
Every launcher passes kernels/check.py's relative-error bound against an fp64 reference before it is timed;
all are timed in one interleaved pass (kernels/timing.py) with cuBLAS. Compiles run first, in parallel
worker processes. Resumable: shapes already in DONE (a previous call's cntiles.json) are skipped.

usage (repository root, on the GPU machine):
  python3 datasets/h200/gemm/v6/levers/cntiles.py OUT SECONDS DONE SHAPE...   (SHAPE: MxNxK-layout)
  python3 datasets/h200/gemm/v6/levers/cntiles.py --plan SHAPE...            (the variants, no GPU)
  python3 datasets/h200/gemm/v6/levers/cntiles.py --summary cntiles.json     (the figures)
"""

import json
import math
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from rooftune.hwprofiles import load_profile

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "v5" / "levers"))
import levers as lv  # noqa: E402  (space 5's lever script: the shape parsing and sweep reading are its)

parse = lv.parse
TRAIN = HERE.parent / "train"
H200 = load_profile("h200")
SMS = H200.sm_count
SMEM_LIMIT = H200.smem_per_block_bytes - 1024  # the per-block limit, less the barriers
MAX_ACC_PER_THREAD = 160            # fp32 accumulator registers a thread may hold
TILES_PER_SHAPE = 5


def sweep_configs(text):
    """The shape's training sweep in TRAIN (read at the call: cmtiles.py and sktiles.py point it at space 7's)."""
    return lv.sweep_configs(text, TRAIN)


def next_pow2(x):
    return 1 << max(0, (x - 1).bit_length())


def score(m, n, bm, width):
    """Useful share of the SMs' waves times a tile's operand reuse: higher is better."""
    tiles = -(-m // bm) * -(-n // width)
    slots = SMS * (2 if bm * width < 128 * 128 else 1)
    waves = -(-tiles // slots)
    fill = tiles / (waves * slots)
    waste = (-(-m // bm) * bm * -(-n // width) * width) / (m * n)
    reuse = 1 / (1 + 48 / min(bm, max(m, 64)) + 48 / width)
    return fill * reuse / waste, tiles


def composite_tiles(m, n):
    out = []
    for bm in (64, 128, 256):
        if bm > max(64, next_pow2(m)):
            continue
        for bn in (64, 128, 256):
            for bn2 in (16, 32, 64, 128):
                width = bn + bn2
                if bn2 >= bn or width > next_pow2(n) or width & (width - 1) == 0:
                    continue
                s, tiles = score(m, n, bm, width)
                out.append((s, bm, bn, bn2, tiles))
    out.sort(reverse=True)
    return out[:TILES_PER_SHAPE]


def variants(text):
    """[(kind, config)]: kind base (a space-6 config), cn or pcn (BLOCK_N2 in the config)."""
    m, n, k, layout = parse(text)
    out = [("base", c) for c in sweep_configs(text)[:6]]
    for _, bm, bn, bn2, tiles in composite_tiles(m, n):
        for warps in (4, 8):
            if bm * (bn + bn2) / (32 * warps) > MAX_ACC_PER_THREAD or (bm == 64 and warps == 8):
                continue
            for stages in (3, 4, 5):
                if stages * (bm + bn + bn2) * 64 * 2 > SMEM_LIMIT:
                    continue
                c = dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_N2=bn2, BLOCK_K=64, GROUP_M=8, num_warps=warps,
                         num_stages=stages)
                out.append(("cn", c))
                epilogue = bm * bn * 2
                if tiles >= 2 * SMS and stages * (bm + bn + bn2) * 64 * 2 + epilogue <= SMEM_LIMIT:
                    out.append(("pcn", c))
    return out


def cfg_name(c):
    return ",".join(f"{p}={v}" for p, v in c.items())


def key_of(v):
    return f"{v[0]} {cfg_name(v[1])}"


def build(text, v, inputs, out):
    import torch
    import cnexp
    from rooftune.kernels import gemm
    kind, c = v
    layout = parse(text)[3]
    if kind == "base":
        return gemm.make_launcher(c, layout, inputs, out)
    sms = torch.cuda.get_device_properties(out.device).multi_processor_count
    return cnexp.cn_launcher(c, layout, inputs, out, persistent=kind == "pcn", sms=sms)


def compile_job(job):
    os.environ.pop("TRITON_INTERPRET", None)
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    text, v = job
    t0 = time.time()
    try:
        m, n, k, layout = parse(text)
        inputs = [gemm.make_inputs(GemmShape(m, n, k, layout=layout, dtype="bf16"), "cuda", 1)]
        out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
        build(text, v, inputs, out)(0)
        torch.cuda.synchronize()
        return None, time.time() - t0
    except Exception as e:
        return repr(e)[:300], time.time() - t0


def time_shape(text, vs):
    import torch
    from rooftune.candidates import GemmShape
    from rooftune.kernels import gemm
    from rooftune.kernels.check import TOLERANCE, relative_error
    from rooftune.kernels.timing import input_sets_needed, time_candidates
    m, n, k, layout = parse(text)
    shape = GemmShape(m, n, k, layout=layout, dtype="bf16")
    n_sets = input_sets_needed(2 * (m * k + k * n), 50 * 2 ** 20)
    inputs = [gemm.make_inputs(shape, "cuda", 100 + i) for i in range(n_sets)]
    out = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    ref = gemm.reference(*inputs[0], layout)
    weights = [(a, b if layout == "kn" else b.t()) for a, b in inputs]
    launchers, errors = {}, {}
    for v in vs:
        key = key_of(v)
        try:
            launch = build(text, v, inputs, out)
            out.fill_(float("nan"))
            launch(0)
            torch.cuda.synchronize()
            err = relative_error(out, ref)
            if not err <= TOLERANCE[torch.bfloat16]:
                errors[key] = f"relative error {err:.3g}"
                continue
            launchers[key] = launch
        except Exception as e:
            errors[key] = repr(e)[:200]
    launchers["cublas"] = lambda i: torch.matmul(*weights[i % len(weights)], out=out)
    timed = time_candidates(launchers, rounds=9, target_ms=0.5, baseline_keys=["cublas"], mid_ratio=None,
                            prune_ratio=1.6, seed=0)
    times = {key: t.median_us for key, t in timed.items() if t.median_us is not None}
    errors.update({key: t.error for key, t in timed.items() if t.error})
    return {"shape": text, "times_us": times, "errors": errors}


def best_of(r):
    fam = {}
    for key, us in r["times_us"].items():
        kind = key.split(" ")[0]
        if kind not in fam or us < fam[kind][0]:
            fam[kind] = (us, key)
    return fam


def summary_line(r):
    fam = best_of(r)
    cb, base = fam["cublas"][0], fam["base"][0]
    comp = min(fam.get("cn", (math.inf,))[0], fam.get("pcn", (math.inf,))[0])
    best = min(base, comp)
    key = min((v for k, v in fam.items() if k in ("cn", "pcn")), default=(0, "-"))[1]
    return (f"{r['shape']:>20} cuBLAS {cb:8.2f}  base {base:8.2f}  composite {comp:8.2f}  base÷composite "
            f"{base / comp:.3f}  cuBLAS÷base {cb / base:.3f} -> cuBLAS÷best {cb / best:.3f}  errors "
            f"{len(r['errors'])}  {key[:90]}")


def summary(results):
    gains = [best_of(r)["base"][0] / min(best_of(r).get(k, (math.inf,))[0] for k in ("cn", "pcn"))
             for r in results]
    before = [best_of(r)["cublas"][0] / best_of(r)["base"][0] for r in results]
    after = [best_of(r)["cublas"][0] / min(v[0] for k, v in best_of(r).items() if k != "cublas") for r in results]
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"{len(results)} shapes: base÷composite geomean {g(gains):.3f} (min {min(gains):.3f}, max {max(gains):.3f},"
          f" composite fastest on {sum(x > 1 for x in gains)}); cuBLAS÷best {g(before):.3f} -> {g(after):.3f}")


def main(out_dir, seconds, done_path, shapes):
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    results = json.loads(Path(done_path).read_text()) if done_path != "-" and Path(done_path).exists() else []
    done = {r["shape"] for r in results}
    todo = [s for s in shapes if s not in done]
    per_shape = {s: variants(s) for s in todo}
    jobs = [(s, v) for s in todo for v in per_shape[s]]
    with ProcessPoolExecutor(min(14, len(os.sched_getaffinity(0))), mp_context=get_context("spawn")) as ex:
        res = list(ex.map(compile_job, jobs))
    bad = [(j, r) for j, r in zip(jobs, res) if r[0]]
    print(f"compiled {len(jobs)} variants in {time.monotonic() - started:.0f} s, {len(bad)} failed", flush=True)
    for (s, v), r in bad[:12]:
        print(f"  FAIL {s} {key_of(v)}: {r[0][:160]}", flush=True)
    for s in todo:
        if time.monotonic() - started > seconds:
            print("out of time before", s, flush=True)
            break
        t0 = time.monotonic()
        r = time_shape(s, per_shape[s])
        r["seconds"] = round(time.monotonic() - t0, 1)
        results.append(r)
        tmp = out_dir / "cntiles.json.tmp"
        tmp.write_text(json.dumps(results, indent=1))
        tmp.replace(out_dir / "cntiles.json")
        print(summary_line(r), flush=True)
    print("\nall shapes:")
    for r in results:
        print(summary_line(r))
    summary(results)


if __name__ == "__main__":
    if sys.argv[1] == "--plan":
        for s in sys.argv[2:]:
            vs = variants(s)
            print(s, len(vs), [f"{c['BLOCK_M']}x{c['BLOCK_N']}+{c.get('BLOCK_N2')}" for k, c in vs if k != "base"][::3])
    elif sys.argv[1] == "--summary":
        rs = json.loads(Path(sys.argv[2]).read_text())
        for r in rs:
            print(summary_line(r))
        summary(rs)
    else:
        main(Path(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:])
