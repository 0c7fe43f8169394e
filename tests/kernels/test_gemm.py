"""The Triton GEMM against an fp64 reference: odd shapes, both B layouts, split-K, GROUP_M, launchers.

On the CPU these run in Triton's interpreter (fp16/fp32 inputs: it mishandles bf16); GPU-only tests are marked."""

import pytest
import torch

from rooftune.candidates import Config, GemmShape
from rooftune.kernels import gemm as gemm_module
from rooftune.kernels.gemm import (
    compile_kernels,
    gemm,
    make_inputs,
    make_launcher,
    reference,
    specialization_key,
    tma_ready,
    warmup,
)
from rooftune.kernels.harness.check import TOLERANCE, relative_error

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# Triton 3.6's interpreter reads a loop bound from a one-element array (numpy deprecates that; numpy >= 2.4 is excluded).
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def small(split_k: int = 1, group_m: int = 1, bm: int = 16, bn: int = 16, bk: int = 16, **load) -> Config:
    return Config.make(4, 2, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, SPLIT_K=split_k, **load)


def assert_matches(shape: GemmShape, config: Config, seed: int = 0) -> torch.Tensor:
    a, b = make_inputs(shape, DEVICE, seed)
    out = gemm(a, b, config, shape.layout)
    assert out.shape == (shape.m, shape.n) and out.dtype == a.dtype
    rel = relative_error(out, reference(a, b, shape.layout))
    assert rel <= TOLERANCE[a.dtype], f"{shape} {config}: rel err {rel:.3g}"
    return out


