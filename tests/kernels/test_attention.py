"""The Triton attention forward against an fp64 reference: causal or not, odd seq, every ORDER, pointer
loads and TMA, grouped-query attention, the check, compiling.

On the CPU these run in Triton's interpreter (fp16/fp32 inputs: it mishandles bf16); GPU-only tests are marked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl
from fakes import KernelRecorder
from triton._utils import canonicalize_dtype
from triton.runtime.jit import MockTensor
from triton.tools.tensor_descriptor import TensorDescriptor

from rooftune.candidates import AttentionShape, Config, legal_configs
from rooftune.candidates.attention_space import ATTENTION_SPACE, TMA_BARRIER_BYTES, attention_smem_bytes
from rooftune.hwprofiles import load_profile
from rooftune.kernels import attention as attn
from rooftune.kernels.harness.check import TOLERANCE, check_attention, relative_error
from rooftune.roofline.attention import program_sequence

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def cfg(bm: int = 32, bn: int = 16, order: int = 0, warps: int = 4, stages: int = 2, tma: int = 0) -> Config:
    return Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, ORDER=order, TMA=tma)


def assert_matches(shape: AttentionShape, config: Config, seed: int = 0) -> torch.Tensor:
    q, k, v = attn.make_inputs(shape, DEVICE, seed)
    out = attn.attention(q, k, v, config, causal=shape.causal)
    assert out.shape == q.shape and out.dtype == q.dtype
    rel = relative_error(out, attn.reference(q, k, v, shape.causal))
    assert rel <= TOLERANCE[q.dtype], f"{shape} {config}: rel err {rel:.3g}"
    return out


# (batch, heads, seq, head_dim, dtype), config: seq not a multiple of the blocks (1, 17, 100, 130),
# one seq shorter than BLOCK_N, every ORDER, BLOCK_M != BLOCK_N, both warp counts, one stage.
CASES = [
    ((1, 2, 1, 16, "fp16"), cfg(32, 16, 0)),
    ((2, 1, 17, 64, "fp32"), cfg(32, 32, 1, warps=8)),
    ((1, 3, 100, 16, "fp16"), cfg(64, 16, 2, stages=1)),
    ((1, 2, 130, 64, "fp16"), cfg(32, 16, 3, warps=8)),
    ((1, 1, 70, 128, "fp16"), cfg(64, 32, 1)),
    ((2, 2, 48, 32, "fp32"), cfg(32, 16, 2)),  # seq a multiple of BLOCK_N but not of BLOCK_M
]


@pytest.mark.parametrize("tma", [0, 1], ids=["pointers", "tma"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("dims, config", CASES, ids=lambda x: "x".join(map(str, x)) if isinstance(x, tuple) else str(x))
def test_matches_reference(dims, config, causal, tma):
    assert_matches(AttentionShape(*dims[:4], causal=causal, dtype=dims[4]), Config.make(
        config.num_warps, config.num_stages, **{**config.kernel_params(), "TMA": tma}))


# Grouped-query attention: (batch, heads, kv_heads, seq, head_dim), ratios 1 (kv_heads = heads), 2, 4, 8.
# the longest (130 keys, head_dim 64) is slow in the interpreter: -m slow
GQA_CASES = [(1, 8, 1, 37, 16), (2, 4, 2, 65, 32), pytest.param((1, 8, 2, 130, 64), marks=pytest.mark.slow),
             (1, 2, 2, 20, 16)]


@pytest.mark.parametrize("tma", [0, 1], ids=["pointers", "tma"])
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("dims", GQA_CASES, ids=lambda d: "x".join(map(str, d)))
def test_grouped_query_attention_matches_sdpa_and_the_reference(dims, causal, tma):
    batch, heads, kv_heads, seq, head_dim = dims
    shape = AttentionShape(batch, heads, seq, head_dim, causal=causal, dtype="fp32", kv_heads=kv_heads)
    q, k, v = attn.make_inputs(shape, DEVICE, 3)
    assert k.shape == v.shape == (batch, kv_heads, seq, head_dim)
    out = attn.attention(q, k, v, cfg(32, 16, 3, tma=tma), causal=causal)
    ref = attn.reference(q, k, v, causal)
    assert relative_error(out, ref) <= TOLERANCE[torch.float32]
    sdpa = torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double(), is_causal=causal,
                                                            enable_gqa=True)
    assert relative_error(ref, sdpa) < 1e-6  # the repeated-K/V reference is SDPA's grouped-query attention


def test_tma_config_on_tensors_descriptors_cannot_address_runs_with_pointers():
    shape = AttentionShape(1, 2, 24, 16, dtype="fp32")
    q, k, v = attn.make_inputs(shape, DEVICE, 6)
    storage = torch.empty(q.numel() + 1, dtype=q.dtype, device=DEVICE)
    q_odd = storage[1:].view(q.shape).copy_(q)  # base 4 bytes past 16-byte alignment
    assert attn.tma_ready(q, k, v) and not attn.tma_ready(q_odd)
    out = attn.attention(q_odd, k, v, cfg(32, 16, 1, tma=1))
    assert relative_error(out, attn.reference(q, k, v)) <= TOLERANCE[torch.float32]
    with pytest.raises(ValueError, match="TMA config needs"):
        attn.make_launcher(cfg(tma=1), shape, [(q_odd, k, v)], torch.empty_like(q))


def test_block_n_larger_than_block_m_is_still_correct():
    # Outside the space (BLOCK_N must divide BLOCK_M there), but the loop split does not rely on it.
    assert_matches(AttentionShape(1, 2, 50, 16, dtype="fp16"), cfg(16, 32, 1))


def test_causal_first_row_is_its_own_value_and_rows_ignore_later_keys():
    shape = AttentionShape(1, 2, 40, 16, dtype="fp32")
    q, k, v = attn.make_inputs(shape, DEVICE, seed=2)
    out = attn.attention(q, k, v, cfg(32, 16, 3))
    assert torch.allclose(out[:, :, 0], v[:, :, 0])
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 20:] += 5.0
    v2[:, :, 20:] -= 3.0
    assert torch.equal(attn.attention(q, k2, v2, cfg(32, 16, 3))[:, :, :20], out[:, :, :20])


def test_strided_views_scale_out_and_log_sum_exp():
    # Q, K, V as [batch, seq, heads, head_dim] storage seen through a transpose; an explicit scale.
    q, k, v = (t.transpose(1, 2) for t in attn.make_inputs(AttentionShape(2, 33, 3, 16, dtype="fp32"), DEVICE, 5))
    assert not q.is_contiguous()
    out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=DEVICE)
    lse = torch.full(q.shape[:3], float("nan"), dtype=torch.float32, device=DEVICE)
    assert attn.attention(q, k, v, cfg(32, 16, 2), out=out, scale=0.3, lse=lse) is out
    assert relative_error(out, attn.reference(q, k, v, True, scale=0.3)) <= TOLERANCE[torch.float32]
    scores = (q.double() @ k.double().transpose(-1, -2)) * 0.3
    scores = scores.masked_fill(torch.ones(33, 33, dtype=torch.bool).triu(1), float("-inf"))
    assert torch.allclose(lse.double(), torch.logsumexp(scores, dim=-1), rtol=1e-5, atol=1e-5)


def test_bad_inputs_raise():
    q, k, v = attn.make_inputs(AttentionShape(1, 2, 8, 16, dtype="fp16"), DEVICE, 0)
    with pytest.raises(ValueError, match="4-D"):
        attn.attention(q[0], k[0], v[0], cfg())
    with pytest.raises(ValueError, match="shapes differ"):
        attn.attention(q, k[:, :, :4], v, cfg())
    with pytest.raises(ValueError, match="dtypes differ"):
        attn.attention(q, k.float(), v, cfg())
    with pytest.raises(ValueError, match="dtype must be one of"):
        attn.attention(q.double(), k.double(), v.double(), cfg())
    with pytest.raises(ValueError, match="head_dim"):
        attn.attention(q[..., :8], k[..., :8], v[..., :8], cfg())
    with pytest.raises(ValueError, match="seq must be >= 1"):
        attn.attention(q[:, :, :0], k[:, :, :0], v[:, :, :0], cfg())
    with pytest.raises(ValueError, match="out must be"):
        attn.attention(q, k, v, cfg(), out=torch.empty_like(q, dtype=torch.float32))
    with pytest.raises(ValueError, match="must divide"):
        attn.attention(torch.cat([q, q[:, :1]], 1), k, v, cfg())
    with pytest.raises(ValueError, match="scale must be > 0"):
        attn.attention(q, k, v, cfg(), scale=-0.5)
    with pytest.raises(ValueError, match="lse must be"):
        attn.attention(q, k, v, cfg(), lse=torch.empty(1, 2, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match="at least one"):
        attn.make_launcher(cfg(), AttentionShape(1, 2, 8, 16), [], torch.empty_like(q))
    with pytest.raises(ValueError, match="every input set"):
        attn.make_launcher(cfg(), AttentionShape(1, 2, 9, 16), [(q, k, v)], torch.empty_like(q))
    with pytest.raises(ValueError, match="every input set"):
        attn.make_launcher(cfg(), AttentionShape(1, 2, 8, 16, kv_heads=1), [(q, k, v)], torch.empty_like(q))


def test_launcher_rotates_input_sets():
    shape = AttentionShape(1, 2, 20, 16, causal=False, dtype="fp32")
    inputs = [attn.make_inputs(shape, DEVICE, seed) for seed in (10, 11)]
    refs = [attn.reference(*qkv, causal=False) for qkv in inputs]
    out = torch.empty_like(inputs[0][0])
    launch = attn.make_launcher(cfg(32, 16, 2), shape, inputs, out)
    for i in (0, 1, 2):
        out.fill_(float("nan"))
        launch(i)
        assert relative_error(out, refs[i % 2]) <= TOLERANCE[torch.float32]
        assert relative_error(out, refs[1 - i % 2]) > 0.5


def test_make_inputs_is_seeded_random():
    shape = AttentionShape(2, 3, 5, 16, dtype="fp32")
    q, k, v = attn.make_inputs(shape, DEVICE, seed=4)
    assert q.shape == (2, 3, 5, 16) and q.dtype == torch.float32
    assert all(bool((t != 0).all()) and t.std() > 0.3 for t in (q, k, v))
    assert not torch.equal(q, k) and torch.equal(q, attn.make_inputs(shape, DEVICE, seed=4)[0])
    assert not torch.equal(q, attn.make_inputs(shape, DEVICE, seed=5)[0])
    assert attn.make_inputs(shape, DEVICE, seed=4, dtype=torch.float16)[0].dtype == torch.float16


def test_reference_chunks_agree_with_one_softmax(monkeypatch):
    q, k, v = attn.make_inputs(AttentionShape(2, 3, 37, 16, dtype="fp32"), DEVICE, 1)
    whole = attn.reference(q, k, v, causal=True)
    monkeypatch.setattr(attn, "REFERENCE_CHUNK_ELEMS", 37 * 5)  # 5 rows of one head at a time
    assert torch.allclose(attn.reference(q, k, v, causal=True), whole, rtol=1e-6, atol=1e-6)


# --- ORDER: which (batch·head, query block) each program takes -----------------------------------

def mapping(n_programs: int, n_qblocks: int, n_heads: int, order: int) -> list[tuple[int, int]]:
    return [tuple(attn._program_order.fn(pid, n_qblocks, n_heads, order)) for pid in range(n_programs)]


@pytest.mark.parametrize("n_qblocks, n_heads", [(1, 1), (1, 4), (5, 1), (3, 4)])
@pytest.mark.parametrize("order", range(4))
def test_program_order_covers_every_pair_once_in_the_modelled_sequence(n_qblocks, n_heads, order):
    pairs = mapping(n_qblocks * n_heads, n_qblocks, n_heads, order)
    assert sorted(pairs) == [(h, b) for h in range(n_heads) for b in range(n_qblocks)]
    # The cost model's dispatch order (roofline/attention.py): query block of each program.
    assert [b for _, b in pairs] == program_sequence(np.arange(n_qblocks), n_heads, order).tolist()
    first_two = pairs[:2]
    if n_qblocks > 1 and n_heads > 1:
        expected = {0: [(0, 0), (0, 1)], 1: [(0, 2), (0, 1)], 2: [(0, 0), (1, 0)], 3: [(0, 2), (1, 2)]}[order]
        assert first_two == expected


@triton.jit
def _write_program_order(out_ptr, n_qblocks, ORDER: tl.constexpr):
    pid = tl.program_id(0)
    bh, qb = attn._program_order(pid, n_qblocks, tl.num_programs(0) // n_qblocks, ORDER)
    tl.store(out_ptr + 2 * pid, bh)
    tl.store(out_ptr + 2 * pid + 1, qb)


@pytest.mark.parametrize("order", range(4))
def test_the_kernel_helper_maps_programs_as_python_does(order):
    out = torch.full((12, 2), -1, dtype=torch.int32, device=DEVICE)
    _write_program_order[(12,)](out, 3, ORDER=order)
    assert [tuple(row) for row in out.tolist()] == mapping(12, 3, 4, order)


# --- the reference check ---------------------------------------------------------------------------

CHECK_SHAPE = AttentionShape(1, 2, 33, 16, dtype="fp16")


def test_check_attention_passes_the_kernel():
    assert check_attention(cfg(32, 16, 1), CHECK_SHAPE, DEVICE, seed=0) is None
    assert check_attention(cfg(32, 32, 2), AttentionShape(1, 1, 20, 32, causal=False, dtype="fp32"), DEVICE) is None


def test_check_attention_catches_a_wrong_scale(monkeypatch):
    monkeypatch.setattr(attn, "LOG2E", 1.0)  # softmax in base 2 of unscaled-by-log2(e) scores: wrong
    assert check_attention(cfg(32, 16, 1), CHECK_SHAPE, DEVICE, 0).startswith("reference check failed")


def test_check_attention_catches_unwritten_rows_and_failures():
    def skips_last_row(q, k, v, out):
        out[:, :, :-1] = attn.attention(q, k, v, cfg())[:, :, :-1]

    def ignores_the_mask(q, k, v, out):
        attn.attention(q, k, v, cfg(), causal=False, out=out)

    def raises(q, k, v, out):
        raise RuntimeError("out of resources: shared memory\nmore")

    assert check_attention(cfg(), CHECK_SHAPE, DEVICE, 0, run=skips_last_row) == \
        f"reference check failed: rel err inf > {TOLERANCE[torch.float16]:g}"
    assert check_attention(cfg(), CHECK_SHAPE, DEVICE, 0, run=ignores_the_mask).startswith("reference check failed")
    assert check_attention(cfg(), CHECK_SHAPE, DEVICE, 0, run=raises) == \
        "run failed: RuntimeError: out of resources: shared memory"


# --- compiling: specialization groups, warmup vs launch ---------------------------------------------

def test_specialization_key_ignores_batch_heads_and_seq():
    key = attn.specialization_key
    same = {key(AttentionShape(1, 1, 1, 128)), key(AttentionShape(4, 32, 4096, 128)), key(AttentionShape(3, 7, 1000, 128))}
    assert len(same) == 1
    distinct = {key(AttentionShape(2, 8, 1024, 128)), key(AttentionShape(2, 8, 1024, 64)),
                key(AttentionShape(2, 8, 1024, 128, causal=False)), key(AttentionShape(2, 8, 1024, 128, dtype="fp16")),
                key(AttentionShape(1, 128, 2**17, 128)), key(AttentionShape(1, 1, 2**24, 128))}
    assert len(distinct) == 6


def _binary_selectors(args, unspecialized):
    """What Triton selects a binary by: pointer dtypes (by Triton's canonical name: a torch tensor's and a
    MockTensor's Triton dtype compare equal), for integers the value-1 constant, divisibility by 16 and
    int64 (only int64 where not specialized), float type, constexprs and options as given."""
    sel = []
    for i, value in enumerate(args):
        if isinstance(value, TensorDescriptor):  # its shape and strides are runtime values
            sel.append((canonicalize_dtype(value.base.dtype), tuple(value.block_shape)))
        elif isinstance(value, (torch.Tensor, torch.dtype, MockTensor)):
            sel.append(canonicalize_dtype(getattr(value, "dtype", value)))
        elif isinstance(value, float):
            sel.append(float)
        elif isinstance(value, int) and i in unspecialized:
            sel.append(value >= 2**31)
        elif isinstance(value, int):
            sel.append((value == 1, value % 16 == 0, value >= 2**31))
        else:
            sel.append(value)
    return sel


@pytest.mark.parametrize("tma", [0, 1], ids=["pointers", "tma"])
@pytest.mark.parametrize("dims", [(1, 1, 1, 16, 1), (2, 3, 100, 64, 3), (1, 8, 4096, 128, 2)], ids=str)
def test_warmup_compiles_what_a_launch_uses(monkeypatch, dims, tma):
    rec = KernelRecorder()
    monkeypatch.setattr(attn, "_attn_fwd", rec)
    monkeypatch.setattr(torch.cuda, "device", lambda device: torch.cpu.StreamContext(None))
    batch, heads, seq, head_dim, kv_heads = dims
    shape = AttentionShape(batch, heads, seq, head_dim, causal=seq != 100, dtype="fp16", kv_heads=kv_heads)
    config = cfg(64, 32, 3, warps=8, stages=3, tma=tma)
    attn.warmup(shape, config, device="cpu")
    q, k, v = attn.make_inputs(shape, "cpu", 0, dtype=torch.float16)
    attn.make_launcher(config, shape, [(q, k, v)], torch.empty_like(q))(0)
    calls = [args + tuple(sorted(kwargs.items())) for _, args, kwargs in rec.calls]
    assert len(calls) == 2
    heads_group_seq = {21, 22, 23}  # positions of `heads`, `kv_group` and `seq`
    assert _binary_selectors(calls[0], heads_group_seq) == _binary_selectors(calls[1], heads_group_seq)


# Compiled for sm_90 on the CPU (Triton's bundled ptxas, no GPU), in a process without the interpreter;
# the PTX patterns are sm90_compile.py's (the GEMM's script), found through argv[2].
SM90_SCRIPT = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
sys.path.insert(0, sys.argv[2])
from sm90_compile import CP_ASYNC, GLOBAL_LD_ST
from rooftune.candidates import AttentionShape, parse_config
from rooftune.kernels import attention
from rooftune.kernels.harness.offline import offline_target
results = []
for shape, config in json.loads(sys.argv[1]):
    with offline_target(arch=90):
        kernel = attention.compile_kernels(AttentionShape(*shape), parse_config(config))[0]
    ptx = kernel.asm["ptx"]
    results.append({"shared": kernel.metadata.shared, "tma_copies": ptx.count("cp.async.bulk.tensor"),
                    "cp_async_bytes": sorted({int(b, 0) for b in CP_ASYNC.findall(ptx)}),
                    "global_loads": sorted({op for op in GLOBAL_LD_ST.findall(ptx) if op.startswith("ld.")})})
print(json.dumps(results))
"""

SM90_JOBS = [((2, 4, 1000, 64, True, "bf16"), cfg(128, 64, 1, warps=8, stages=3)),
             ((1, 2, 77, 256, False, "bf16"), cfg(64, 32, 2, stages=2)),
             ((1, 2, 4096, 128, True, "fp32"), cfg(64, 32, 0, stages=4)),
             ((1, 2, 1000, 64, False, "fp16"), cfg(64, 32, 3, stages=1)),
             ((4, 8, 1000, 128, True, "bf16"), cfg(128, 64, 1, stages=2, tma=1)),
             ((1, 2, 77, 64, False, "bf16"), cfg(64, 64, 3, stages=3, tma=1))]


def test_sm90_shared_memory_is_what_the_space_assumes(tmp_path):
    """The pipelined K/V buffers of both loops share one region: shared memory = attention_smem_bytes
    (Q once, K and V per stage) with num_stages >= 2, less with 1 (no pipeline, one buffer for K then V);
    with seq left unspecialized (1000, 77) the copies stay 16-byte cp.async (16-byte loads without a pipeline).
    With TMA, the copies are bulk tensor copies and the barriers add at most TMA_BARRIER_BYTES."""
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    jobs = [(shape, str(config)) for shape, config in SM90_JOBS]
    done = subprocess.run([sys.executable, "-c", SM90_SCRIPT, json.dumps(jobs), str(Path(__file__).parent)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    for (shape, config), result in zip(SM90_JOBS, json.loads(done.stdout)):
        elem = 4 if shape[5] == "fp32" else 2
        assumed = int(attention_smem_bytes(dict(config), shape[3], elem))
        if config["TMA"]:
            barriers = assumed - result["shared"]  # TMA_BARRIER_BYTES is their upper bound
            assert 0 <= barriers < TMA_BARRIER_BYTES and result["tma_copies"] > 0 and not result["cp_async_bytes"], result
        elif config.num_stages >= 2:
            # fp32 (TF32 dots) also copies some elements one at a time (4 bytes): [4, 16].
            copies = [16] if elem == 2 else [4, 16]
            assert result["shared"] == assumed and result["cp_async_bytes"] == copies, (shape, str(config), result)
        else:
            assert result["shared"] <= assumed and result["global_loads"] == ["ld.global.v4.b32"], (shape, result)


# --- on a GPU -----------------------------------------------------------------------------------

GPU_CONFIGS = [cfg(128, 64, 1, warps=8, stages=3), cfg(64, 64, 3, warps=4, stages=2), cfg(256, 128, 2, warps=8, stages=2),
               cfg(32, 16, 0, warps=4, stages=5), cfg(128, 32, 3, warps=4, stages=1),
               cfg(128, 64, 1, warps=4, stages=2, tma=1), cfg(32, 16, 0, warps=4, stages=5, tma=1)]
GPU_SHAPES = [(2, 8, 1024, 128), (1, 4, 1000, 64), (3, 2, 77, 256), (1, 16, 1, 128), (2, 4, 4097, 32)]


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [True, False], ids=["causal", "full"])
@pytest.mark.parametrize("config", GPU_CONFIGS, ids=str)
@pytest.mark.parametrize("dims", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bf16_on_gpu(dims, config, causal):
    shape = AttentionShape(*dims, causal=causal, dtype="bf16")
    shared = attn.compile_kernels(shape, config)[0].metadata.shared
    if shared > torch.cuda.get_device_properties(0).shared_memory_per_block_optin:
        with pytest.raises(Exception, match="(?i)out ?of ?resource"):
            assert_matches(shape, config)
        return
    assert check_attention(config, shape, "cuda", seed=1) is None


@pytest.mark.gpu
def test_warmup_compiles_the_one_binary_every_batch_heads_and_seq_reuse():
    config = cfg(64, 32, 1, warps=4, stages=3)
    assert attn.warmup(AttentionShape(2, 4, 300, 64), config) > 0
    device_cache = attn._attn_fwd.device_caches[torch.cuda.current_device()][0]
    compiled = len(device_cache)
    for dims in [(2, 4, 300, 64), (1, 1, 1, 64), (3, 5, 1024, 64), (1, 2, 77, 64)]:
        assert check_attention(config, AttentionShape(*dims), "cuda", seed=0) is None
    assert len(device_cache) == compiled


@pytest.mark.gpu
@pytest.mark.parametrize("config", [cfg(128, 64, 1, warps=4, stages=2, tma=1), cfg(64, 64, 3, warps=4, stages=3)], ids=str)
@pytest.mark.parametrize("dims", [(2, 32, 8, 1000, 128), (1, 16, 2, 4097, 64), (3, 8, 8, 77, 128)],
                         ids=lambda d: "x".join(map(str, d)))
def test_grouped_query_bf16_on_gpu_matches_sdpa(dims, config):
    batch, heads, kv_heads, seq, head_dim = dims
    shape = AttentionShape(batch, heads, seq, head_dim, kv_heads=kv_heads)
    assert check_attention(config, shape, "cuda", seed=2) is None
    q, k, v = attn.make_inputs(shape, "cuda", 3)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    assert relative_error(attn.attention(q, k, v, config), sdpa.float()) <= TOLERANCE[torch.bfloat16]


@pytest.mark.parametrize("seq", [1, 8, 31])
def test_the_spaces_smallest_blocks_serve_the_shortest_sequences(seq):
    # attention-rules-3 keeps BLOCK_M 64 x BLOCK_N 32 legal at any seq: rows and keys past seq are
    # masked (pointers) or zero-filled by the descriptor (TMA).
    shape = AttentionShape(2, 4, seq, 64, dtype="fp16", kv_heads=2)
    configs = legal_configs(ATTENTION_SPACE, shape, load_profile("h200")).configs
    for config in (configs[0], configs[-1]):
        assert (config["BLOCK_M"], config["BLOCK_N"]) == (64, 32)
        assert_matches(shape, config)
