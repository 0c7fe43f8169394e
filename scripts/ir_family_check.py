"""The generic model's counts against the family models' own: rooftune's GEMM, attention and fused-MoE kernels read
from their sm_90 IR (kernels/introspect, compiled on this CPU machine) and compared with the FLOPs and bytes of
roofline/gemm.py, roofline/attention.py and roofline/moe.py at a few shapes and configs.

What is compared, per family (the shapes are whole tiles, where the IR's whole masked tiles and the models' bytes of
the real rows meet):
- GEMM: the matrix FLOPs (the model's padded FLOPs), A and B bytes every program loads (the model's L2 bytes), C
  stored (M·N elements);
- attention: the FLOPs of QKᵀ and PV over the key blocks visited (padded FLOPs), the K and V tiles loaded (key
  blocks · 2·BLOCK_N·head_dim elements) and Q loaded plus O stored (the model's qo bytes);
- fused MoE: the FLOPs of the real tiles (the grid's empty programs exit on the padded total, which the IR reads
  from the call's tensor), the weights' tiles and the gathered rows' tiles. The model counts the routed rows only
  (a padding row is masked, never loaded), the IR counts a masked tile whole: the IR's A bytes are the model's padded
  rows', and the difference is the padding (the same for C's stores).

    python scripts/ir_family_check.py             # the table of docs/autotune.md
"""

from __future__ import annotations

import functools
import os
import sys

os.environ.pop("TRITON_INTERPRET", None)

import numpy as np  # noqa: E402
import torch  # noqa: E402
import triton  # noqa: E402
from triton.tools.tensor_descriptor import TensorDescriptor  # noqa: E402

from rooftune import roofline  # noqa: E402
from rooftune.candidates import AttentionShape, Config, GemmShape, MoeShape, configs_to_columns  # noqa: E402
from rooftune.hwprofiles import load_profile  # noqa: E402
from rooftune.kernels import attention, gemm, moe  # noqa: E402
from rooftune.kernels.introspect.analyze import ConfigAnalysis, analyze  # noqa: E402
from rooftune.roofline.moe import moe_routing, moe_tiling  # noqa: E402

