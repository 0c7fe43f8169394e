"""The Gluon GEMM (kernels/gluon_gemm.py): compiled for sm_90 on the CPU (wgmma, multicast loads), its
unavailability on a Triton without Gluon, and on a Hopper GPU its results against torch.matmul."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from compile_script import run_script

from rooftune.kernels import gluon_gemm

SCRIPT = Path(__file__).with_name("sm90_gluon_compile.py")


def _available_compiled() -> bool:
    """`available()` in a process where Triton compiles (this one may run Triton's interpreter, where it is False)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", "from rooftune.kernels import gluon_gemm; print(gluon_gemm.available())"],
                          capture_output=True, text=True, env=env, timeout=300)
    return done.stdout.strip().endswith("True")


needs_gluon = pytest.mark.skipif(not (gluon_gemm.available() or _available_compiled()),
                                 reason="this Triton's Gluon lacks multicast TMA / CTA layouts")


def config(bm=128, bn=128, bk=64, stages=4, cluster_m=1, warps=4) -> dict:
    return dict(BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_stages=stages, CLUSTER_M=cluster_m, num_warps=warps)


def compile_sm90(jobs: list[dict], cache: Path) -> list[dict]:
    return run_script(SCRIPT, jobs, cache)


@needs_gluon
def test_sm90_compile_has_wgmma_and_a_multicast_b_load_in_a_cluster(tmp_path):
    configs = [config(), config(cluster_m=2), config(bn=256, stages=3, cluster_m=2, warps=8)]
    jobs = [{"shape": [300, 4096, 4096], "config": c} for c in configs]
    jobs.append({"shape": [300, 4096, 4096], "config": config(cluster_m=2), "layout": "kn"})
    single, pair, wide, pair_kn = compile_sm90(jobs, tmp_path)
    for r in (single, pair, wide, pair_kn):
        assert r["wgmma"] > 0 and r["cubin_bytes"] > 0
    assert single["num_ctas"] == 1 and single["multicast_loads"] == 0 and single["cluster_arrives"] == 0
    for r in (pair, wide, pair_kn):
        # B's tile loaded once into both CTAs; each CTA releases a stage on the first CTA's barrier.
        assert r["num_ctas"] == 2 and r["multicast_loads"] > 0 and r["cluster_arrives"] > 0
    # The ring holds num_stages A and B tiles per CTA; C's tile reuses it after the loop.
    ring = 4 * (128 * 64 + 128 * 64) * 2
    assert ring <= pair["shared"] < ring + 1024 and single["shared"] == pair["shared"]
    assert wide["shared"] < 3 * (128 * 64 + 256 * 64) * 2 + 1024


def test_available_is_a_bool_and_false_without_gluon():
    assert isinstance(gluon_gemm.available(), bool)
    probe = (
        "import sys\n"
        "sys.modules['triton.experimental.gluon'] = None\n"  # import of it raises ImportError
        "import rooftune.kernels.gluon_gemm as m\n"
        "assert m.available() is False\n"
        "try:\n"
        "    m.compile_kernels((256, 256, 256), dict(BLOCK_M=128, BLOCK_N=128, BLOCK_K=64, num_stages=3,"
        " CLUSTER_M=1, num_warps=4))\n"
        "except RuntimeError as e:\n"
        "    print('refused:', e)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "refused:" in done.stdout


def test_illegal_configs_are_refused():
    with pytest.raises(ValueError):
        gluon_gemm.check_config(config(cluster_m=4))
    with pytest.raises(ValueError):
        gluon_gemm.check_config(config(bm=32))
    with pytest.raises(ValueError):
        gluon_gemm.check_config({"BLOCK_M": 128})


def _hopper() -> bool:
    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


@pytest.mark.gpu
@needs_gluon
@pytest.mark.skipif(not _hopper(), reason="needs an sm_90 GPU")
@pytest.mark.parametrize("mnk", [(256, 1024, 512), (300, 4096, 4096), (5158, 1280, 8192)])
@pytest.mark.parametrize("cfg", [config(cluster_m=1), config(cluster_m=2), config(bn=256, stages=3, cluster_m=2, warps=8)],
                         ids=["128x128-c1", "128x128-c2", "128x256-c2-w8"])
@pytest.mark.parametrize("layout", ["nk", "kn"])
def test_matches_torch_matmul(mnk, cfg, layout):
    m, n, k = mnk
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((m, k), generator=gen, device="cuda", dtype=torch.bfloat16)
    b = torch.randn((n, k) if layout == "nk" else (k, n), generator=gen, device="cuda", dtype=torch.bfloat16)
    out = gluon_gemm.gluon_matmul(a, b, cfg, layout=layout)
    ref = torch.matmul(a, b.T if layout == "nk" else b)
    scale = ref.float().abs().max().item()
    torch.testing.assert_close(out.float(), ref.float(), rtol=2e-2, atol=2e-2 * scale)
