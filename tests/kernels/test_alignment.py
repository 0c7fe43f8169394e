"""ALIGN_N / ALIGN_K: correctness in every alignment class, what they are for views, the compile grouping,
warmup compiling what a launch uses, and (compiled for sm_90 on the CPU) the code they give."""

from pathlib import Path

import pytest
import torch
from compile_script import run_script
from fakes import KernelRecorder
from triton._utils import canonicalize_dtype
from triton.runtime.jit import MockTensor

from rooftune.candidates import Config, GemmShape
from rooftune.kernels import gemm as gemm_module
from rooftune.kernels.gemm import alignments, gemm, make_inputs, reference, specialization_key
from rooftune.kernels.harness.check import TOLERANCE, relative_error

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def cfg(split_k: int = 1, bm: int = 16, bn: int = 16, bk: int = 16, warps: int = 4, stages: int = 2,
        group_m: int = 1) -> Config:
    return Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, SPLIT_K=split_k)


# One size per class of (size mod 16): odd, 2, 4, 8 (ALIGN 1, 2, 4, 8), each spanning several 16-blocks
# so that the K mask and the N wrap-around both cut through a block.
SIZES = {1: 33, 2: 50, 4: 36, 8: 40}


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("align_n", sorted(SIZES))
@pytest.mark.parametrize("align_k", sorted(SIZES))
def test_every_alignment_class(layout, align_n, align_k):
    shape = GemmShape(9, SIZES[align_n], SIZES[align_k], layout=layout, dtype="fp16")
    assert alignments(layout, shape.n, shape.k, gemm_module.shape_strides(shape)) == (align_n, align_k)
    a, b = make_inputs(shape, DEVICE, seed=align_n * 16 + align_k)
    ref = reference(a, b, layout)
    for config in (cfg(), cfg(split_k=2, bk=16)):
        out = gemm(a, b, config, layout)
        assert relative_error(out, ref) <= TOLERANCE[a.dtype], f"{shape} {config}"


@pytest.mark.parametrize("layout", ["kn", "nk"])
def test_unaligned_split_k_with_a_partial_last_split(layout):
    # K = 100 (ALIGN_K 4) in 32-blocks: 4 blocks over 3 splits; N = 20 (ALIGN_N 4) over two tile columns.
    shape = GemmShape(17, 20, 100, layout=layout, dtype="fp32")
    a, b = make_inputs(shape, DEVICE, seed=5)
    out = gemm(a, b, cfg(split_k=3, bk=32, group_m=8), layout)
    assert relative_error(out, reference(a, b, layout)) <= TOLERANCE[torch.float32]


def test_views_lower_the_alignment_and_stay_correct():
    # A [9, 36] cut from rows of 38: K = 36 alone would give ALIGN_K = 4, A's row stride only allows 2.
    shape = GemmShape(9, 24, 36, layout="kn", dtype="fp16")
    a_full = torch.randn(9, 38, dtype=torch.float16, device=DEVICE)
    a = a_full[:, :36]
    _, b = make_inputs(shape, DEVICE, seed=2)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), 24, 1)
    assert alignments("kn", 24, 36, strides) == (8, 2)
    assert alignments("kn", 24, 36, (36, 1, 24, 1, 24, 1)) == (8, 4)
    assert alignments("nk", 24, 36, (36, 1, 1, 44, 24, 1)) == (8, 4)   # B [N, K] with rows of 44
    assert alignments("nk", 24, 36, (36, 1, 1, 42, 24, 1)) == (8, 2)
    assert alignments("kn", 24, 36, (36, 1, 20, 1, 24, 1)) == (4, 4)   # B [K, N] with rows of 20
    assert alignments("kn", 4096, 4096, (4096, 1, 4096, 1, 4096, 1)) == (16, 16)  # never above 16
    out = gemm(a, b, cfg(split_k=2), "kn")
    assert relative_error(out, reference(a, b, "kn")) <= TOLERANCE[torch.float16]


