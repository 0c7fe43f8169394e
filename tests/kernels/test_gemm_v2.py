"""The GEMM's v2 variants (TMA 0/1 x SCHEDULE data-parallel / persistent / stream-K) against an fp64
reference, the stream-K fix-up, the grids, legality, and (compiled for sm_90 on the CPU) shared memory.

On the CPU these run in Triton's interpreter (fp16/fp32 inputs: it mishandles bf16); GPU-only tests are marked."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from rooftune.candidates import Config, GemmShape, parse_config
from rooftune.candidates.gemm_space import gemm_smem_bytes
from rooftune.kernels import gemm_v2 as v2
from rooftune.kernels.check import TOLERANCE, relative_error
from rooftune.kernels.gemm import make_inputs, reference

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
H200_SMEM_PER_BLOCK = 232448
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def cfg(tma: int = 0, schedule: int = 0, split_k: int = 1, bm: int = 16, bn: int = 16, bk: int = 16,
        group_m: int = 1, warps: int = 4, stages: int = 2) -> Config:
    return Config.make(warps, stages, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=group_m, SPLIT_K=split_k,
                       TMA=tma, SCHEDULE=schedule)


def run_and_check(shape: GemmShape, config: Config, num_sms: int | None = None, seed: int = 0) -> torch.Tensor:
    a, b = make_inputs(shape, DEVICE, seed)
    out = v2.gemm_v2(a, b, config, shape.layout, num_sms=num_sms)
    assert out.shape == (shape.m, shape.n) and out.dtype == a.dtype
    rel = relative_error(out, reference(a, b, shape.layout))
    assert rel <= TOLERANCE[a.dtype], f"{shape} {config}: rel err {rel:.3g}"
    return out


SCHEDULES = sorted(v2.SCHEDULES)
# With 16x16x16 tiles and 4 programs: (1, 1, 1) one tile and one K block; (7, 33, 65) 3 tiles < 4
# programs, all stream-K, 5 K blocks over 4 runs; (65, 130, 33) 45 tiles, the last (45 % 4 = 1) split
# in 3 K blocks; (130, 7, 130) 9 tiles, 9 K blocks each, one stream-K tile cut in four.
ODD_SHAPES = [(1, 1, 1), (7, 33, 65), (65, 130, 33), (130, 7, 130)]
# TMA needs 16-byte rows: K (and N for 'kn') multiples of 8 in fp16; M stays odd, blocks stay partial.
TMA_SHAPES = [(7, 40, 72), (65, 24, 136)]


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: v2.SCHEDULES[s])
@pytest.mark.parametrize("mnk", ODD_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_pointer_variants_on_odd_shapes(layout, schedule, mnk):
    run_and_check(GemmShape(*mnk, layout=layout, dtype="fp16"), cfg(0, schedule, group_m=2), num_sms=4)


@pytest.mark.parametrize("layout", ["kn", "nk"])
@pytest.mark.parametrize("schedule", SCHEDULES, ids=lambda s: v2.SCHEDULES[s])
@pytest.mark.parametrize("mnk", TMA_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_tma_variants(layout, schedule, mnk):
    run_and_check(GemmShape(*mnk, layout=layout, dtype="fp16"), cfg(1, schedule, group_m=2), num_sms=3)


@pytest.mark.parametrize("tma", [0, 1], ids=["pointers", "tma"])
@pytest.mark.parametrize("layout", ["kn", "nk"])
def test_split_k_data_parallel(tma, layout):
    # 5 K blocks over 3 splits (the last split gets one); fp32 through the interpreter.
    run_and_check(GemmShape(17, 24, 80, layout=layout, dtype="fp32"), cfg(tma, 0, split_k=3, group_m=8))


@pytest.mark.parametrize("tma", [0, 1], ids=["pointers", "tma"])
def test_unequal_blocks_and_more_programs_than_iterations(tma):
    # 2 tiles x 2 K blocks = 4 iterations for 7 programs: the grid shrinks to 4, one iteration each.
    shape = GemmShape(40, 32, 64, layout="nk", dtype="fp16")
    config = cfg(tma, v2.STREAM_K, bm=32, bn=32, bk=32)
    assert v2.grid_of(config, 40, 32, 64, 7) == (4,)
    run_and_check(shape, config, num_sms=7)


def test_stream_k_is_deterministic_and_resets_its_counters():
    # 45 tiles on 4 programs: the last tile's 9 K blocks cut over 4 runs; relaunching gives the same bits.
    shape = GemmShape(65, 130, 130, layout="kn", dtype="fp32")
    config = cfg(0, v2.STREAM_K)
    inputs = [make_inputs(shape, DEVICE, seed) for seed in (1, 2)]
    out = torch.empty(65, 130, dtype=torch.float32, device=DEVICE)
    launch = v2.make_launcher(config, "kn", inputs, out, num_sms=4)
    results = []
    for i in (0, 1, 2):
        out.fill_(float("nan"))
        launch(i)
        a, b = inputs[i % 2]
        assert relative_error(out, reference(a, b, "kn")) <= TOLERANCE[torch.float32]
        results.append(out.clone())
    # A counter left above 0 would make the next launch's last arrival miss its turn: NaN tiles.
    assert torch.equal(results[0], results[2]) and not torch.equal(results[0], results[1])


def test_grids():
    config = dict(cfg(0, v2.DATA_PARALLEL, split_k=2, bm=32, bn=64, bk=64))
    assert v2.grid_of(config, 100, 130, 500, 8) == (4 * 3, 2)
    assert v2.grid_of({**config, "SCHEDULE": v2.PERSISTENT}, 100, 130, 500, 8) == (8,)
    assert v2.grid_of({**config, "SCHEDULE": v2.PERSISTENT}, 100, 130, 500, 100) == (12,)
    assert v2.grid_of({**config, "SCHEDULE": v2.STREAM_K}, 100, 130, 500, 50) == (50,)
    assert v2.grid_of({**config, "SCHEDULE": v2.STREAM_K}, 100, 130, 500, 100) == (96,)  # 12 tiles x 8 iterations
    assert v2.grid_of({**config, "SCHEDULE": v2.STREAM_K}, 100, 130, 64, 100) == (12,)


def test_persistent_needs_num_sms_without_a_gpu():
    if DEVICE == "cuda":
        pytest.skip("the GPU's SM count is the default")
    a, b = make_inputs(GemmShape(8, 8, 8, dtype="fp16"), DEVICE, 0)
    with pytest.raises(ValueError, match="num_sms"):
        v2.gemm_v2(a, b, cfg(0, v2.PERSISTENT))
    assert relative_error(v2.gemm_v2(a, b, cfg(0, v2.DATA_PARALLEL)), reference(a, b, "kn")) <= TOLERANCE[a.dtype]


def test_launch_rejects_what_the_kernel_cannot_run():
    a, b = make_inputs(GemmShape(8, 16, 12, layout="nk", dtype="fp16"), DEVICE, 0)
    with pytest.raises(ValueError, match="TMA"):  # rows of 12 fp16 = 24 bytes
        v2.gemm_v2(a, b, cfg(1), "nk")
    a, b = make_inputs(GemmShape(8, 16, 16, dtype="fp16"), DEVICE, 0)
    with pytest.raises(ValueError, match="SPLIT_K"):
        v2.gemm_v2(a, b, cfg(0, v2.PERSISTENT, split_k=2), num_sms=2)
    with pytest.raises(ValueError, match="one shape"):  # one launcher, one binary and grid
        c, d = make_inputs(GemmShape(9, 16, 16, dtype="fp16"), DEVICE, 0)
        v2.make_launcher(cfg(), "kn", [(a, b), (c, d)], torch.empty(8, 16, dtype=torch.float16, device=DEVICE))


# --- legality -------------------------------------------------------------------------------------

BIG = cfg(1, v2.PERSISTENT, bm=128, bn=256, bk=64, group_m=8, warps=8, stages=3)


def test_legal_configs_and_tma_alignment():
    legal = lambda *args, **kw: v2.v2_legal(*args, smem_limit_bytes=H200_SMEM_PER_BLOCK, **kw)  # noqa: E731
    assert legal(4096, 4096, 4096, "nk", BIG) is None
    assert legal(1, 1, 1, "kn", dict(BIG, TMA=0)) is None                  # any shape runs through pointers
    assert "16-byte" in legal(4096, 4096, 4100, "nk", BIG)                 # K rows of A and B
    assert legal(4096, 4100, 4096, "nk", BIG) is None                      # N is no row of A or B [N, K]
    assert "N a multiple of 8" in legal(4096, 4100, 4096, "kn", BIG)       # B [K, N] rows
    assert legal(4096, 4100, 4096, "kn", dict(BIG, BLOCK_N=128, num_stages=2), elem_bytes=4) is None  # 16,400 B
    assert "compute capability" in legal(4096, 4096, 4096, "nk", BIG, capability=(8, 0))
    assert legal(4096, 4096, 4096, "nk", dict(BIG, TMA=0), capability=(8, 0)) is None


def test_illegal_configs_say_why():
    legal = lambda shape, config: v2.v2_legal(*shape, "nk", config, H200_SMEM_PER_BLOCK)  # noqa: E731
    assert "SPLIT_K" in legal((64, 4096, 4096), dict(BIG, SPLIT_K=2))
    assert legal((64, 4096, 4096), dict(BIG, SPLIT_K=2, SCHEDULE=v2.DATA_PARALLEL)) is None
    assert "lacks SCHEDULE" in legal((64, 64, 64), {k: v for k, v in BIG.items() if k != "SCHEDULE"})
    assert "SCHEDULE" in legal((64, 64, 64), dict(BIG, SCHEDULE=3))
    assert "TMA must be" in legal((64, 64, 64), dict(BIG, TMA=2))
    assert ">= 1" in legal((0, 64, 64), BIG)
    assert "powers of two" in legal((64, 64, 64), dict(BIG, BLOCK_K=48))
    # 4 stages of 128x256x64 (196,608 B of operands) fit beside a persistent epilogue of 32 KiB, not
    # beside the whole C tile (64 KiB) that an N with unaligned rows may take.
    assert legal((4096, 4096, 4096), dict(BIG, num_stages=4)) is None
    assert "shared memory" in legal((4096, 4095, 4096), dict(BIG, num_stages=4))
    assert legal((4096, 4095, 4096), dict(BIG, num_stages=4, SCHEDULE=v2.DATA_PARALLEL)) is None


def test_smem_estimate_terms():
    dp = dict(BIG, SCHEDULE=v2.DATA_PARALLEL, TMA=0)
    assert v2.v2_smem_bytes(dp, 4096) == 3 * (128 + 256) * 64 * 2
    assert v2.v2_smem_bytes(dict(dp, TMA=1), 4096) == 3 * (128 + 256) * 64 * 2 + v2.TMA_BARRIER_BYTES
    assert v2.v2_smem_bytes(dict(dp, SCHEDULE=v2.PERSISTENT), 4096) - v2.v2_smem_bytes(dp, 4096) == 2048 * 8 * 2
    assert v2.v2_smem_bytes(dict(dp, SCHEDULE=v2.STREAM_K), 4095) - v2.v2_smem_bytes(dp, 4095) == 128 * 256 * 2


# --- compiled for sm_90 on the CPU ------------------------------------------------------------------

SM90_SCRIPT = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
from rooftune.candidates import GemmShape, parse_config
from rooftune.kernels import gemm_v2
from rooftune.kernels.prebuild import offline_target
results = []
for shape, config in json.loads(sys.argv[1]):
    with offline_target(arch=90):
        kernels = gemm_v2.compile_kernels(GemmShape(*shape), parse_config(config))
    ptx = kernels[0].asm["ptx"]
    results.append({"shared": kernels[0].metadata.shared, "binaries": len(kernels),
                    "tma_copies": ptx.count("cp.async.bulk.tensor"), "cp_async": ptx.count("cp.async.c"),
                    "wgmma": ptx.count("wgmma.mma_async"), "acq_rel_atomics": ptx.count("atom.global.gpu.acq_rel")})
print(json.dumps(results))
"""


