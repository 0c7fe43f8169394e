"""End to end on a GPU: a dense model's decoder layers run by torch's ops, by rooftune's ops untuned, and by
rooftune's ops tuned on first use, each captured in a CUDA graph and timed side by side; resumable.

    python3 scripts/device/e2e_layers.py --out $OUT/e2e.json [--models llama-3-8b,qwen2.5-7b]
        [--tokens 1,16,128,512,2048,4096] [--layers 4] [--seconds 500]

One prefill step of `--layers` decoder layers (random bf16 weights, batch 1, `tokens` tokens): RMSNorm, the fused
QKV projection (with its bias where the model has one), causal grouped-query attention, the output projection,
RMSNorm, the fused gate/up projection, SiLU-and-multiply, the down projection; rotary embeddings are left out
(elementwise, the same in every mode). Modes:
- `torch`: F.linear and F.scaled_dot_product_attention (enable_gqa), what a model runs without rooftune;
- `untuned`: rooftune.linear / rooftune.attention with an empty tune cache (ROOFTUNE_CACHE in a fresh folder):
  the untuned path, nothing measured;
- `tuned`: the same ops with tune=True and another empty cache: each new shape is tuned on first use (the first
  forward's wall time, over the shapes it tuned, is the first-use cost per shape).
Each mode's forward is captured once as a CUDA graph of `--replays` back-to-back forwards; then `--rounds` rounds
replay every mode's graph once in a fresh shuffled order (docs/timing.md's method); a mode's time is its median
over rounds. Each (model, tokens) row is written to the JSON as it finishes, so a call that runs out of time
loses nothing and the next call goes on from there. The table printed last is each mode's speed over torch's.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

MODES = ("torch", "untuned", "tuned")
# torch's forward captured twice: the second graph's speed over the first is the method's noise.
NOISE = "torch_again"


def model_dims(name: str) -> dict:
    """hidden, intermediate, heads, kv_heads, head_dim and whether QKV has a bias, from the shipped config."""
    from rooftune.tuner.llm.shapes import load_model_config

    cfg = load_model_config(name)
    return {"hidden": cfg.hidden_size, "intermediate": cfg.intermediate_size, "heads": cfg.heads,
            "kv_heads": cfg.kv_heads, "head_dim": cfg.head_dim, "qkv_bias": "qwen2" in cfg.name.lower()}


def make_weights(dims: dict, layers: int, seed: int = 0) -> list[dict]:
    import torch

    g = torch.Generator(device="cuda").manual_seed(seed)
    h, i, d = dims["hidden"], dims["intermediate"], dims["head_dim"]
    qkv_n = (dims["heads"] + 2 * dims["kv_heads"]) * d

    def w(n, k):
        return torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g) * k ** -0.5

    return [{"qkv": w(qkv_n, h), "qkv_b": (torch.randn(qkv_n, device="cuda", dtype=torch.bfloat16, generator=g) * 0.02
                                          if dims["qkv_bias"] else None),
             "o": w(h, dims["heads"] * d), "gate_up": w(2 * i, h), "down": w(h, i),
             "norm1": torch.ones(h, device="cuda", dtype=torch.bfloat16),
             "norm2": torch.ones(h, device="cuda", dtype=torch.bfloat16)} for _ in range(layers)]


def forward(x, weights: list[dict], dims: dict, mode: str):
    """x [T, hidden] -> [T, hidden] through the layers, with `mode`'s linear and attention."""
    import torch.nn.functional as F

    import rooftune

    if mode == "torch":
        linear = F.linear

        def attention(q, k, v):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    else:
        tune = mode == "tuned"

        def linear(a, w, b=None):
            return rooftune.linear(a, w, b, tune=tune)

        def attention(q, k, v):
            return rooftune.attention(q, k, v, causal=True, tune=tune)
    t, heads, kv, d = x.shape[0], dims["heads"], dims["kv_heads"], dims["head_dim"]
    for w in weights:
        h = F.rms_norm(x, (x.shape[-1],), w["norm1"])
        qkv = linear(h, w["qkv"], w["qkv_b"])                                       # [T, (H + 2 KV) D]
        q, k, v = qkv.split([heads * d, kv * d, kv * d], dim=-1)
        q = q.view(t, heads, d).transpose(0, 1).unsqueeze(0).contiguous()            # [1, H, T, D]
        k = k.view(t, kv, d).transpose(0, 1).unsqueeze(0).contiguous()               # [1, KV, T, D]
        v = v.view(t, kv, d).transpose(0, 1).unsqueeze(0).contiguous()
        o = attention(q, k, v).squeeze(0).transpose(0, 1).reshape(t, heads * d)      # [T, H D]
        x = x + linear(o, w["o"])
        h = F.rms_norm(x, (x.shape[-1],), w["norm2"])
        gate, up = linear(h, w["gate_up"]).chunk(2, dim=-1)
        x = x + linear(F.silu(gate) * up, w["down"])
    return x


def capture(fn, replays: int):
    import torch

    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(replays):
            out = fn()
    return graph, out