def test_specialization_key_follows_the_alignment_classes():
    key = specialization_key
    assert key(GemmShape(1, 4100, 4100)) == key(GemmShape(5000, 4132, 1028))  # both ALIGN 4
    assert key(GemmShape(8, 4096, 4096)) == key(GemmShape(8, 4112, 2048))     # both ALIGN 16
    classes = {key(GemmShape(8, 4096 + dn, 4096 + dk)) for dn in (0, 1, 2, 4, 8) for dk in (0, 1, 2, 4, 8)}
    assert len(classes) == 25
    assert key(GemmShape(8, 4104, 4096))[2:4] == (8, 16)
    # N = 1 is a constant to Triton, N = 3 is not: same ALIGN_N, different binaries.
    assert key(GemmShape(8, 1, 64)) != key(GemmShape(8, 3, 64))
    assert key(GemmShape(8, 3, 64)) == key(GemmShape(8, 5, 64))
    # A GemmShape stops N and K below 2**23 (candidates/shapes.py), so int64 only by the class itself.
    assert gemm_module.int_class(2**31 + 4) == "i64" and gemm_module.int_class(2**31 - 1) == "i32"


def _binary_selectors(args, kwargs, unspecialized):
    """What Triton selects a binary by: dtypes of pointers (a tensor's, a torch dtype's or a MockTensor's,
    by Triton's canonical name), for integers the value-1 constant, divisibility by 16 and int64 (only
    int64 where not specialized), constexprs and options as given."""
    sel = []
    for i, v in enumerate(args):
        if isinstance(v, (torch.Tensor, MockTensor)):
            sel.append(canonicalize_dtype(v.dtype))
        elif isinstance(v, torch.dtype):
            sel.append(canonicalize_dtype(v))
        elif i in unspecialized:
            sel.append(v >= 2**31)
        else:
            sel.append((v == 1, v % 16 == 0, v >= 2**31))
    return sel, kwargs