PROFILE = load_profile("h100_sxm")
TORCH = {"bf16": torch.bfloat16, "fp16": torch.float16}
CASES = [
    ("gemm", GemmShape(1024, 1024, 1024), "BLOCK_M=128,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,num_warps=8,"
                                          "num_stages=3"),
    ("gemm", GemmShape(512, 2048, 768, dtype="fp16"), "BLOCK_M=64,BLOCK_N=128,BLOCK_K=32,GROUP_M=1,SPLIT_K=1,"
                                                      "num_warps=4,num_stages=4"),
    ("gemm", GemmShape(256, 4096, 4096), "BLOCK_M=64,BLOCK_N=256,BLOCK_K=64,GROUP_M=8,SPLIT_K=1,TMA=1,num_warps=8,"
                                         "num_stages=3"),
    ("gemm", GemmShape(128, 1024, 8192), "BLOCK_M=64,BLOCK_N=64,BLOCK_K=128,GROUP_M=1,SPLIT_K=4,num_warps=4,"
                                         "num_stages=3"),
    ("attention", AttentionShape(2, 8, 1024, 64), "BLOCK_M=128,BLOCK_N=64,ORDER=0,TMA=0,num_warps=8,num_stages=3"),
    ("attention", AttentionShape(1, 16, 2048, 128), "BLOCK_M=128,BLOCK_N=128,ORDER=2,TMA=1,num_warps=8,num_stages=2"),
    ("attention", AttentionShape(4, 4, 512, 64, causal=False), "BLOCK_M=64,BLOCK_N=64,ORDER=1,TMA=0,num_warps=4,"
                                                               "num_stages=3"),
    ("moe", MoeShape(8, 2, 1024, 512, 64, "gate_up"), "BLOCK_SIZE_M=16,BLOCK_SIZE_N=64,BLOCK_SIZE_K=64,GROUP_SIZE_M=1,"
                                                      "num_warps=4,num_stages=3"),
    ("moe", MoeShape(64, 8, 2048, 768, 256, "down"), "BLOCK_SIZE_M=64,BLOCK_SIZE_N=128,BLOCK_SIZE_K=64,"
                                                     "GROUP_SIZE_M=8,num_warps=4,num_stages=3"),
]
TILE_NAMES = {"gemm": ("BLOCK_M", "BLOCK_N", "BLOCK_K"), "attention": ("BLOCK_M", "BLOCK_N"),
              "moe": ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")}


def _split(family: str, config: Config) -> tuple[triton.Config, dict]:
    """The triton.Config of the tile sizes, warps and stages, and the config's other parameters (the kernel's
    run-time arguments and constexprs, passed with the call)."""
    tiles = {k: v for k, v in config.items() if k in TILE_NAMES[family]}
    rest = {k: v for k, v in config.items() if k not in TILE_NAMES[family]}
    return triton.Config(tiles, num_warps=config.num_warps, num_stages=config.num_stages), rest


def gemm_call(shape: GemmShape, config: Config):
    """(kernel, args, grid, triton.Config) of the GEMM launch `kernels/gemm.py` makes (B [K, N] or, 'nk', [N, K];
    split-K's fp32 workspace; pointer tiles or, with TMA, tensor descriptors; not its persistent or composite
    tiles: NotImplementedError)."""
    if config.get("PERSISTENT", 0) or config.get("BLOCK_N2", 0):
        raise NotImplementedError("the persistent and composite-tile GEMM kernels are not read here")
    m, n, k, dtype, nk = shape.m, shape.n, shape.k, TORCH[shape.dtype], shape.layout == "nk"
    a, c = torch.empty(m, k, dtype=dtype), torch.empty(m, n, dtype=dtype)
    b = torch.empty((n, k) if nk else (k, n), dtype=dtype)
    ws = torch.empty(config["SPLIT_K"] * m * n, dtype=torch.float32)
    triton_config, rest = _split("gemm", config)
    align_n, align_k = gemm.alignments(shape.layout, n, k, gemm.shape_strides(shape))
    common = {"M": m, "N": n, "K": k, "stride_cm": n, "stride_cn": 1, "GROUP_M": rest["GROUP_M"],
              "SPLIT_K": rest["SPLIT_K"], "B_NK": nk, "ALIGN_N": align_n, "c_ptr": c, "ws_ptr": ws}
    grid = (triton.cdiv(m, config["BLOCK_M"]) * triton.cdiv(n, config["BLOCK_N"]), config["SPLIT_K"])
    if rest.get("FIXUP"):
        common["FIXUP"] = 1
    bm, bn, bk = config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_K"]
    if rest.get("TMA"):
        b_desc = TensorDescriptor(b, [n, k], [k, 1], [bn, bk]) if nk else TensorDescriptor(b, [k, n], [n, 1], [bk, bn])
        descs = {"a_desc": TensorDescriptor(a, [m, k], [k, 1], [bm, bk]), "b_desc": b_desc}
        return gemm._gemm_tma_kernel, {**common, **descs}, grid, triton_config
    pointers = {"a_ptr": a, "b_ptr": b, "stride_am": k, "stride_ak": 1, "stride_bk": 1 if nk else n,
                "stride_bn": k if nk else 1, "ALIGN_K": align_k}
    return gemm._gemm_kernel, {**common, **pointers}, grid, triton_config


def attention_call(shape: AttentionShape, config: Config):
    """(kernel, args, grid, triton.Config) of the attention launch kernels/attention.py makes (K and V of kv_heads
    heads: grouped-query attention reads K/V head h // (heads // kv_heads))."""
    dims = (shape.batch, shape.heads, shape.seq, shape.head_dim)
    kv_dims = (shape.batch, shape.kv_heads, shape.seq, shape.head_dim)
    q, o = (torch.empty(dims, dtype=TORCH[shape.dtype]) for _ in range(2))
    k, v = (torch.empty(kv_dims, dtype=TORCH[shape.dtype]) for _ in range(2))
    triton_config, rest = _split("attention", config)
    strides = {f"stride_{t}{d}": s for t, x in zip("qkvo", (q, k, v, o))
               for d, s in zip("bhmd" if t in "qo" else "bhnd", x.stride())}
    if rest["TMA"]:
        rows = (config["BLOCK_M"], config["BLOCK_N"], config["BLOCK_N"], config["BLOCK_M"])
        q, k, v, o = (TensorDescriptor(t, list(t.shape), list(t.stride()), [1, 1, r, shape.head_dim])
                      for t, r in zip((q, k, v, o), rows))
    args = {"q_src": q, "k_src": k, "v_src": v, "o_src": o, "lse_ptr": torch.empty(1), **strides,
            "heads": shape.heads, "kv_group": shape.heads // shape.kv_heads, "seq": shape.seq, "qk_scale": 0.125,
            "HEAD_DIM": shape.head_dim,
            "ORDER": rest["ORDER"], "CAUSAL": shape.causal, "STORE_LSE": False, "TMA": bool(rest["TMA"])}
    grid = (triton.cdiv(shape.seq, config["BLOCK_M"]) * shape.batch * shape.heads,)
    return attention._attn_fwd, args, grid, triton_config


@functools.lru_cache(maxsize=1)
def _moe_inputs(shape: MoeShape):
    """One shape's inputs, shared by its configs' launches (a replay builds every config's launch before analysing
    them: fresh experts' weights for each, 0.5 GB a config at 64 experts, ran a 60-config sample out of memory)."""
    return moe.make_inputs(shape, "cpu", 0)


@functools.lru_cache(maxsize=8)
def _moe_alignment(shape: MoeShape, block_m: int):
    return moe.align(_moe_inputs(shape)[2], shape.experts, block_m)


def moe_call(shape: MoeShape, config: Config):
    """(kernel, args, grid, triton.Config) of the fused-MoE launch kernels/moe.py makes, on the shape's own routing
    (the align step run on this CPU: the kernel reads its padded total)."""
    a, w, ids, weights = _moe_inputs(shape)
    bm = config["BLOCK_SIZE_M"]
    row_ids, tile_experts, padded = _moe_alignment(shape, bm)
    out = torch.empty(shape.rows, shape.n, dtype=a.dtype)
    triton_config, rest = _split("moe", config)
    args = {"a_ptr": a, "b_ptr": w, "c_ptr": out, "weights_ptr": weights.reshape(-1).float(), "row_ids_ptr": row_ids,
            "tile_experts_ptr": tile_experts, "padded_ptr": padded, "N": shape.n, "K": shape.k, "EM": row_ids.numel(),
            "num_rows": shape.rows, "stride_am": a.stride(0), "stride_ak": 1, "stride_be": w.stride(0),
            "stride_bn": w.stride(1), "stride_bk": 1, "stride_cm": shape.n, "stride_cn": 1,
            "GROUP_SIZE_M": rest["GROUP_SIZE_M"], "A_ROW_DIV": shape.topk if shape.gemm == "gate_up" else 1,
            "MUL_WEIGHT": shape.gemm == "down"}
    grid = (triton.cdiv(row_ids.numel(), bm) * triton.cdiv(shape.n, config["BLOCK_SIZE_N"]),)
    return moe._moe_kernel, args, grid, triton_config


def gemm_launches(shape: GemmShape, config: Config) -> list:
    """Every launch of a GEMM config: the GEMM, then, for split-K summed outside it, the reduction kernel."""
    launches = [gemm_call(shape, config)]
    if config["SPLIT_K"] > 1 and not config.get("FIXUP", 0):
        fn, args, _, _ = launches[0]
        reduce_args = {"ws_ptr": args["ws_ptr"], "c_ptr": args["c_ptr"], "M": shape.m, "N": shape.n,
                       "stride_cm": shape.n, "stride_cn": 1, "SPLIT_K": config["SPLIT_K"], "ALIGN_N": args["ALIGN_N"]}
        tiles = triton.Config({"BLOCK_M": gemm.REDUCE_BLOCK_M, "BLOCK_N": gemm.REDUCE_BLOCK_N},
                              num_warps=gemm.REDUCE_NUM_WARPS)
        grid = (triton.cdiv(shape.m, gemm.REDUCE_BLOCK_M), triton.cdiv(shape.n, gemm.REDUCE_BLOCK_N))
        launches.append((gemm._splitk_reduce_kernel, reduce_args, grid, tiles))
    return launches


CALLS = {"gemm": gemm_call, "attention": attention_call, "moe": moe_call}
LAUNCHES = {"gemm": gemm_launches, "attention": lambda s, c: [attention_call(s, c)],
            "moe": lambda s, c: [moe_call(s, c)]}


def _model(family: str, shape, config: Config) -> dict[str, float]:
    """The family model's FLOPs and bytes of the same config (module docstring)."""
    bd = roofline.predict(shape, configs_to_columns([config]), PROFILE)
    elem = 2  # bf16 and fp16
    if family == "gemm":
        out = config["SPLIT_K"] * shape.m * shape.n * 4 if config["SPLIT_K"] > 1 else shape.m * shape.n * elem
        return {"flops": bd.padded_flops[0], "loads": bd.l2_bytes[0], "stores": out}
    if family == "attention":
        blocks, d = bd.key_blocks[0], shape.head_dim
        q_or_o = shape.batch * shape.heads * shape.seq * d * elem
        return {"flops": bd.padded_flops[0], "loads": blocks * 2 * config["BLOCK_N"] * d * elem + q_or_o,
                "stores": q_or_o}
    t = moe_tiling(shape, configs_to_columns([config]), moe_routing(shape)).tiles
    weights = t.ctas[0] * min(config["BLOCK_SIZE_N"], shape.n) * shape.k * elem
    gathered = shape.rows * shape.k * elem * t.tiles_n[0]  # routed rows only: padding rows are masked
    padding_rows = t.tiles_m[0] * t.bm[0] - shape.rows
    return {"flops": bd.padded_flops[0], "weights": weights, "gathered": gathered,
            "padding": padding_rows * shape.k * elem * t.tiles_n[0], "stores": shape.rows * shape.n * elem,
            "padding_stores": padding_rows * shape.n * elem}


def figures(family: str, shape, config_text: str) -> dict[str, float]:
    """The IR's and the family model's FLOPs and bytes of one config (ValueError where the IR was not read)."""
    from rooftune.candidates import parse_config

    config = parse_config(config_text)
    kernel, args, grid, triton_config = CALLS[family](shape, config)
    (analysis,) = analyze(kernel, [triton_config], args, grid, arch=90)
    if not isinstance(analysis, ConfigAnalysis):
        raise ValueError(f"{family} {shape} {config_text}: not read: {analysis.stage}: {analysis.error}")
    c = analysis.counts
    loads = {t.name: t.load_bytes for t in c.tensors}
    ir = {"ir_flops": c.total_mma_flops, "ir_loads": c.load_bytes, "ir_stores": c.store_bytes}
    if family == "moe":
        ir.update(ir_weights=loads["b_ptr"], ir_a=loads["a_ptr"])
    elif family == "attention":
        ir["ir_loads"] = sum(v for n, v in loads.items() if n in ("q_src", "k_src", "v_src"))
    return {**ir, **{f"model_{k}": float(v) for k, v in _model(family, shape, config).items()}}


def rows() -> list[str]:
    """The comparison's table, one row per case (markdown)."""
    out = ["| family | shape | config | IR GFLOP | model GFLOP | IR MB loaded | model MB | IR MB stored | model MB |",
           "|---|---|---|---|---|---|---|---|---|"]
    for family, shape, text in CASES:
        f = figures(family, shape, text)
        model_loads = f.get("model_loads", f.get("model_weights", 0) + f.get("model_gathered", 0))
        note = f" (+{f['model_padding'] / 1e6:.3f} MB of padding rows)" if family == "moe" else ""
        store_note = f" (+{f['model_padding_stores'] / 1e6:.3f} MB of padding rows)" if family == "moe" else ""
        out.append(f"| {family} | {shape} | {text} | {f['ir_flops'] / 1e9:.4f} | {f['model_flops'] / 1e9:.4f} | "
                   f"{(f.get('ir_weights', 0) + f.get('ir_a', 0) or f['ir_loads']) / 1e6:.3f} | "
                   f"{model_loads / 1e6:.3f}{note} | {f['ir_stores'] / 1e6:.3f} | "
                   f"{f['model_stores'] / 1e6:.3f}{store_note} |")
    return out


if __name__ == "__main__":
    np.set_printoptions(precision=4)
    print("\n".join(rows()))
    sys.exit(0)
