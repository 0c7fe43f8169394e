"""Problem shapes (GEMM, attention, fused MoE) and parsing them from the command line."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rooftune.inputs import check_input, read_text

DTYPES = ("bf16", "fp16", "fp32", "tf32")
DTYPE_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "tf32": 4, "fp8e4m3": 1}
# FP8 e4m3 (torch.float8_e4m3fn): the operands of the FP8 fused-MoE family, never a --dtype of the other
# families (DTYPES); the cost model knows its bytes and the profile its tensor rate (`fp8_tflops`).
FP8_DTYPE = "fp8e4m3"
GEMM_LAYOUTS = ("kn", "nk")  # B stored [K, N] row-major, or [N, K] (an nn.Linear weight: y = x @ W.T)
# A stored [M, K] row-major, or [K, M] (A is the transpose of a row-major tensor, e.g. x.T @ W).
# The model and the recorded datasets know both; rooftune's own Triton kernel (kernels/gemm.py)
# reads A as [M, K] only.
GEMM_A_LAYOUTS = ("mk", "km")


class ShapeError(ValueError):
    """A shape string or shape value that does not describe a valid problem."""


def _check_dims(kind: str, **dims: int) -> None:
    for name, value in dims.items():
        if not isinstance(value, int) or isinstance(value, bool):
            raise ShapeError(f"{kind}: {name} must be an integer, got {value!r}")
        if value < 1:
            raise ShapeError(f"{kind}: {name} must be >= 1, got {value}")


# Size limits: what rooftune's kernels can index. kernels/gemm.py and kernels/attention.py put tile
# origins in 64-bit pointers but keep program ids and offsets inside a tile 32-bit, so:
# - a row length (GEMM N and K) times the largest tile edge must fit int32: a tile's offset
#   row·stride (row < 256), and B's step BLOCK_K·N, are int32;
# - a row index (GEMM M, attention seq) plus the largest tile edge must fit int32: the last
#   tile's row indices rm0 + row are int32;
# - the 1-D grid at the smallest tile must fit int32 (program ids; CUDA's grid x limit is 2**31 - 1).
# tests/candidates/test_size_limits.py checks these numbers against the published spaces.
INT32_MAX = 2**31 - 1
MAX_TILE_EDGE = 256  # the largest BLOCK_* value of any published space (tests/candidates checks)
MAX_ROW_ELEMS = INT32_MAX // MAX_TILE_EDGE  # 8,388,607
MAX_ROWS = INT32_MAX - MAX_TILE_EDGE
GEMM_MIN_TILE = 16  # the GEMM space's smallest BLOCK_M and BLOCK_N
ATTENTION_MIN_BLOCK_M = 64  # the attention space's smallest BLOCK_M
MOE_MIN_BLOCK_M, MOE_MIN_BLOCK_N = 16, 32  # the MoE space's smallest BLOCK_SIZE_M and BLOCK_SIZE_N


def _check_size(kind: str, limits: dict[str, tuple[int, int]], programs: int, grid: str) -> None:
    """ShapeError naming the first field over its limit (`limits`: name -> (value, max)), or the grid."""
    for name, (value, most) in limits.items():
        if value > most:
            raise ShapeError(f"{kind}: {name} = {value} is over the limit {most:,} (32-bit indexing "
                             f"in rooftune's kernels; candidates/shapes.py)")
    if programs > INT32_MAX:
        raise ShapeError(f"{kind}: {grid} = {programs:,} programs at the smallest tile, over the limit "
                         f"{INT32_MAX:,} (32-bit program ids; candidates/shapes.py)")


@dataclass(frozen=True)
class GemmShape:
    """C[M, N] = A @ B, with B stored as `layout` ('kn': [K, N], 'nk': [N, K]) and A as `a_layout`
    ('mk': [M, K], 'km': [K, M]), each row-major."""

    m: int
    n: int
    k: int
    layout: str = "kn"
    dtype: str = "bf16"
    a_layout: str = "mk"

    def __post_init__(self):
        _check_dims("GEMM shape", m=self.m, n=self.n, k=self.k)
        _check_size("GEMM shape", {"m": (self.m, MAX_ROWS), "n": (self.n, MAX_ROW_ELEMS), "k": (self.k, MAX_ROW_ELEMS)},
                    -(-self.m // GEMM_MIN_TILE) * -(-self.n // GEMM_MIN_TILE), "output tiles (m/16 · n/16)")
        if self.layout not in GEMM_LAYOUTS:
            raise ShapeError(f"GEMM layout must be one of {GEMM_LAYOUTS}, got {self.layout!r}")
        if self.dtype not in DTYPES:
            raise ShapeError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if self.a_layout not in GEMM_A_LAYOUTS:
            raise ShapeError(f"GEMM A layout (a_layout) must be one of {GEMM_A_LAYOUTS} "
                             f"('mk': A [M, K], 'km': A stored [K, M]), got {self.a_layout!r}")

    @property
    def flops(self) -> int:
        """2·M·N·K floating-point operations."""
        return 2 * self.m * self.n * self.k

    def __str__(self) -> str:
        parts = [] if (self.layout, self.dtype) == ("kn", "bf16") else [self.layout, self.dtype]
        if self.a_layout != "mk":
            parts.append(f"A {self.a_layout}")
        return f"{self.m}x{self.n}x{self.k}" + (f" ({', '.join(parts)})" if parts else "")


@dataclass(frozen=True)
class AttentionShape:
    """Attention forward over Q [batch, heads, seq, head_dim] and K, V [batch, kv_heads, seq, head_dim];
    kv_heads (default: heads) divides heads, and kv_heads < heads is grouped-query attention."""

    batch: int
    heads: int
    seq: int
    head_dim: int
    causal: bool = True
    dtype: str = "bf16"
    kv_heads: int | None = None

    def __post_init__(self):
        if self.kv_heads is None:
            object.__setattr__(self, "kv_heads", self.heads)
        _check_dims("attention shape", batch=self.batch, heads=self.heads, seq=self.seq,
                    head_dim=self.head_dim, kv_heads=self.kv_heads)
        if self.heads % self.kv_heads:
            raise ShapeError(f"attention kv_heads ({self.kv_heads}) must divide heads ({self.heads})")
        _check_size("attention shape", {"seq": (self.seq, MAX_ROWS)},
                    -(-self.seq // ATTENTION_MIN_BLOCK_M) * self.batch * self.heads, "batch · heads · seq/64")
        if self.head_dim not in (16, 32, 64, 128, 256):
            raise ShapeError(f"attention head_dim must be a power of two from 16 to 256, got {self.head_dim}")
        if self.dtype not in DTYPES:
            raise ShapeError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")

    @property
    def flops(self) -> int:
        """4·B·H·S²·D for QKᵀ and PV, halved (approximately) under a causal mask."""
        full = 4 * self.batch * self.heads * self.seq * self.seq * self.head_dim
        return full // 2 if self.causal else full

    def __str__(self) -> str:
        kv = "" if self.kv_heads == self.heads else f"x{self.kv_heads}"
        return f"{self.batch}x{self.heads}x{self.seq}x{self.head_dim}{kv}" + ("" if self.causal else " (non-causal)")


MOE_GEMMS = ("gate_up", "down")  # the two GEMMs of an MoE layer (kernels/moe.py)


@dataclass(frozen=True)
class MoeShape:
    """One GEMM of a fused mixture-of-experts layer as serving engines run it (kernels/moe.py): `tokens`
    tokens, each routed to `topk` of `experts` experts (`candidates/routing.py` draws which, from `seed`),
    every expert holding its own weights [N, K]. `gemm` 'gate_up': N = 2·intermediate, K = hidden (the
    fused gate and up projections, input the hidden states); 'down': N = hidden, K = intermediate (input
    the activations of the routed rows, output scaled by each row's routing weight). `intermediate` is per
    tensor-parallel shard, as the shard's kernel sees it (vLLM's N in a table's file name)."""

    experts: int
    topk: int
    hidden: int
    intermediate: int
    tokens: int
    gemm: str = "gate_up"
    dtype: str = "bf16"
    seed: int = 0

    def __post_init__(self):
        _check_dims("MoE shape", experts=self.experts, topk=self.topk, hidden=self.hidden,
                    intermediate=self.intermediate, tokens=self.tokens)
        if self.topk > self.experts:
            raise ShapeError(f"MoE topk ({self.topk}) must be at most experts ({self.experts})")
        if self.gemm not in MOE_GEMMS:
            raise ShapeError(f"MoE gemm must be one of {MOE_GEMMS}, got {self.gemm!r}")
        if self.dtype not in DTYPES:
            raise ShapeError(f"dtype must be one of {DTYPES}, got {self.dtype!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ShapeError(f"MoE routing seed must be an integer >= 0, got {self.seed!r}")
        # Rows are the routed token slots plus at most one partial tile of padding per expert (kernels/moe.py).
        padded = self.rows + min(self.experts, self.rows) * (MOE_MIN_BLOCK_M - 1)
        _check_size("MoE shape", {"tokens · topk": (self.rows, MAX_ROWS - self.experts * MAX_TILE_EDGE),
                                  "n": (self.n, MAX_ROW_ELEMS), "k": (self.k, MAX_ROW_ELEMS)},
                    -(-padded // MOE_MIN_BLOCK_M) * -(-self.n // MOE_MIN_BLOCK_N), "row tiles · column tiles")

    @property
    def n(self) -> int:
        """Output columns of the GEMM: 2·intermediate (gate_up) or hidden (down)."""
        return 2 * self.intermediate if self.gemm == "gate_up" else self.hidden

    @property
    def k(self) -> int:
        """The reduction length: hidden (gate_up) or intermediate (down)."""
        return self.hidden if self.gemm == "gate_up" else self.intermediate

    @property
    def layout(self) -> str:
        """B's storage, as GemmShape's: each expert's weight is [N, K] (vLLM's w1 and w2), 'nk'."""
        return "nk"

    @property
    def out_dtype(self) -> str:
        """C's element type: the operands' (an FP8 layer's C is bf16: MoeFp8Shape)."""
        return self.dtype

    @property
    def rescaled_partials(self) -> bool:
        """Whether the kernel holds each K block's partial product beside the accumulator (MoeFp8Shape's block
        scales); never in bf16 or fp16."""
        return False

    @property
    def rows(self) -> int:
        """Routed rows, tokens · topk: the rows the GEMM computes (one per token and chosen expert)."""
        return self.tokens * self.topk

    @property
    def flops(self) -> int:
        """2·rows·N·K floating-point operations of useful work (padding rows excluded)."""
        return 2 * self.rows * self.n * self.k

    def __str__(self) -> str:
        extras = [] if self.dtype == "bf16" else [self.dtype]
        if self.seed:
            extras.append(f"routing seed {self.seed}")
        return (f"{self.experts}x{self.topk}x{self.hidden}x{self.intermediate}x{self.tokens} {self.gemm}"
                + (f" ({', '.join(extras)})" if extras else ""))


# The FP8 variants of the fused MoE (kernels/moe_fp8.py, vLLM's `dtype=fp8_w8a8` tables): 'w8a8' per-tensor
# scales (one per expert's weights, one static scale for the activations); 'block' 128×128 block scales on the
# weights and per-token-group (1×128) scales on the activations (`block_shape=[128,128]`).
FP8_QUANTS = ("w8a8", "block")
FP8_BLOCK = (128, 128)  # (N, K) of a weight's quant block; the activations' group is its K
FP8_VLLM_DTYPE = "fp8_w8a8"  # vLLM's dtype word in a table's name, for both variants


@dataclass(frozen=True)
class MoeFp8Shape:
    """One GEMM of a fused MoE layer with FP8 (e4m3) weights and activations (kernels/moe_fp8.py): the sizes and
    routing of `MoeShape`, and `quant`, the scales' layout (FP8_QUANTS). The layer's input and output stay bf16:
    its activations are quantized to FP8 as part of the layer (per tensor with a static scale, or per token
    and 128 columns), so `dtype` (the operands') is FP8 and `out_dtype` bf16. Block scales need the weights
    to be whole blocks: hidden and intermediate (per shard) multiples of 128, as vLLM requires."""

    experts: int
    topk: int
    hidden: int
    intermediate: int
    tokens: int
    gemm: str = "gate_up"
    quant: str = "w8a8"
    seed: int = 0

    def __post_init__(self):
        if self.quant not in FP8_QUANTS:
            raise ShapeError(f"FP8 MoE quant must be one of {FP8_QUANTS}, got {self.quant!r}")
        base = self.base  # the sizes' and the routing seed's checks
        if self.quant == "block" and (base.hidden % FP8_BLOCK[1] or base.intermediate % FP8_BLOCK[0]):
            raise ShapeError(f"block-quantized FP8 MoE needs hidden ({self.hidden}) and intermediate per shard "
                             f"({self.intermediate}) to be multiples of {FP8_BLOCK[0]} (whole 128×128 weight blocks)")

    @property
    def base(self) -> MoeShape:
        """The bf16 MoeShape of the same GEMM and routing (the sizes, the seeded draw, kernels/moe.py's align)."""
        return MoeShape(self.experts, self.topk, self.hidden, self.intermediate, self.tokens, gemm=self.gemm,
                        seed=self.seed)

    dtype = FP8_DTYPE
    out_dtype = "bf16"
    layout = "nk"

    @property
    def rescaled_partials(self) -> bool:
        """Block scales rescale each K block's partial product before adding it to the accumulator, so the kernel
        holds the partial product beside the accumulator (twice the tile's fp32 registers); per-tensor scales
        rescale once after the loop."""
        return self.quant == "block"
    n = property(lambda self: self.base.n, doc=MoeShape.n.__doc__)
    k = property(lambda self: self.base.k, doc=MoeShape.k.__doc__)
    rows = property(lambda self: self.tokens * self.topk, doc=MoeShape.rows.__doc__)
    flops = property(lambda self: 2 * self.rows * self.n * self.k, doc=MoeShape.flops.__doc__)

    @property
    def block_shape(self) -> tuple[int, int] | None:
        """vLLM's block_shape [N, K] of the weights' scales; None for per-tensor scales."""
        return FP8_BLOCK if self.quant == "block" else None

    def __str__(self) -> str:
        seed = f", routing seed {self.seed}" if self.seed else ""
        return (f"{self.experts}x{self.topk}x{self.hidden}x{self.intermediate}x{self.tokens} {self.gemm} "
                f"(fp8 {self.quant}{seed})")


_DIMS = re.compile(r"^\s*\d+(\s*[x×,]\s*\d+)*\s*$")


def _split_dims(text: str, count: int, what: str, optional: int = 0) -> list[int]:
    """`count` integers joined by 'x' (or up to `optional` more)."""
    expected = f"{count}" if not optional else f"{count} to {count + optional}"
    if not isinstance(text, str) or not _DIMS.match(text):
        raise ShapeError(f"cannot parse {what} shape {text!r}: expected {expected} positive integers joined by 'x'")
    dims = [int(part) for part in re.split(r"\s*[x×,]\s*", text.strip())]
    if not count <= len(dims) <= count + optional:
        raise ShapeError(f"{what} shape {text!r} has {len(dims)} dimension(s), expected {expected}")
    return dims


def parse_gemm_shape(text: str, layout: str = "kn", dtype: str = "bf16", a_layout: str = "mk") -> GemmShape:
    """'4096x4096x4096' -> GemmShape(m=4096, n=4096, k=4096)."""
    m, n, k = _split_dims(text, 3, "GEMM (MxNxK)")
    return GemmShape(m, n, k, layout=layout, dtype=dtype, a_layout=a_layout)


def parse_attention_shape(text: str, causal: bool = True, dtype: str = "bf16") -> AttentionShape:
    """'2x32x4096x128' -> AttentionShape(batch=2, heads=32, seq=4096, head_dim=128); a fifth number is
    kv_heads ('2x32x4096x128x8': grouped-query attention, 8 K/V heads)."""
    b, h, s, d, *kv = _split_dims(text, 4, "attention (BxHxSxD[xKV])", optional=1)
    return AttentionShape(b, h, s, d, causal=causal, dtype=dtype, kv_heads=kv[0] if kv else None)


def parse_moe_shape(text: str, gemm: str = "gate_up", dtype: str = "bf16", seed: int = 0) -> MoeShape:
    """'128x8x2048x768x64' -> MoeShape(experts=128, topk=8, hidden=2048, intermediate=768, tokens=64)."""
    e, topk, hidden, inter, tokens = _split_dims(text, 5, "MoE (ExTOPKxHIDDENxINTERMEDIATExTOKENS)")
    return MoeShape(e, topk, hidden, inter, tokens, gemm=gemm, dtype=dtype, seed=seed)


def parse_moe_fp8_shape(text: str, gemm: str = "gate_up", quant: str = "w8a8", seed: int = 0) -> MoeFp8Shape:
    """'256x8x7168x256x64' with quant 'block' -> MoeFp8Shape(256, 8, 7168, 256, 64, quant='block')."""
    e, topk, hidden, inter, tokens = _split_dims(text, 5, "MoE (ExTOPKxHIDDENxINTERMEDIATExTOKENS)")
    return MoeFp8Shape(e, topk, hidden, inter, tokens, gemm=gemm, quant=quant, seed=seed)


class ShapeListError(ValueError):
    """A --shapes file that is not a JSON list of shape objects ({m, n, k[, layout]} or attention's)."""


def _load_list(path: str | Path, keys: tuple[str, ...], build: Callable[[dict], object]) -> list:
    """`build(entry)` for each object of the JSON list at `path`, every entry holding `keys` (other keys
    are the builder's to read or ignore); a missing file, bad JSON, an empty list, an entry without
    the keys or one `build` rejects (ShapeError) raises ShapeListError naming the file and the entry."""
    path = check_input(path)  # a folder, a pipe or a device: refused before anything opens it
    if not path.exists():
        raise ShapeListError(f"{path}: no such file")
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as exc:
        raise ShapeListError(f"{path}: not valid JSON ({exc})") from None
    names = ", ".join(keys)
    if not isinstance(data, list) or not data:
        raise ShapeListError(f"{path}: expected a non-empty JSON list of {{{names}}} objects")
    shapes = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or not set(keys) <= set(entry):
            raise ShapeListError(f"{path}: entry {i} must be an object with keys {names}; got {entry!r}")
        try:
            shapes.append(build(entry))
        except ShapeError as exc:
            raise ShapeListError(f"{path}: entry {i}: {exc}") from None
    return shapes


def load_shapes(path: str | Path) -> list[GemmShape]:
    """Read a JSON list of objects with integer keys m, n, k (optional layout 'kn'/'nk', default 'kn', and dtype,
    default 'bf16'; other keys ignored) as GemmShapes; errors name the file and the entry."""
    return _load_list(path, ("m", "n", "k"), lambda e: GemmShape(e["m"], e["n"], e["k"], layout=e.get("layout", "kn"),
                                                                dtype=e.get("dtype", "bf16")))


def _attention_entry(entry: dict) -> AttentionShape:
    causal = entry.get("causal", True)
    if not isinstance(causal, bool):  # 0/1 or "false" would otherwise pass as truthy values
        raise ShapeError(f"causal must be true or false, got {causal!r}")
    return AttentionShape(entry["batch"], entry["heads"], entry["seq"], entry["head_dim"], causal=causal,
                          dtype=entry.get("dtype", "bf16"), kv_heads=entry.get("kv_heads"))


def load_attention_shapes(path: str | Path) -> list[AttentionShape]:
    """Read a JSON list of objects with integer keys batch, heads, seq, head_dim (optional causal,
    default true, dtype, default 'bf16', and kv_heads, default heads; other keys ignored) as
    AttentionShapes; errors name the file and the entry."""
    return _load_list(path, ("batch", "heads", "seq", "head_dim"), _attention_entry)


MOE_KEYS = ("experts", "topk", "hidden", "intermediate", "tokens", "gemm")


def load_moe_shapes(path: str | Path) -> list[MoeShape]:
    """Read a JSON list of objects with keys experts, topk, hidden, intermediate, tokens (integers) and gemm
    ('gate_up' or 'down'), optional dtype (default 'bf16') and seed (the routing's, default 0); other keys
    (a model's name, its source) are ignored; errors name the file and the entry."""
    return _load_list(path, MOE_KEYS, lambda e: MoeShape(*(e[k] for k in MOE_KEYS), dtype=e.get("dtype", "bf16"),
                                                         seed=e.get("seed", 0)))


def load_moe_fp8_shapes(path: str | Path) -> list[MoeFp8Shape]:
    """Read a JSON list of FP8 MoE shapes: `load_moe_shapes`' keys and quant ('w8a8' or 'block'); optional seed."""
    return _load_list(path, (*MOE_KEYS, "quant"), lambda e: MoeFp8Shape(*(e[k] for k in MOE_KEYS), quant=e["quant"],
                                                                     seed=e.get("seed", 0)))


def gemm_shape_id(shape: GemmShape) -> str:
    """File-name key of a GEMM shape: '4096x4096x4096-nk-bf16'."""
    return f"{shape.m}x{shape.n}x{shape.k}-{shape.layout}-{shape.dtype}"


def attention_shape_id(shape: AttentionShape) -> str:
    """File-name key of an attention shape (four dimensions, so never a GEMM id): '4x32x4096x128-causal-bf16',
    or '-full-' without the causal mask; with fewer K/V heads a fifth number, '1x32x8192x128x8-causal-bf16'."""
    mask = "causal" if shape.causal else "full"
    kv = "" if shape.kv_heads == shape.heads else f"x{shape.kv_heads}"
    return f"{shape.batch}x{shape.heads}x{shape.seq}x{shape.head_dim}{kv}-{mask}-{shape.dtype}"


def moe_shape_id(shape: MoeShape) -> str:
    """File-name key of an MoE shape: 'moe-128x8x2048x768-m64-gate_up-bf16' (experts, topk, hidden,
    intermediate, tokens), '-r<seed>' added where the routing seed is not 0."""
    seed = f"-r{shape.seed}" if shape.seed else ""
    return (f"moe-{shape.experts}x{shape.topk}x{shape.hidden}x{shape.intermediate}-m{shape.tokens}-{shape.gemm}"
            f"-{shape.dtype}{seed}")


def gemm_dims(shape: GemmShape) -> str:
    """The GEMM shape's dimensions as `parse_gemm_shape` reads them: 'MxNxK'."""
    return f"{shape.m}x{shape.n}x{shape.k}"


def attention_dims(shape: AttentionShape) -> str:
    """The attention shape's dimensions as `parse_attention_shape` reads them: 'BxHxSxD', 'xKV' where kv_heads < heads."""
    kv = "" if shape.kv_heads == shape.heads else f"x{shape.kv_heads}"
    return f"{shape.batch}x{shape.heads}x{shape.seq}x{shape.head_dim}{kv}"


def moe_dims(shape: MoeShape) -> str:
    """The MoE shape's dimensions as `parse_moe_shape` reads them: 'ExTOPKxHIDDENxINTERMEDIATExTOKENS'."""
    return f"{shape.experts}x{shape.topk}x{shape.hidden}x{shape.intermediate}x{shape.tokens}"


def moe_fp8_shape_id(shape: MoeFp8Shape) -> str:
    """File-name key of an FP8 MoE shape: 'moe-256x8x7168x256-m64-gate_up-fp8-block' ('-r<seed>' as for MoE)."""
    seed = f"-r{shape.seed}" if shape.seed else ""
    return (f"moe-{shape.experts}x{shape.topk}x{shape.hidden}x{shape.intermediate}-m{shape.tokens}-{shape.gemm}"
            f"-fp8-{shape.quant}{seed}")
