"""Does B's layout decide which fp32-operand tiles win on Hopper, for rooftune's own GEMM kernel?

The AutoHeuristic H100 log (Inductor's mm template, plain fp32 on the FMA pipes) shows it: with B N-contiguous
('kn'), tiles of 32 accumulators a thread beat those of 64 and 128; with B K-contiguous ('nk') the
128-accumulator tiles win. roofline/gemm.py prices that (FMA_KN_ACCUMULATORS, FMA_KN_SLOWDOWN). This times,
on the H200 (the H100's SM), every legal config of rooftune's space for a few shapes of fp32 tensors in both
layouts with BLOCK_M and BLOCK_N of 32 to 128, BLOCK_K of 16 to 64, GROUP_M 8, not persistent (one batch a
shape: every config reference-checked, then the sweep's interleaved rounds and final passes), and writes
OUT/fma_kn_h200.json after every shape.

rooftune's kernel leaves `tl.dot`'s input precision at Triton's default, TF32, so on fp32 tensors it runs the
tensor cores' TF32 path, not the FMA pipes (kernels/ops.py refuses fp32 for that reason): what this measures
is the TF32 path. `report` scores the model on it as 'tf32'.

    python3 experiments/fma-kn-h200/fma_kn_h200.py time --out "$OUT"          # GPU: TF32 dots (Triton's default)
    TRITON_F32_DEFAULT=ieee TRITON_CACHE_DIR=/tmp/ieee_cache \
        python3 experiments/fma-kn-h200/fma_kn_h200.py time --out "$OUT/ieee"  # GPU: IEEE fp32 dots (the FMA pipes)
    python3 experiments/fma-kn-h200/fma_kn_h200.py report RESULT.json[.gz] [--dtype fp32]   # CPU: the table
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from rooftune.candidates import Config, GemmShape, parse_gemm_shape
from rooftune.candidates.gemm_space import GEMM_SPACE
from rooftune.candidates.space import legal_configs
from rooftune.hwprofiles import load_profile
from rooftune.outputs import write_atomic
from rooftune.roofline.gemm import fma_accumulators

SHAPES = ((1280, 5248, 1792), (3712, 3456, 4096), (2048, 2048, 2048))
TILES, BLOCK_KS = (32, 64, 128), (16, 32, 64)


def configs_for(shape: GemmShape, profile) -> list[Config]:
    """The legal configs of the space in the experiment's slice."""
    keep = []
    for c in legal_configs(GEMM_SPACE, shape, profile).configs:
        if (c["BLOCK_M"] in TILES and c["BLOCK_N"] in TILES and c["BLOCK_K"] in BLOCK_KS
                and c["GROUP_M"] == 8 and c["PERSISTENT"] == 0):
            keep.append(c)
    return keep


def accumulators(c: Config) -> int:
    return int(fma_accumulators(c["BLOCK_M"], c["BLOCK_N"], c["num_warps"]))


def time_all(out: Path) -> None:
    from rooftune.kernels.harness.live import live_measurer
    from rooftune.kernels.harness.measure import SweepSettings

    profile = load_profile("h200")
    path = out / "fma_kn_h200.json"
    result = json.loads(path.read_text()) if path.exists() else {}
    with live_measurer("gemm", profile, SweepSettings()) as m:
        for dims in SHAPES:
            for layout in ("kn", "nk"):
                shape = GemmShape(*dims, layout, "fp32")
                if str(shape) in result:
                    continue
                configs = configs_for(shape, profile)
                start = time.perf_counter()
                trials = m.measure(shape, configs)
                result[str(shape)] = {
                    "seconds": round(time.perf_counter() - start, 1),
                    "cublas_us": m.last_baseline_us,
                    "triton_f32_default": os.environ.get("TRITON_F32_DEFAULT"),
                    "trials": [{"config": str(t.config), "ok": t.ok, "time_us": t.time_us,
                                "error": None if t.ok else str(t.error)[:200]} for t in trials]}
                write_atomic(path, json.dumps(result, indent=1))
                print(f"{shape}: {len(configs)} configs, {result[str(shape)]['seconds']} s", flush=True)


def report(path: Path, dtype: str = "tf32") -> None:
    """Per shape: the best config, per accumulator count the best time ÷ the shape's best, and the model's
    Spearman over the configs, pricing the shape as `dtype` ('tf32': the TF32 dots the kernel runs by
    default; 'fp32': the FMA path, for a run under TRITON_F32_DEFAULT=ieee)."""
    from scipy.stats import spearmanr

    from rooftune.candidates.config import configs_to_columns, parse_config
    from rooftune.roofline import predict

    profile = load_profile("h200")
    data = json.loads(gzip.open(path, "rt").read() if path.suffix == ".gz" else path.read_text())
    print(f"shape | configs (failed) | best | best of ≤32 / 64 / ≥128 accumulators a thread (÷ best) | model Spearman ({dtype}) | model's first / best of its first 5 (÷ best)")
    for name, entry in data.items():
        ok = [t for t in entry["trials"] if t["ok"]]
        configs = [parse_config(t["config"]) for t in ok]
        times = np.array([t["time_us"] for t in ok])
        best = times.min()
        by_acc = {}
        for c, t in zip(configs, times):
            key = min(max(accumulators(c), 32), 128)  # ≤ 32, 64, ≥ 128 (the slice's counts are powers of 2)
            by_acc[key] = min(by_acc.get(key, np.inf), t)
        layout = name.split("(")[1].split(",")[0]  # the recorded name: "MxNxK (layout, dtype)"
        shape = parse_gemm_shape(name.split(" ")[0], layout=layout, dtype=dtype)
        predicted = predict(shape, configs_to_columns(configs), profile).time_us
        rho = spearmanr(predicted, times).statistic
        top = np.argsort(predicted, kind="stable")
        picks = f"{best / times[top[0]]:.3f} / {best / times[top[:5]].min():.3f}"
        winner = configs[int(times.argmin())]
        cells = " / ".join(f"{best / by_acc[a]:.3f}" if a in by_acc else "-" for a in (32, 64, 128))
        print(f"{name} | {len(ok)} ({len(entry['trials']) - len(ok)}) | "
              f"{winner['BLOCK_M']}x{winner['BLOCK_N']}x{winner['BLOCK_K']} w{winner['num_warps']} "
              f"s{winner['num_stages']} ({accumulators(winner)}), {best:.0f} µs, cuBLAS fp32 {entry['cublas_us'] or 0:.0f} µs | "
              f"{cells} | {rho:.3f} | {picks}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("time").add_argument("--out", type=Path, required=True)
    rep = sub.add_parser("report")
    rep.add_argument("path", type=Path)
    rep.add_argument("--dtype", default="tf32", choices=("tf32", "fp32"), help="how the model prices the dots")
    args = parser.parse_args(argv)
    if args.cmd == "time":
        args.out.mkdir(parents=True, exist_ok=True)
        time_all(args.out)
    else:
        report(args.path, args.dtype)


if __name__ == "__main__":
    sys.exit(main())