# (M, N, K): ones, primes, sizes just over a block, and K with fewer blocks than splits.
ODD_SHAPES = [(1, 1, 1), (7, 33, 100), (100, 7, 33), pytest.param((33, 100, 7), marks=pytest.mark.slow)]  # the slowest
SPLIT_GROUP = [(1, 1), (2, 8), (4, 1)]


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("mnk", ODD_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("split_group", SPLIT_GROUP, ids=lambda sg: f"split{sg[0]}-group{sg[1]}")
def test_odd_shapes(layout, dtype, mnk, split_group):
    assert_matches(GemmShape(*mnk, layout=layout, dtype=dtype), small(*split_group))


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("split_k", [1, 2])
def test_multiples_of_16_and_unequal_blocks(layout, split_k):
    # N and K divisible by 16 take Triton's divisibility specialization; blocks differ per dimension.
    assert_matches(GemmShape(40, 48, 96, layout=layout, dtype="fp16"), small(split_k, 8, bm=16, bn=32, bk=32))


def test_grouped_order_covers_every_tile():
    # 5 tile rows in groups of 2 (a partial last group) and 3 tile columns: every tile written once.
    assert_matches(GemmShape(80, 48, 32, dtype="fp32"), small(1, 2))


def test_split_k_is_deterministic():
    shape = GemmShape(17, 40, 200, layout="nk", dtype="fp32")
    a, b = make_inputs(shape, DEVICE, seed=3)
    first = gemm(a, b, small(4), "nk")
    assert torch.equal(first, gemm(a, b, small(4), "nk"))


def test_out_argument_is_written_and_returned():
    shape = GemmShape(9, 20, 30, dtype="fp16")
    a, b = make_inputs(shape, DEVICE, seed=1)
    out = torch.full((9, 20), float("nan"), dtype=torch.float16, device=DEVICE)
    assert gemm(a, b, small(2), out=out) is out
    assert relative_error(out, reference(a, b, "kn")) <= TOLERANCE[torch.float16]


def test_mismatched_inputs_raise():
    a = torch.randn(4, 8, dtype=torch.float16)
    with pytest.raises(ValueError, match="K differs"):
        gemm(a, torch.randn(9, 5, dtype=torch.float16), small())
    with pytest.raises(ValueError, match="dtypes differ"):
        gemm(a, torch.randn(8, 5, dtype=torch.float32), small())
    with pytest.raises(ValueError, match="layout"):
        gemm(a, torch.randn(8, 5, dtype=torch.float16), small(), layout="mk")


@pytest.mark.parametrize("split_k", [1, 2])
def test_launcher_rotates_input_sets(split_k):
    shape = GemmShape(12, 24, 40, layout="nk", dtype="fp32")
    inputs = [make_inputs(shape, DEVICE, seed) for seed in (10, 11)]
    refs = [reference(a, b, "nk") for a, b in inputs]
    out = torch.empty(12, 24, dtype=torch.float32, device=DEVICE)
    launch = make_launcher(small(split_k), "nk", inputs, out)
    for i in (0, 1, 2, 3):
        out.fill_(float("nan"))
        launch(i)
        assert relative_error(out, refs[i % 2]) <= TOLERANCE[torch.float32]
        assert relative_error(out, refs[1 - i % 2]) > 0.5


def test_launcher_rejects_mixed_shapes():
    a, b = make_inputs(GemmShape(4, 8, 16, dtype="fp16"), DEVICE, 0)
    c, d = make_inputs(GemmShape(5, 8, 16, dtype="fp16"), DEVICE, 0)
    with pytest.raises(ValueError):
        make_launcher(small(), "kn", [(a, b), (c, d)], torch.empty(4, 8, dtype=torch.float16))


def test_make_inputs_is_seeded_random_in_storage_order():
    a, b = make_inputs(GemmShape(3, 5, 7, layout="nk", dtype="fp32"), DEVICE, seed=4)
    assert a.shape == (3, 7) and b.shape == (5, 7) and a.dtype == torch.float32
    assert bool((a != 0).all()) and a.std() > 0.3
    again, _ = make_inputs(GemmShape(3, 5, 7, layout="nk", dtype="fp32"), DEVICE, seed=4)
    other, _ = make_inputs(GemmShape(3, 5, 7, layout="nk", dtype="fp32"), DEVICE, seed=5)
    assert torch.equal(a, again) and not torch.equal(a, other)
    _, b_kn = make_inputs(GemmShape(3, 5, 7, layout="kn"), DEVICE, seed=4, dtype=torch.float16)
    assert b_kn.shape == (7, 5) and b_kn.dtype == torch.float16


def test_specialization_key_ignores_m_only():
    key = specialization_key
    assert key(GemmShape(1, 4096, 4096)) == key(GemmShape(16384, 4096, 4096)) == key(GemmShape(77, 4096, 4096))
    assert key(GemmShape(8, 4096, 4096)) == key(GemmShape(8, 4112, 2048))  # both multiples of 16
    distinct = {key(GemmShape(8, 4096, 4096)), key(GemmShape(8, 4100, 4096)), key(GemmShape(8, 4096, 4100)),
                key(GemmShape(8, 1, 4096)), key(GemmShape(8, 4096, 1)), key(GemmShape(8, 4096, 4096, layout="nk")),
                key(GemmShape(8, 4096, 4096, dtype="fp16"))}
    assert len(distinct) == 7


def test_the_registrys_run_time_parameters_are_not_specialized():
    # A live tune compiles configs that differ only in these once (kernels/harness/live.py): one binary serves them.
    from rooftune.candidates import KERNELS
    from rooftune.kernels import gemm as gemm_module

    kernel = gemm_module._gemm_kernel
    unspecialized = getattr(kernel, "do_not_specialize", None) or kernel.kwargs["do_not_specialize"]  # interpreted
    assert set(KERNELS["gemm"].runtime_params) <= set(unspecialized)


# --- on a GPU -----------------------------------------------------------------------------------

GPU_CONFIGS = [
    Config.make(8, 3, BLOCK_M=256, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1),
    Config.make(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1),
    Config.make(4, 4, BLOCK_M=64, BLOCK_N=128, BLOCK_K=128, GROUP_M=1, SPLIT_K=4),
    Config.make(4, 2, BLOCK_M=16, BLOCK_N=64, BLOCK_K=256, GROUP_M=1, SPLIT_K=16),
    Config.make(4, 3, BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=8, SPLIT_K=2),
]


GPU_SHAPES = [(1, 4096, 4096), (300, 1000, 1030), (2048, 4096, 512), (1000, 4100, 4100), (77, 1001, 1025)]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("config", GPU_CONFIGS, ids=str)
@pytest.mark.parametrize("mnk", GPU_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_bf16_on_gpu(layout, config, mnk):
    shape = GemmShape(*mnk, layout=layout, dtype="bf16")
    shared = compile_kernels(shape, config)[0].metadata.shared
    if shared > torch.cuda.get_device_properties(0).shared_memory_per_block_optin:
        # 256x256 tiles (outside the space: too many registers) with odd N: the epilogue's layout
        # conversion of the fp32 tile needs all 262,144 B. Refused at launch, recorded as data by a sweep.
        with pytest.raises(Exception, match="(?i)out ?of ?resource"):
            assert_matches(shape, config)
        return
    assert_matches(shape, config)


PERSISTENT_GPU_CONFIGS = [
    Config.make(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=1),
    Config.make(4, 3, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("config", PERSISTENT_GPU_CONFIGS, ids=str)
@pytest.mark.parametrize("mnk", [(2048, 4096, 512), (4096, 4104, 1032), (3000, 3000, 3000)],
                         ids=lambda s: "x".join(map(str, s)))
def test_persistent_bf16_on_gpu(layout, config, mnk):
    """On the GPU a persistent launch keeps SMs x resident CTAs programs, fewer than the tiles of these
    shapes (partial tiles in M, N and K), so every program walks several tiles."""
    from rooftune.kernels.gemm import _sources, persistent_programs

    shape = GemmShape(*mnk, layout=layout, dtype="bf16")
    a, b = make_inputs(shape, DEVICE, seed=0)
    out = torch.empty(mnk[0], mnk[1], dtype=a.dtype, device=DEVICE)
    programs = persistent_programs(config, layout, a, b, out, _sources(config, layout, a, b, mnk))
    tiles = -(-mnk[0] // config["BLOCK_M"]) * -(-mnk[1] // config["BLOCK_N"])
    assert torch.cuda.get_device_properties(0).multi_processor_count <= programs < tiles
    assert_matches(shape, config)


# Shared memory of 256x256x64, 8 warps, 3 stages, compiled for sm_90 on the CPU (tests/kernels/sm90_compile.py):
# both operands pipelined (196,608 B); odd N: the epilogue converts the whole fp32 tile (262,144 B);
# odd K ('nk'): neither operand can be copied asynchronously, one buffer each, the epilogue dominates.
CPU_COMPILED_SHARED = {(300, 1000, 1030): 196608, (300, 1001, 1024): 262144, (300, 1024, 1025): 131072,
                       (300, 1024, 1024): 196608}


@pytest.mark.gpu
@pytest.mark.parametrize("mnk", sorted(CPU_COMPILED_SHARED), ids=lambda s: "x".join(map(str, s)))
def test_shared_memory_is_what_the_cpu_compile_says(mnk):
    shape = GemmShape(*mnk, layout="nk")
    kernel = compile_kernels(shape, GPU_CONFIGS[0])[0]
    assert kernel.metadata.shared == CPU_COMPILED_SHARED[mnk]


def _binaries(kernel) -> int:
    device = torch.cuda.current_device()
    return len(kernel.device_caches[device][0])


@pytest.mark.gpu
@pytest.mark.parametrize("nk", [(1024, 1024), (1000, 4100)], ids=["aligned", "align8x4"])
def test_warmup_compiles_one_binary_that_every_m_group_and_split_reuse(nk):
    from rooftune.kernels import gemm as gemm_module

    n, k = nk
    base = dict(BLOCK_M=64, BLOCK_N=64, BLOCK_K=64)
    shape = GemmShape(100, n, k, layout="nk")
    seconds = warmup(shape, Config.make(4, 3, GROUP_M=1, SPLIT_K=2, **base))
    assert seconds > 0
    compiled = _binaries(gemm_module._gemm_kernel)
    reduce_compiled = _binaries(gemm_module._splitk_reduce_kernel)
    for m, group_m, split_k in [(100, 1, 2), (1, 8, 1), (513, 8, 4), (7, 1, 16)]:
        assert_matches(GemmShape(m, n, k, layout="nk"), Config.make(4, 3, GROUP_M=group_m, SPLIT_K=split_k, **base))
    assert _binaries(gemm_module._gemm_kernel) == compiled
    assert _binaries(gemm_module._splitk_reduce_kernel) == reduce_compiled


# --- TMA loads (TMA = 1: the space's load path where the GPU and the rows allow it) ---------------------

def tma(split_k: int = 1, group_m: int = 1) -> Config:
    return small(split_k, group_m, bn=32, bk=32, TMA=1)


# Rows of 16-byte multiples (fp16: 8 elements, fp32: 4) with partial tiles in M, N and K.
TMA_SHAPES = [(1, 8, 8), (37, 40, 72), (100, 24, 136), (5, 64, 48)]


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("mnk", TMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("split_group", SPLIT_GROUP, ids=lambda sg: f"split{sg[0]}-group{sg[1]}")
def test_tma_loads_on_odd_shapes(layout, dtype, mnk, split_group):
    assert_matches(GemmShape(*mnk, layout=layout, dtype=dtype), tma(*split_group))


# --- persistent tiles (PERSISTENT = 1: TMA loads, SPLIT_K 1, min(tiles, P) programs) -------------------

def persistent(group_m: int = 1) -> Config:
    return small(1, group_m, bn=32, bk=32, TMA=1, PERSISTENT=1)


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("mnk", TMA_SHAPES + [(70, 100, 40)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("group_m", [1, 3])
def test_persistent_tiles_on_odd_shapes(layout, mnk, group_m):
    """Off the GPU a persistent launch keeps INTERPRETER_PROGRAMS programs, so each walks several tiles
    (70x100: 5 x 4 tiles over 2 programs) in the grouped order, with partial tiles in M, N and K."""
    assert_matches(GemmShape(*mnk, layout=layout, dtype="fp16"), persistent(group_m))


def test_persistent_needs_tma_and_one_split():
    from rooftune.kernels.gemm import compile_kernels

    a = torch.randn(32, 32, dtype=torch.float16, device=DEVICE)
    for bad in (small(1, 1, TMA=0, PERSISTENT=1), small(2, 1, bn=32, bk=32, TMA=1, PERSISTENT=1)):
        with pytest.raises(ValueError, match="PERSISTENT = 1 needs TMA = 1 and SPLIT_K = 1"):
            make_launcher(bad, "kn", [(a, a)], torch.empty(32, 32, dtype=torch.float16, device=DEVICE))
        with pytest.raises(ValueError, match="PERSISTENT = 1 needs"):
            compile_kernels(GemmShape(32, 32, 32, "kn"), bad)


def test_persistent_falls_back_to_pointer_tiles_where_descriptors_cannot_address_the_rows():
    b = torch.randn(36, 20, dtype=torch.float16, device=DEVICE)  # rows of 40 bytes: no descriptor
    a = torch.randn(24, 36, dtype=torch.float16, device=DEVICE)
    assert relative_error(gemm(a, b, persistent(), "kn"), reference(a, b, "kn")) <= TOLERANCE[torch.float16]
    with pytest.raises(ValueError, match="TMA config needs"):
        make_launcher(persistent(), "kn", [(a, b)], torch.empty(24, 20, dtype=torch.float16, device=DEVICE))


def test_persistent_stores_c_through_a_descriptor_only_where_its_rows_are_aligned(monkeypatch):
    """C_TMA = 1 (C stored through a descriptor in two halves along N) where out's rows are 16-byte aligned;
    an out view with unaligned rows, or an N whose rows are not, takes the pointer stores; all correct."""
    from rooftune.kernels import gemm as G

    paths = []
    real = G._c_store

    def spy(*args, **kw):
        made = real(*args, **kw)
        paths.append(made[1])
        return made

    monkeypatch.setattr(G, "_c_store", spy)
    for n, out_cols in ((96, 96), (96, 97), (100, 100)):  # rows of 192, 194 and 200 bytes
        a, b = make_inputs(GemmShape(70, n, 40, layout="nk", dtype="fp16"), DEVICE, 0)
        out = torch.full((70, out_cols), float("nan"), dtype=torch.float16, device=DEVICE)[:, :n]
        gemm(a, b, persistent(3), "nk", out=out)
        assert relative_error(out, reference(a, b, "nk")) <= TOLERANCE[torch.float16]
        if out_cols > n:
            assert torch.isnan(out.as_strided((70, 1), (out_cols, 1), n)).all()  # the padding column is untouched
    assert paths == [{"C_TMA": 1}, {}, {}]


def test_tma_falls_back_to_pointers_where_descriptors_cannot_address_the_rows():
    """A TMA config on a view whose rows are not 16-byte aligned: gemm() runs the same tiles through
    pointers (correct), a launcher refuses (so a timing never records another path under TMA=1)."""
    a = torch.randn(24, 40, dtype=torch.float16, device=DEVICE)[:, :36]  # a view: rows 80 bytes apart (aligned)
    b = torch.randn(36, 20, dtype=torch.float16, device=DEVICE)  # B [K, N]: rows of 20 fp16, 40 bytes: not
    out = gemm(a, b, tma(), "kn")
    rel = relative_error(out, reference(a, b, "kn"))
    assert rel <= TOLERANCE[torch.float16]
    with pytest.raises(ValueError, match="TMA config needs"):
        make_launcher(tma(), "kn", [(a, b)], torch.empty(24, 20, dtype=torch.float16, device=DEVICE))


# --- composite tiles (BLOCK_N2 > 0: BLOCK_N + BLOCK_N2 columns, two accumulators; TMA, SPLIT_K 1) -------

def composite(bn: int = 32, bn2: int = 16, group_m: int = 1, bm: int = 16) -> Config:
    return small(1, group_m, bm=bm, bn=bn, bk=32, TMA=1, PERSISTENT=0, BLOCK_N2=bn2)


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("dtype", ["fp16", "fp32"])
@pytest.mark.parametrize("mnk", TMA_SHAPES + [(70, 104, 40), (33, 48, 64)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("parts", [(32, 16), (16, 8)], ids=lambda p: f"{p[0]}+{p[1]}")
def test_composite_tiles_on_odd_shapes(layout, dtype, mnk, parts):
    """48- and 24-column tiles: partial tiles in M, in K, and in N where the edge falls in either accumulator
    (70x104 at 48 columns: the last tile's first part is partial and its second part is all past N)."""
    assert_matches(GemmShape(*mnk, layout=layout, dtype=dtype), composite(*parts, group_m=3))


def test_composite_tile_launchers_and_grid_cover_every_column():
    """A launcher over two input sets writes every element of C: tiles of 48 columns over N = 200 (5 tiles,
    the last holding 8 columns in its first part), M in 3 tiles of 16."""
    shape = GemmShape(40, 200, 64, layout="nk", dtype="fp16")
    inputs = [make_inputs(shape, DEVICE, seed) for seed in (0, 1)]
    out = torch.full((40, 200), float("nan"), dtype=torch.float16, device=DEVICE)
    launch = make_launcher(composite(), "nk", inputs, out)
    for i, (a, b) in enumerate(inputs):
        launch(i)
        assert relative_error(out, reference(a, b, "nk")) <= TOLERANCE[torch.float16]


def test_composite_tiles_need_tma_one_program_per_tile_and_one_split():
    a = torch.randn(32, 32, dtype=torch.float16, device=DEVICE)
    for bad in (small(1, 1, BLOCK_N2=16), small(2, 1, bn=32, bk=32, TMA=1, BLOCK_N2=16),
                small(1, 1, bn=32, bk=32, TMA=1, PERSISTENT=1, BLOCK_N2=16)):
        with pytest.raises(ValueError, match="BLOCK_N2 > 0 needs TMA = 1, PERSISTENT = 0 and SPLIT_K = 1"):
            make_launcher(bad, "kn", [(a, a)], torch.empty(32, 32, dtype=torch.float16, device=DEVICE))
        with pytest.raises(ValueError, match="BLOCK_N2 > 0 needs"):
            compile_kernels(GemmShape(32, 32, 32, "kn"), bad)


def test_composite_tile_falls_back_to_pointer_tiles_where_descriptors_cannot_address_the_rows():
    b = torch.randn(36, 20, dtype=torch.float16, device=DEVICE)  # B [K, N]: rows of 40 bytes, no descriptor
    a = torch.randn(24, 36, dtype=torch.float16, device=DEVICE)
    assert relative_error(gemm(a, b, composite(), "kn"), reference(a, b, "kn")) <= TOLERANCE[torch.float16]


COMPOSITE_GPU_CONFIGS = [
    Config.make(8, 4, BLOCK_M=128, BLOCK_N=256, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0,
                BLOCK_N2=64),
    Config.make(4, 5, BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, GROUP_M=8, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0,
                BLOCK_N2=32),
    Config.make(4, 4, BLOCK_M=64, BLOCK_N=256, BLOCK_K=64, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0,
                BLOCK_N2=64),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("config", COMPOSITE_GPU_CONFIGS, ids=str)
@pytest.mark.parametrize("mnk", [(2048, 1280, 8192), (363, 6224, 2384), (300, 1000, 1032), (77, 4104, 1032)],
                         ids=lambda s: "x".join(map(str, s)))
def test_composite_bf16_on_gpu(layout, config, mnk):
    assert_matches(GemmShape(*mnk, layout=layout, dtype="bf16"), config)


# --- split-K summed in the GEMM kernel (FIXUP = 1: the last split to arrive sums the partials) ---------

@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("mnk", [(7, 33, 100), (1, 1, 1), pytest.param((33, 100, 70), marks=pytest.mark.slow)],
                         ids=lambda s: "x".join(map(str, s)))  # 33x100x70: 1-2 s a case in the interpreter
@pytest.mark.parametrize("split_k", [2, 3])
@pytest.mark.parametrize("load", [{}, {"TMA": 1}], ids=["pointers", "tma"])
def test_fixup_sums_the_splits_in_the_kernel_as_the_reduction_kernel_does(layout, mnk, split_k, load):
    """The same bits as the reduction kernel (both sum the fp32 partials in split order), on odd shapes
    where the last splits get no K blocks (1x1x1), for pointer and TMA loads, and again from a launcher,
    whose arrival counters must be back at 0 for its next launch."""
    if load:  # descriptors need 16-byte rows: fp16 K (and N for B [K, N]) multiples of 8
        mnk = (mnk[0], -(-mnk[1] // 8) * 8, -(-mnk[2] // 8) * 8)
    shape = GemmShape(*mnk, layout=layout, dtype="fp16")
    config = small(split_k, 1, bn=32, bk=16, **load)
    fixup = Config.make(4, 2, **{**config.kernel_params(), "FIXUP": 1})
    out = assert_matches(shape, fixup)
    a, b = make_inputs(shape, DEVICE, 0)
    assert torch.equal(out, gemm(a, b, config, layout))
    into = torch.empty_like(out)
    launch = make_launcher(fixup, layout, [(a, b)], into)
    for i in range(3):
        into.fill_(float("nan"))
        launch(i)
        assert torch.equal(into, out)


def test_gemm_keeps_its_workspaces_per_stream_and_shape(monkeypatch):
    """gemm() zeroes a FIXUP config's counters once per (device, stream, split, M, N, tile) and reuses
    the workspace (its counters are back at 0 after each call: the results stay the reduction kernel's
    bits); a reduction-kernel split keeps its own; without split-K one stand-in serves every call; past
    WORKSPACE_CACHE_BYTES the oldest goes."""
    monkeypatch.setattr(gemm_module, "_split_workspaces", {})
    shape = GemmShape(7, 40, 96, layout="nk", dtype="fp16")
    a, b = make_inputs(shape, DEVICE, 0)
    plain = small(3, 1, bn=32, bk=16)
    fixup = Config.make(4, 2, **{**plain.kernel_params(), "FIXUP": 1})
    want = gemm(a, b, plain, "nk")
    for _ in range(3):
        assert torch.equal(gemm(a, b, fixup, "nk"), want)
    assert torch.equal(gemm(a, b, plain, "nk"), want)
    assert len(gemm_module._split_workspaces) == 2
    ws = gemm_module._call_workspace(fixup, 7, 40, a.device)
    assert ws.numel() == 3 * 7 * 40 + 1 * 2 and not ws[3 * 7 * 40:].any()  # tiles: 1 x 2, counters at 0
    assert gemm_module._call_workspace(plain, 7, 40, a.device) is not ws
    one = small(1, 1, bn=32, bk=16)
    assert gemm_module._call_workspace(one, 7, 40, a.device) is gemm_module._call_workspace(one, 9, 90, a.device)
    other = Config.make(4, 2, **{**fixup.kernel_params(), "BLOCK_N": 16})
    monkeypatch.setattr(gemm_module, "WORKSPACE_CACHE_BYTES", ws.numel() * 4)
    assert torch.equal(gemm(a, b, other, "nk"), want)
    assert [w is ws for w in gemm_module._split_workspaces.values()] == [False]  # the newest alone


def test_gemm_makes_its_launch_function_once_per_config_and_shape(monkeypatch):
    made = []
    real = gemm_module._launch_fn
    monkeypatch.setattr(gemm_module, "_launch_fn", lambda *args: made.append(args) or real(*args))
    gemm_module._launch_fns.clear()
    shape = GemmShape(5, 24, 40, layout="kn", dtype="fp16")
    a, b = make_inputs(shape, DEVICE, 0)
    config = small(2, 1, bn=16, bk=16)
    first = gemm(a, b, config, "kn")
    assert torch.equal(gemm(a, b, config, "kn"), first) and len(made) == 1
    gemm(a, b, dict(config), "kn")  # a plain mapping is not hashable: made per call
    assert len(made) == 2


def test_fixup_needs_a_split():
    a = torch.randn(32, 32, dtype=torch.float16, device=DEVICE)
    bad = small(1, 1, FIXUP=1)
    with pytest.raises(ValueError, match="FIXUP = 1 needs SPLIT_K > 1"):
        make_launcher(bad, "kn", [(a, a)], torch.empty(32, 32, dtype=torch.float16, device=DEVICE))
    with pytest.raises(ValueError, match="FIXUP = 1 needs SPLIT_K > 1"):
        compile_kernels(GemmShape(32, 32, 32, "kn"), bad)


FIXUP_GPU_CONFIGS = [
    Config.make(4, 4, BLOCK_M=16, BLOCK_N=64, BLOCK_K=128, GROUP_M=1, SPLIT_K=4, TMA=1, FIXUP=1),
    Config.make(4, 3, BLOCK_M=64, BLOCK_N=32, BLOCK_K=128, GROUP_M=1, SPLIT_K=8, TMA=1, FIXUP=1),
    Config.make(4, 3, BLOCK_M=32, BLOCK_N=32, BLOCK_K=64, GROUP_M=8, SPLIT_K=3, TMA=0, FIXUP=1),
]


@pytest.mark.gpu
@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("config", FIXUP_GPU_CONFIGS, ids=str)
@pytest.mark.parametrize("mnk", [(1, 4096, 4096), (24, 4800, 1600), (64, 2560, 10240), (19, 224, 1792), (7, 1001, 1025)],
                         ids=lambda s: "x".join(map(str, s)))
def test_fixup_bf16_on_gpu(layout, config, mnk):
    """Split-K summed in the GEMM kernel on the GPU, where the splits really race for the counters:
    bf16 within tolerance, the same bits as the reduction kernel, and again after 20 launches of one
    launcher (its counters back at 0 each time). Unaligned rows (7x1001x1025) run the pointer path."""
    shape = GemmShape(*mnk, layout=layout, dtype="bf16")
    out = assert_matches(shape, config)
    a, b = make_inputs(shape, DEVICE, 0)
    plain = Config.make(config.num_warps, config.num_stages, **{**config.kernel_params(), "FIXUP": 0})
    assert torch.equal(out, gemm(a, b, plain, layout))
    if not tma_ready(a, b):
        config = Config.make(config.num_warps, config.num_stages, **{**config.kernel_params(), "TMA": 0})
    into = torch.empty_like(out)
    launch = make_launcher(config, layout, [(a, b)], into)
    for i in range(20):
        launch(i)
    assert torch.equal(into, out)


@pytest.mark.gpu
def test_gemm_fixup_workspace_per_stream_and_under_graph_capture_on_gpu():
    """gemm() with a FIXUP config, 20 calls on each of two streams (one cached workspace each) and inside
    a captured CUDA graph (its own workspace, zeroed on every replay): the reduction kernel's bits."""
    shape = GemmShape(24, 4800, 1600, layout="nk", dtype="bf16")
    a, b = make_inputs(shape, DEVICE, 0)
    config = FIXUP_GPU_CONFIGS[0]
    plain = Config.make(config.num_warps, config.num_stages, **{**config.kernel_params(), "FIXUP": 0})
    want = gemm(a, b, plain, "nk")
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    outs = [torch.empty_like(want) for _ in streams]
    for _ in range(20):
        for stream, out in zip(streams, outs):
            with torch.cuda.stream(stream):
                gemm(a, b, config, "nk", out=out)
    torch.cuda.synchronize()
    assert all(torch.equal(out, want) for out in outs)
    graph_out = torch.empty_like(want)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm(a, b, config, "nk", out=graph_out)  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        gemm(a, b, config, "nk", out=graph_out)
    for _ in range(5):
        graph_out.fill_(float("nan"))
        graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(graph_out, want)