def _sm90(bm, bn, bk, warps, stages, tma, schedule, split_k=1) -> str:
    return str(cfg(tma, schedule, split_k, bm, bn, bk, 8, warps, stages))


SM90_JOBS = [((4096, 4096, 4096, "nk", "bf16"), _sm90(128, 256, 64, 8, 3, tma, schedule))
             for tma in (0, 1) for schedule in SCHEDULES] + [
    ((1024, 4608, 3584, "nk", "bf16"), _sm90(128, 128, 64, 4, 4, 1, 2)),
    ((1000, 4095, 4100, "kn", "bf16"), _sm90(256, 128, 64, 8, 3, 0, 1)),     # odd N: the whole C tile
    ((64, 4096, 4096, "kn", "bf16"), _sm90(64, 128, 128, 4, 3, 1, 0, split_k=4)),
    ((6000, 5000, 3000, "kn", "bf16"), _sm90(64, 256, 64, 4, 4, 1, 1)),
]


def test_sm90_compiles_and_shared_memory_is_within_the_estimate(tmp_path):
    """Every variant compiles for sm_90; TMA configs copy with bulk tensor copies, pointer configs with
    cp.async; stream-K has its acq_rel arrival atomic. Shared memory never exceeds v2_smem_bytes;
    (these are wgmma tiles) the data-parallel ones use exactly the operand tiles (+ barriers), and
    with 16-byte rows every schedule keeps num_stages operand buffers (the flattened persistent loop
    is pipelined too)."""
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["TRITON_CACHE_DIR"] = str(tmp_path)
    done = subprocess.run([sys.executable, "-c", SM90_SCRIPT, json.dumps(SM90_JOBS)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    for (shape, text), result in zip(SM90_JOBS, json.loads(done.stdout)):
        config = parse_config(text)
        estimate = v2.v2_smem_bytes(config, shape[1])
        assert result["shared"] <= estimate, (shape, text, result, estimate)
        assert result["wgmma"] > 0, (shape, text, result)
        if config["SCHEDULE"] == v2.DATA_PARALLEL:
            assert estimate - result["shared"] < v2.TMA_BARRIER_BYTES, (shape, text, result, estimate)
        if shape[1] % 8 == 0 and shape[2] % 8 == 0:  # 16-byte rows: every stage buffered (the loop pipelined)
            assert result["shared"] >= gemm_smem_bytes({**config, "TMA": 0}, 2), (shape, text, result)
        assert (result["tma_copies"] > 0) == bool(config["TMA"]) and (result["cp_async"] > 0) != bool(config["TMA"])
        assert (result["acq_rel_atomics"] > 0) == (config["SCHEDULE"] == v2.STREAM_K), (text, result)
        assert result["binaries"] == (2 if config["SPLIT_K"] > 1 else 1)


# --- on a GPU -----------------------------------------------------------------------------------

GPU_CONFIGS = [cfg(tma, schedule, 1, 128, 256, 64, 8, 8, 3) for tma in (0, 1) for schedule in SCHEDULES] + [
    cfg(1, v2.STREAM_K, 1, 128, 128, 64, 8, 4, 4), cfg(0, v2.PERSISTENT, 1, 64, 128, 64, 8, 4, 3),
    cfg(1, v2.DATA_PARALLEL, 4, 64, 128, 128, 1, 4, 3)]
# 1024x4608x3584: 144 tiles of 128x256 on 132 SMs, the 12 left over in stream-K; N = 1001: no TMA for 'kn'.
GPU_SHAPES = [GemmShape(*mnk, layout=layout) for mnk in [(1024, 4608, 3584), (300, 1000, 1032), (77, 1001, 1024),
                                                         (1, 4096, 4096)] for layout in ("kn", "nk")]


@pytest.mark.gpu
@pytest.mark.parametrize("config", GPU_CONFIGS, ids=str)
@pytest.mark.parametrize("shape", GPU_SHAPES, ids=str)
def test_bf16_on_gpu(shape, config):
    props = torch.cuda.get_device_properties(0)
    reason = v2.v2_legal(shape.m, shape.n, shape.k, shape.layout, config, props.shared_memory_per_block_optin,
                         capability=torch.cuda.get_device_capability())
    if reason is not None:
        pytest.skip(reason)
    first = run_and_check(shape, config, seed=1)
    a, b = make_inputs(shape, DEVICE, 1)
    assert torch.equal(first, v2.gemm_v2(a, b, config, shape.layout))  # every schedule is deterministic


@pytest.mark.gpu
def test_stream_k_in_a_cuda_graph_replays_correctly():
    shape = GemmShape(1024, 4608, 3584, layout="nk")
    inputs = [make_inputs(shape, DEVICE, seed) for seed in (3, 4)]
    out = torch.empty(1024, 4608, dtype=torch.bfloat16, device=DEVICE)
    launch = v2.make_launcher(GPU_CONFIGS[2], "nk", inputs, out)
    launch(0)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(4):
            launch(i)
    for _ in range(3):
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert relative_error(out, reference(*inputs[1], "nk")) <= TOLERANCE[torch.bfloat16]