@pytest.mark.parametrize("mnk", [(5, 4100, 4098), (300, 1000, 1030), (7, 33, 64), (1, 1, 17), (64, 4096, 4096)],
                         ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("layout", ["kn", "nk"])
def test_warmup_compiles_what_a_launch_uses(monkeypatch, mnk, layout):
    gemm_rec, reduce_rec = KernelRecorder(), KernelRecorder()
    monkeypatch.setattr(gemm_module, "_gemm_kernel", gemm_rec)
    monkeypatch.setattr(gemm_module, "_splitk_reduce_kernel", reduce_rec)
    monkeypatch.setattr(torch.cuda, "device", lambda device: torch.cpu.StreamContext(None))
    shape = GemmShape(*mnk, layout=layout, dtype="fp16")
    config = cfg(split_k=2, bm=32, bn=64, bk=32, warps=8, stages=3)
    gemm_module.warmup(shape, config, device="cpu")
    a, b = make_inputs(shape, "cpu", seed=0)
    gemm_module._launch_fn(config, layout, *mnk)(a, b, torch.empty(mnk[0], mnk[1], dtype=torch.float16),
                                                  gemm_module._workspace(config, mnk[0], mnk[1], "cpu"), (a, b))
    for rec, unspecialized in ((gemm_rec, {4, 13, 14}), (reduce_rec, {2, 6})):  # M, GROUP_M, SPLIT_K
        (kind_w, args_w, kw_w), (kind_l, args_l, kw_l) = rec.calls
        assert (kind_w, kind_l) == ("warmup", "launch")
        assert _binary_selectors(args_w, kw_w, unspecialized) == _binary_selectors(args_l, kw_l, unspecialized)


# --- compiled for sm_90 on the CPU (Triton's bundled ptxas; no GPU) ------------------------------

SM90_SCRIPT = Path(__file__).with_name("sm90_compile.py")
SMALL = "BLOCK_M=64,BLOCK_N=64,BLOCK_K=64,GROUP_M=1,SPLIT_K=1,num_warps=4,num_stages=3"
TILE_BYTES = 64 * 64 * 2  # one 64x64 bf16 operand tile


def compile_sm90(jobs: list[dict], cache: Path) -> list[dict]:
    return run_script(SM90_SCRIPT, jobs, cache)


def test_sm90_code_for_aligned_shapes_is_unchanged_and_unaligned_rows_vectorize(tmp_path):
    aligned = [{"shape": [300, 1024, 1024, layout, "bf16"], "config": SMALL, "no_align": no_align}
               for layout in ("nk", "kn") for no_align in (False, True)]
    by_k = {4100: 8, 4098: 4, 4104: 16}  # K -> bytes per cp.async of the rows along K
    unaligned = [{"shape": [300, 1024, k, "nk", "bf16"], "config": SMALL} for k in by_k]
    odd = [{"shape": [300, 1024, 4097, layout, "bf16"], "config": SMALL} for layout in ("nk", "kn")]
    results = compile_sm90(aligned + unaligned + odd, tmp_path)
    # N, K multiples of 16: ALIGN = 16 compiles to the same PTX as no hints at all (the kernel before them).
    assert results[0]["ptx"] == results[1]["ptx"] and results[2]["ptx"] == results[3]["ptx"]
    assert results[0]["cp_async_bytes"] == [16] and results[0]["shared"] == 3 * 2 * TILE_BYTES
    for (k, nbytes), r in zip(by_k.items(), results[4:7]):
        assert r["cp_async_bytes"] == [nbytes], (k, r["cp_async_bytes"])
        assert r["shared"] == 3 * 2 * TILE_BYTES  # both operands pipelined: num_stages buffers each
    # Odd K: 2-byte rows cannot be copied asynchronously (Triton's pipeliner needs >= 4 contiguous bytes);
    # such an operand is loaded through registers into a single buffer instead of num_stages.
    nk, kn = results[7:]
    assert nk["cp_async_bytes"] == [] and "ld.global.b16" in nk["global_ld_st"]
    assert nk["shared"] == 2 * TILE_BYTES
    assert kn["cp_async_bytes"] == [16] and "ld.global.b16" in kn["global_ld_st"]  # B [K, N] rows along N
    assert kn["shared"] == (3 + 1) * TILE_BYTES


# --- Triton's own binder (the key that selects a compiled binary), built for sm_90 on the CPU ----------

BINDER_SCRIPT = Path(__file__).with_name("binder_keys.py")
LISTS = Path(__file__).resolve().parents[2] / "datasets" / "h200" / "gemm"


def binder_keys(jobs: list[dict]) -> list[dict]:
    return run_script(BINDER_SCRIPT, jobs, needs_ptxas=False)


def test_triton_selects_one_binary_per_specialization_group_and_warmup_compiles_it():
    """What the sweep relies on, asked of Triton itself rather than of a model of it: in every compile
    group of the committed shape lists (M from 1 up, N = 8, unaligned N and K, 128256-wide rows), the
    workers' `warmup` and the parent's launch on contiguous tensors make the same binder key, for the
    GEMM and the split-K reduction alike, and every shape of a group makes the same key."""
    from rooftune.candidates.shapes import load_shapes

    shapes = [s for name in ("shapes_train.json", "shapes_heldout.json") for s in load_shapes(LISTS / name)]
    groups: dict = {}
    for s in sorted(shapes, key=lambda s: (s.m, s.n, s.k)):
        groups.setdefault(specialization_key(s), []).append(s)
    picked = [s for members in groups.values() for s in {members[0], members[len(members) // 2], members[-1]}]
    picked += [GemmShape(1, 128256, 4096, "nk"), GemmShape(16384, 8192, 1024, "kn")]
    configs = {"split": "BLOCK_M=64,BLOCK_N=128,BLOCK_K=64,GROUP_M=8,SPLIT_K=4,num_warps=8,num_stages=3",
               # split-K summed in the GEMM kernel: one binary, no reduction
               "fixup": "BLOCK_M=16,BLOCK_N=64,BLOCK_K=128,GROUP_M=1,SPLIT_K=4,FIXUP=1,num_warps=4,num_stages=3",
               # a tutorial config outside the space: 2 warps, BLOCK_M above a decode M
               "tutorial": "BLOCK_M=64,BLOCK_N=32,BLOCK_K=32,GROUP_M=8,SPLIT_K=1,num_warps=2,num_stages=5"}
    jobs = [{"shape": [s.m, s.n, s.k, s.layout, s.dtype], "config": c} for s in picked for c in configs.values()
            if "SPLIT_K=1" in c or s.m * s.n <= 1 << 24]  # CPU stand-ins for the workspace stay small
    results = binder_keys(jobs)
    by_group: dict = {}
    for job, r in zip(jobs, results):
        assert len(r["warmup"]) == len(r["launch"]) == (2 if job["config"] == configs["split"] else 1)
        assert r["warmup"] == r["launch"], job
        by_group.setdefault((r["group"], job["config"]), set()).add(tuple(r["warmup"]))
    assert all(len(keys) == 1 for keys in by_group.values()), by_group
    distinct = {keys.pop() for (_, config), keys in by_group.items() if config == configs["tutorial"]}
    assert len(distinct) == len(groups)  # and the groups really are different binaries


def test_sm90_tma_configs_fit_the_shared_memory_rule(tmp_path):
    """The space's TMA configs compiled for sm_90 on the CPU: the legal configs with the largest shared-memory
    estimate and the mma.sync tiles (BLOCK_M 16 and 32: num_stages - 1 buffers) allocate what
    `gemm_smem_bytes` says, within the descriptors' barrier bytes, and so fit the H200's per-block limit."""
    from rooftune.candidates import GEMM_SPACE, legal_configs
    from rooftune.candidates.attention_space import TMA_BARRIER_BYTES
    from rooftune.candidates.gemm_space import gemm_smem_bytes
    from rooftune.hwprofiles import load_profile

    h200 = load_profile("h200")
    shape = GemmShape(512, 4096, 4096, "nk")
    legal = legal_configs(GEMM_SPACE, shape, h200).configs
    assert legal and all(c["TMA"] == 1 for c in legal)
    estimate = {c: int(gemm_smem_bytes({k: c[k] for k in GEMM_SPACE.names}, 2, hopper=True)) for c in legal}
    largest = sorted(legal, key=lambda c: -estimate[c])[:3]
    small_m = [next(c for c in sorted(legal, key=lambda c: -estimate[c]) if c["BLOCK_M"] == bm) for bm in (16, 32)]
    picked = largest + small_m
    results = compile_sm90([{"shape": [512, 4096, 4096, "nk", "bf16"], "config": str(c)} for c in picked], tmp_path)
    for c, r in zip(picked, results):
        assert r["cp_async_bytes"] == []  # the copy engine, not cp.async
        assert estimate[c] - TMA_BARRIER_BYTES <= r["shared"] <= estimate[c] <= h200.smem_per_block_bytes, (str(c), r["shared"])


def test_persistent_configs_compile_to_the_binary_a_launch_selects_and_fit_the_shared_memory_rule(tmp_path):
    """PERSISTENT = 1 on a multi-wave shape: warmup (what prebuild and the workers compile) and a launch
    make the same binder key with M unspecialized; compiled for sm_90, the legal persistent configs with
    the largest estimate (operand buffers + epilogue + barriers) allocate no more than `gemm_smem_bytes`
    says, within the epilogue's bound where C's rows are aligned (the whole tile where they are not)."""
    from rooftune.candidates import GEMM_SPACE, legal_configs
    from rooftune.candidates.attention_space import TMA_BARRIER_BYTES
    from rooftune.candidates.gemm_space import gemm_smem_bytes, persistent_epilogue_bytes
    from rooftune.hwprofiles import load_profile

    h200 = load_profile("h200")
    jobs, expect = [], []
    for shape in (GemmShape(4096, 4096, 4096, "nk"), GemmShape(4096, 4097, 4096, "nk"), GemmShape(3000, 4096, 512, "kn")):
        legal = [c for c in legal_configs(GEMM_SPACE, shape, h200).configs if c["PERSISTENT"] == 1]
        assert legal, shape
        cols = lambda c: {k: c[k] for k in GEMM_SPACE.names}  # noqa: E731
        estimate = {c: int(gemm_smem_bytes(cols(c), 2, hopper=True, n=shape.n)) for c in legal}
        for c in sorted(legal, key=lambda c: -estimate[c])[:2]:
            jobs.append({"shape": [shape.m, shape.n, shape.k, shape.layout, "bf16"], "config": str(c)})
            expect.append((estimate[c], int(persistent_epilogue_bytes(cols(c), 2, shape.n))))
    for r in binder_keys(jobs[:2]):
        assert r["warmup"] == r["launch"] and len(r["warmup"]) == 1
    for job, (estimate, epilogue), r in zip(jobs, expect, compile_sm90(jobs, tmp_path)):
        assert r["cp_async_bytes"] == []
        slack = TMA_BARRIER_BYTES + (0 if job["shape"][1] % 8 == 0 else epilogue)
        assert estimate - slack <= r["shared"] <= estimate <= h200.smem_per_block_bytes, (job, r["shared"])


@pytest.mark.slow  # every persistent tile compiled for sm_90 (test_persistent_configs_compile_... is the quick one)
def test_every_persistent_tile_and_warp_count_fits_the_shared_memory_rule_at_its_stage_limit(tmp_path):
    """Each persistent (BLOCK_M, BLOCK_N, num_warps) with BLOCK_K 64 on an aligned multi-wave shape, compiled for
    sm_90 at the most stages the space allows it and at one more (within the space's stages): the rule is
    exact within the barriers' bytes, so the legal one fits the per-block limit and the next one does not (the C_TMA epilogue's half
    tile, and its fp32 conversion where 8 warps split a 64-row tile's N: gemm-rules-9)."""
    from rooftune.candidates import GEMM_SPACE, Config, legal_configs
    from rooftune.candidates.attention_space import TMA_BARRIER_BYTES
    from rooftune.candidates.gemm_space import gemm_smem_bytes
    from rooftune.hwprofiles import load_profile

    h200 = load_profile("h200")
    shape = GemmShape(4096, 4096, 4096, "nk")
    legal = [c for c in legal_configs(GEMM_SPACE, shape, h200).configs
             if c["PERSISTENT"] == 1 and c["BLOCK_K"] == 64 and c["GROUP_M"] == 8]
    most = {}
    for c in legal:
        key = (c["BLOCK_M"], c["BLOCK_N"], c.num_warps)
        most[key] = max(most.get(key, 0), c.num_stages)
    assert (64, 256, 8) in most and (128, 128, 4) in most and (256, 128, 8) in most
    configs = [Config.make(w, s + extra, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1,
                           PERSISTENT=1, FIXUP=0, BLOCK_N2=0) for (bm, bn, w), s in sorted(most.items())
               for extra in (0, 1) if s + extra <= max(dict(GEMM_SPACE.grid)["num_stages"])]
    assert len(configs) > len(most)  # some tile stops below the space's most stages: its next one is over the limit
    jobs = [{"shape": [shape.m, shape.n, shape.k, "nk", "bf16"], "config": str(c)} for c in configs]
    for c, r in zip(configs, compile_sm90(jobs, tmp_path)):
        estimate = int(gemm_smem_bytes({k: c[k] for k in GEMM_SPACE.names}, 2, hopper=True, n=shape.n))
        assert estimate - TMA_BARRIER_BYTES <= r["shared"] <= estimate, (str(c), r["shared"], estimate)
        assert (r["shared"] <= h200.smem_per_block_bytes) == (c in legal), (str(c), r["shared"])


@pytest.mark.slow  # every composite tile compiled for sm_90: ~6 s
def test_every_composite_tile_fits_the_shared_memory_rule_at_its_stage_limit_and_binds_as_warmup_compiles(tmp_path):
    """Each composite (BLOCK_M, BLOCK_N + BLOCK_N2, num_warps) legal on 2048x1280x8192 (BLOCK_N2 > 0: two
    accumulators), compiled for sm_90 at the most stages the space allows it and at one more: the rule is exact
    within the barriers' bytes, so the legal one fits the per-block limit and the next one does not; warmup (what
    prebuild compiles) and a launch make the same binder key."""
    from rooftune.candidates import GEMM_SPACE, Config, legal_configs
    from rooftune.candidates.attention_space import TMA_BARRIER_BYTES
    from rooftune.candidates.gemm_space import gemm_smem_bytes
    from rooftune.hwprofiles import load_profile

    h200 = load_profile("h200")
    shape = GemmShape(2048, 1280, 8192, "nk")
    legal = [c for c in legal_configs(GEMM_SPACE, shape, h200).configs if c["BLOCK_N2"] > 0 and c["GROUP_M"] == 8]
    most = {}
    for c in legal:
        key = (c["BLOCK_M"], c["BLOCK_N"], c["BLOCK_N2"], c["BLOCK_K"], c.num_warps)
        most[key] = max(most.get(key, 0), c.num_stages)
    assert {(64, 128, 32), (64, 256, 64), (128, 128, 32), (128, 128, 64)} <= {k[:3] for k in most}
    configs = [Config.make(w, s + extra, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, SPLIT_K=1, TMA=1,
                           PERSISTENT=0, FIXUP=0, BLOCK_N2=bn2)
               for (bm, bn, bn2, bk, w), s in sorted(most.items()) if bk == 64
               for extra in (0, 1) if s + extra <= max(dict(GEMM_SPACE.grid)["num_stages"])]
    assert any(c not in legal for c in configs)  # some tile stops below the most stages: the next is over the limit
    jobs = [{"shape": [shape.m, shape.n, shape.k, "nk", "bf16"], "config": str(c)} for c in configs]
    for c, r in zip(configs, compile_sm90(jobs, tmp_path)):
        estimate = int(gemm_smem_bytes({k: c[k] for k in GEMM_SPACE.names}, 2, hopper=True, n=shape.n))
        assert r["cp_async_bytes"] == []
        assert estimate - TMA_BARRIER_BYTES <= r["shared"] <= estimate, (str(c), r["shared"], estimate)
        assert (r["shared"] <= h200.smem_per_block_bytes) == (c in legal), (str(c), r["shared"])
    for r in binder_keys(jobs[:2]):
        assert r["warmup"] == r["launch"] and len(r["warmup"]) == 1


def test_fixup_compiles_for_sm90_with_one_release_acquire_counter_and_leaves_fixup_0_as_it_was(tmp_path):
    """FIXUP = 1 (split-K summed by the last split to arrive) compiled for sm_90: one acq_rel atomic on
    the arrival counter, L2 (.cg) loads of the partials, the operand buffers of FIXUP = 0; and FIXUP = 0
    has no atomic (its code is the kernel's before FIXUP existed: the constexpr branch is compiled out)."""
    tile = "BLOCK_M=16,BLOCK_N=64,BLOCK_K=128,GROUP_M=1,SPLIT_K={},TMA={},PERSISTENT=0,FIXUP={},num_warps=4,num_stages=4"
    jobs = [{"shape": [24, 4800, 1600, "kn", "bf16"], "config": tile.format(split, tma, fixup)}
            for tma in (1, 0) for split, fixup in ((2, 1), (2, 0))]
    results = compile_sm90(jobs, tmp_path)
    for fixup, plain in (results[0:2], results[2:4]):
        atomics = [line for line in fixup["ptx"].splitlines() if "atom." in line]
        assert len(atomics) == 1 and "atom.global.gpu.acq_rel.add" in atomics[0], atomics
        assert any(op.startswith("ld.global.cg") for op in fixup["global_ld_st"])
        assert "atom." not in plain["ptx"] and fixup["shared"] == plain["shared"]
