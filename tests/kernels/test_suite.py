"""The suite of kernels (kernels/suite/): the registry is complete and consistent, every kernel matches its reference
in Triton's interpreter (fp16 at its small shape; the first and last config by default, a spread of the list in the
slow run), the launch is @triton.autotune's, and the committed split covers every kernel once."""

import dataclasses
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from rooftune.hwprofiles import load_profile
from rooftune.kernels.suite import SUITE, launch, shape_id, suite_split
from rooftune.kernels.suite.check import check_config, check_configs
from rooftune.kernels.suite.persistent import group_rows
from rooftune.kernels.suite.record import KINDS, config_of
from rooftune.kernels.suite.split import SEED, draw_split, split_record

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
NAMES = sorted(SUITE)
# Triton 3.6's interpreter reads a loop bound from a one-element array (numpy deprecates it; numpy >= 2.4 is excluded).
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def sample(configs, count: int) -> list:
    """`count` configs spread evenly over the list, first and last included."""
    step = (len(configs) - 1) / (count - 1)
    return [configs[round(i * step)] for i in range(count)]


# --- the registry ----------------------------------------------------------------------------------------

def test_the_suite_has_twenty_kernels_of_both_kinds_with_their_lists_and_shapes():
    assert len(SUITE) >= 20 and all(name == k.name for name, k in SUITE.items())
    assert {k.kind for k in SUITE.values()} == set(KINDS)
    for k in SUITE.values():
        assert 10 <= len(k.configs) <= 200, k.name
        texts = [str(config_of(c)) for c in k.configs]
        assert len(set(texts)) == len(texts), f"{k.name}: duplicate configs"
        assert len(k.shapes) >= 6 and len({shape_id(s) for s in k.shapes}) == len(k.shapes), k.name
        assert all(isinstance(v, int) and v > 0 for s in (*k.shapes, k.small_shape) for v in s.values()), k.name
        assert set(k.small_shape) == set(k.shapes[0]), k.name
        assert k.source, k.name


@pytest.mark.parametrize("name", NAMES)
def test_args_and_config_keys_are_the_kernels_parameters(name):
    """make_args gives every parameter but the configs' meta-parameters, each config names constexprs only, the key
    names integer arguments, the outputs and reset tensors are arguments."""
    k = SUITE[name]
    args = k.make_args(k.small_shape, "cpu", torch.float16)
    params = inspect.signature(k.fn.fn).parameters
    constexprs = {n for n, p in params.items() if "constexpr" in str(p.annotation)}
    for c in k.configs:
        assert set(c.kwargs) <= constexprs and not set(c.kwargs) & set(args), (name, c.kwargs)
        assert set(args) | set(c.kwargs) == set(params), (name, set(params) - set(args) - set(c.kwargs))
    assert all(isinstance(args[n], int) for n in k.key), name
    assert set(k.reset) <= set(k.outputs) and all(isinstance(args[n], torch.Tensor) for n in k.outputs), name
    assert all(k.grid(args, c.kwargs) and min(k.grid(args, c.kwargs)) >= 1 for c in k.configs), name


@pytest.mark.parametrize("name", NAMES)
def test_every_shape_is_realistic_and_fits_a_gpu(name):
    """Each shape moves tens of MB at least (a call of ~20 µs or more on an H100); its arguments, made on the meta
    device (shapes and dtypes, no memory), take at most 8 GB and hold at least the hand-counted bytes' inputs; every
    config's grid launches programs."""
    k = SUITE[name]
    for s in k.shapes:
        flops, moved = k.flops(s), k.bytes(s)
        assert flops >= 0 and 30e6 <= moved <= 8e9, (name, s, moved)
        assert flops > 0 or k.kind == "memory", (name, s)
        args = k.make_args(s, "meta")
        footprint = sum(t.numel() * t.element_size() for t in args.values() if isinstance(t, torch.Tensor))
        assert 0.5 * moved <= footprint <= 8e9, (name, s, footprint)
        assert all(min(k.grid(args, c.kwargs)) >= 1 for c in k.configs), (name, s)


def test_a_persistent_launch_keeps_the_devices_programs_and_groups_cover_their_rows():
    assert SUITE["persistent_gemm"].make_args(SUITE["persistent_gemm"].small_shape, "cpu")["NUM_SMS"] == 2
    rows = group_rows(8, 1000)
    assert len(rows) == 8 and sum(rows) == 1000 and min(rows) >= 0 and rows == group_rows(8, 1000)


# --- the reference check in the interpreter -----------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_first_and_last_config_match_the_reference(name):
    k = SUITE[name]
    verdicts = check_configs(k, k.small_shape, [k.configs[0], k.configs[-1]], DEVICE, torch.float16)
    assert all(v is None for v in verdicts.values()), {str(config_of(c)): v for c, v in verdicts.items()}


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_every_config_matches_the_reference(name):
    """Every config of every list (fp16), and a spread of each in fp32 on other inputs."""
    k = SUITE[name]
    for configs, dtype, seed in ((k.configs, torch.float16, 1), (sample(k.configs, 6), torch.float32, 7)):
        verdicts = check_configs(k, k.small_shape, configs, DEVICE, dtype, seed=seed)
        assert all(v is None for v in verdicts.values()), {str(config_of(c)): v for c, v in verdicts.items()}


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_every_config_matches_the_reference_in_bf16_on_gpu(name):
    """On the GPU every config (FP8 values too), at the small shape and at the first real one."""
    k = SUITE[name]
    for shape in (k.small_shape, k.shapes[0]):
        verdicts = check_configs(k, shape, k.configs, DEVICE)
        failed = {str(config_of(c)): v for c, v in verdicts.items() if v is not None}
        assert not failed or all("OutOfResources" in v for v in failed.values()), failed