def time_graphs(graphs: dict, rounds: int, replays: int) -> dict[str, float]:
    """Median µs of one forward per mode, over `rounds` rounds of every graph once in a shuffled order."""
    import torch

    times: dict[str, list[float]] = {m: [] for m in graphs}
    for g in graphs.values():  # warm-up
        g.replay()
    torch.cuda.synchronize()
    for _ in range(rounds):
        order = list(graphs)
        random.shuffle(order)
        for mode in order:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            graphs[mode].replay()
            end.record()
            end.synchronize()
            times[mode].append(start.elapsed_time(end) * 1e3 / replays)
    return {m: statistics.median(v) for m, v in times.items()}


def run_row(model: str, tokens: int, args, caches: dict) -> dict:
    import torch

    dims = model_dims(model)
    weights = make_weights(dims, args.layers)
    x = torch.randn(tokens, dims["hidden"], device="cuda", dtype=torch.bfloat16)
    row = {"model": model, "tokens": tokens, "layers": args.layers}
    outs, first_s = {}, {}
    for mode in MODES:
        if mode != "torch":
            os.environ["ROOFTUNE_CACHE"] = caches[mode]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        outs[mode] = forward(x, weights, dims, mode)
        torch.cuda.synchronize()
        first_s[mode] = time.perf_counter() - t0
    ref = outs["torch"].float()
    row["rel_err"] = {m: float((outs[m].float() - ref).norm() / ref.norm()) for m in MODES if m != "torch"}
    row["first_use_s"] = first_s["tuned"]
    row["tuned_shapes"] = 5  # four projections and the attention of one layer (the layers share shapes)
    replays = 4 if tokens <= 128 else 2 if tokens <= 512 else 1  # a graph of ~1 ms or more
    graphs = {}
    for mode in (*MODES, NOISE):
        if mode in caches:
            os.environ["ROOFTUNE_CACHE"] = caches[mode]
        kind = "torch" if mode == NOISE else mode
        graphs[mode], _ = capture(lambda m=kind: forward(x, weights, dims, m), replays)
    row["replays"] = replays
    row["time_us"] = time_graphs(graphs, args.rounds, replays)
    row["speed_vs_torch"] = {m: row["time_us"]["torch"] / row["time_us"][m] for m in (*MODES, NOISE)}
    graphs.clear()
    torch.cuda.empty_cache()
    return row


def report(rows: list[dict]) -> str:
    lines = [f"{'model':<12} {'tokens':>6} {'untuned':>8} {'tuned':>8} {'noise':>7} {'first use s/shape':>18}  "
             "rel err (untuned, tuned)"]
    for r in rows:
        s = r["speed_vs_torch"]
        noise = f"{s[NOISE]:>7.3f}" if NOISE in s else f"{'':>7}"
        lines.append(f"{r['model']:<12} {r['tokens']:>6} {s['untuned']:>8.3f} {s['tuned']:>8.3f} {noise} "
                     f"{r['first_use_s'] / r['tuned_shapes']:>18.2f}  {r['rel_err']['untuned']:.1e}, "
                     f"{r['rel_err']['tuned']:.1e}")
    if rows:
        for mode in ("untuned", "tuned"):
            ratios = [r["speed_vs_torch"][mode] for r in rows]
            gm = statistics.geometric_mean(ratios)
            lines.append(f"{mode}: geometric mean {gm:.3f}, min {min(ratios):.3f} over {len(rows)} rows")
        warm = [r["first_use_s"] / r["tuned_shapes"] for r in rows[1:]] or [rows[0]["first_use_s"] / 5]
        lines.append(f"first-use tune per shape (warm process, rows after the first): median {statistics.median(warm):.2f} s")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--models", default="llama-3-8b,qwen2.5-7b")
    ap.add_argument("--tokens", default="1,16,128,512,2048,4096")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--seconds", type=float, default=500.0, help="stop starting rows after this many seconds")
    ap.add_argument("--report", action="store_true", help="print the table of an existing --out and exit")
    args = ap.parse_args()
    rows = json.loads(args.out.read_text())["rows"] if args.out.exists() else []
    if args.report:
        print(report(rows))
        return
    import torch

    import rooftune

    start = time.perf_counter()
    done = {(r["model"], r["tokens"]) for r in rows}
    caches = {m: str(Path(tempfile.mkdtemp(prefix=f"rt-{m}-")) / "tune.json") for m in ("untuned", "tuned")}
    meta = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rooftune": rooftune.__version__}
    import triton

    meta["triton"] = triton.__version__
    for model in args.models.split(","):
        for tokens in (int(t) for t in args.tokens.split(",")):
            if (model, tokens) in done:
                continue
            if time.perf_counter() - start > args.seconds:
                print(f"stopping: {args.seconds:.0f} s spent; the next call resumes")
                break
            row = run_row(model, tokens, args, caches)
            rows.append(row)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            tmp = args.out.with_suffix(".tmp")
            tmp.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
            tmp.replace(args.out)
            print(f"{model} {tokens}: {row['speed_vs_torch']}, first use {row['first_use_s']:.1f} s", flush=True)
    print(report(rows))


if __name__ == "__main__":
    main()