def test_a_wrong_launch_fails_the_check():
    k = SUITE["rmsnorm_fwd"]
    short = dataclasses.replace(k, grid=lambda args, meta: (1,))  # rows past the first block never written
    args = k.make_args(k.small_shape, DEVICE, torch.float16)
    assert "reference check failed: y" in check_config(short, args, k.reference(args), k.configs[0])
    broken = dataclasses.replace(k, grid=lambda args, meta: (args["rows"],))  # no such argument
    assert check_config(broken, args, k.reference(args), k.configs[0]).startswith("run failed:")


def test_reset_outputs_are_zeroed_before_every_launch():
    """Split-K adds into C: launched twice, the second launch starts from zero as the first did."""
    k = SUITE["splitk_gemm"]
    args = k.make_args(k.small_shape, DEVICE, torch.float32)
    launch(k, args, k.configs[5])
    first = args["c"].clone()
    k.launch(args, k.configs[5])
    assert torch.equal(args["c"], first)


def test_argmax_keeps_the_first_of_equal_maxima_across_chunks():
    k = SUITE["argmax"]
    args = k.make_args({"M": 2, "N": 3000}, DEVICE, torch.float16)
    args["logits"][0, [1500, 2500]] = 100.0  # both in later chunks of 1024
    args["logits"][1, [7, 2999]] = 100.0
    launch(k, args, k.configs[0])
    assert args["index"].tolist() == [1500, 7]


def test_the_launch_is_what_triton_autotune_runs():
    """The same grid function serves @triton.autotune (whose META holds the arguments and the config), with the
    kernel's reset as its reset_to_zero (which zeroes only while it benchmarks: a caller zeroes split-K's C before
    each call, as `launch` does); one config, so the interpreter benchmarks nothing."""
    for name, config in (("rmsnorm_fwd", 3), ("splitk_gemm", 7)):
        k = SUITE[name]
        tuned = triton.autotune([k.configs[config]], key=list(k.key), reset_to_zero=list(k.reset) or None)(
            triton.jit(k.fn.fn))
        args = k.make_args(k.small_shape, DEVICE, torch.float32)
        for name in k.reset:
            args[name].zero_()
        tuned[lambda meta: k.grid(args, meta)](**args)
        got = {n: args[n].clone() for n in k.outputs}
        launch(k, args, k.configs[config])
        assert all(torch.equal(args[n], got[n]) for n in k.outputs)


# Compiles for sm_90 without a GPU (Triton's bundled ptxas) as the sweep reads a config (kernels/introspect/analyze.py:
# lowered, compiled, its IR counted): the call at the kernel's first shape in bf16, its tensors on the meta device (a
# dtype and a shape, no memory).
COMPILE_SCRIPT = r"""
import json, os, sys
os.environ.pop("TRITON_INTERPRET", None)
from rooftune.kernels.introspect.analyze import analyze
from rooftune.kernels.suite import SUITE
results = []
for name, index in json.loads(sys.argv[1]):
    k = SUITE[name]
    args = k.make_args(k.shapes[0], "meta")
    (a,) = analyze(k.fn, [k.configs[index]], args, lambda meta: k.grid(args, meta), arch=90)
    results.append(a.counts.compiled.smem_bytes if hasattr(a, "counts") else f"{a.stage}: {a.error}")
print(json.dumps(results))
"""


@pytest.mark.slow
def test_first_and_last_configs_compile_for_sm90_and_fit_the_h100(tmp_path):
    """Every kernel's first and last config compiles for Hopper at its first shape and its IR is counted (FP8
    conversions, atomics, while loops included), and the first, each list's smallest tile, fits an H100's block (the
    profile's figure): a config past it is an error row of the ground truth (flash_attn_fwd's last, 128 x 128 in 4
    stages at head_dim 128)."""
    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    jobs = [(n, i) for n in NAMES for i in (0, len(SUITE[n].configs) - 1)]
    env = {**{k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}, "TRITON_CACHE_DIR": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", COMPILE_SCRIPT, json.dumps(jobs)], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    limit = load_profile("h100_sxm").smem_per_block_bytes
    shared = dict(zip(jobs, json.loads(done.stdout.splitlines()[-1])))
    assert not {job: why for job, why in shared.items() if isinstance(why, str)}
    assert not {job: b for job, b in shared.items() if b > limit and job[1] == 0}
    last_attention = ("flash_attn_fwd", len(SUITE["flash_attn_fwd"].configs) - 1)
    assert {job for job, b in shared.items() if b > limit} <= {last_attention}


# --- the split ------------------------------------------------------------------------------------------

def test_the_split_covers_every_kernel_once_and_holds_out_both_kinds():
    split = suite_split()
    assert sorted(split) == NAMES and set(split.values()) == {"train", "heldout"}
    held = [n for n in NAMES if split[n] == "heldout"]
    assert {SUITE[n].kind for n in held} == set(KINDS) == {SUITE[n].kind for n in NAMES if split[n] == "train"}
    assert abs(len(held) / len(NAMES) - 1 / 3) < 0.1


def test_the_committed_split_is_the_seeded_draw():
    kinds = {k.name: k.kind for k in SUITE.values()}
    assert split_record(kinds)["kernels"] == suite_split() == draw_split(kinds, SEED)
    assert draw_split(kinds, SEED + 1) != draw_split(kinds, SEED)
