"""`rooftune.autotune` on examples/fused_gemm.py (a user's GEMM + bias + activation) in Triton's
interpreter: results against torch, only `budget` configs benchmarked and in the model's order, the
choice kept in memory and in autotune.json beside the tune cache. fp16, 64x96x80, small tiles."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import rooftune
from rooftune.candidates import Config, GemmShape, kernel_spec
from rooftune.hwprofiles import load_profile
from rooftune.kernels.autotune import OrderedAutotuner
from rooftune.tuner.pytorch.autotune import autotune_cache_path, gemm_shape, model_order, rooftune_config
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.search.strategies import corrected_prior

PROFILE = load_profile("h200")  # the interpreter's profile (tuner/pytorch/ops.py INTERPRETER_PROFILE)
M, N, K = 64, 96, 80
SHAPE = GemmShape(M, N, K, layout="nk", dtype="fp16")  # B = an nn.Linear weight's transpose
SMALL = [triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": g}, num_warps=w,
                       num_stages=s)
         for bm, bn, bk, g, w, s in [(16, 16, 16, 1, 1, 2), (32, 32, 32, 1, 4, 2), (64, 32, 32, 8, 4, 3),
                                     (16, 64, 16, 1, 2, 2), (64, 64, 16, 8, 4, 2)]]
BUDGET = 3
REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def _load_example():
    spec = importlib.util.spec_from_file_location("fused_gemm_example", REPO / "examples" / "fused_gemm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = _load_example()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFTUNE_CACHE", str(tmp_path / "tune.json"))
    monkeypatch.delenv("ROOFTUNE_PROFILE", raising=False)
    return tmp_path / "autotune.json"


@pytest.fixture
def inputs():
    torch.manual_seed(0)
    x = torch.randn(M, K, dtype=torch.float16)
    layer = torch.nn.Linear(K, N, dtype=torch.float16)
    return x, layer.weight.detach(), layer.bias.detach()


def _tuned(**kwargs):
    """The example's kernel under a fresh decorator (a fresh in-memory cache)."""
    settings = dict(configs=SMALL, key=["M", "N", "K"], layout=("stride_bk", "stride_bn"), budget=BUDGET)
    return rooftune.autotune(**{**settings, **kwargs})(example.fused_gemm_kernel.fn)


def _launch(kernel, x, weight, bias, activation="relu"):
    out = torch.empty((M, N), dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)
    kernel[grid](x, weight, bias, out, M, N, K, x.stride(0), x.stride(1), weight.stride(1), weight.stride(0),
                 out.stride(0), out.stride(1), ACTIVATION=activation)
    return out


def test_the_example_matches_torch_after_timing_its_budget(inputs):
    x, weight, bias = inputs
    for activation in ("relu", "gelu"):
        y = example.fused_linear(x, weight, bias, activation)
        torch.testing.assert_close(y, example.reference(x, weight, bias, activation), atol=2e-2, rtol=2e-2)
    assert len(example.fused_gemm_kernel.configs_timings) == 4  # the example's budget, of its 8 configs


def test_only_the_budget_is_benchmarked_in_the_models_order(inputs, benched):
    x, weight, bias = inputs
    tuned = _tuned(restore_value=["c_ptr"])
    y = _launch(tuned, x, weight, bias)
    torch.testing.assert_close(y, example.reference(x, weight, bias), atol=2e-2, rtol=2e-2)

    views = [rooftune_config(c) for c in SMALL]
    fitting, prior = corrected_prior(SHAPE, views, PROFILE, shipped_residual(kernel_spec("gemm"), PROFILE))
    expected = [SMALL[views.index(fitting[i])] for i in np.argsort(prior, kind="stable")][:BUDGET]
    assert benched == expected
    assert expected != SMALL[:BUDGET]  # the model reorders the user's list: the test tells them apart
    assert tuned.best_config is expected[-1]  # the fastest of the fake timings
    assert tuned.restore_value == ["c_ptr"]  # Triton's own semantics, passed through


def test_the_choice_is_kept_in_memory_and_in_the_cache_file(inputs, benched, cache):
    x, weight, bias = inputs
    tuned = _tuned()
    _launch(tuned, x, weight, bias)
    first = tuned.best_config
    assert len(benched) == BUDGET and cache == autotune_cache_path()

    _launch(tuned, x, weight, bias)  # same key: Triton's in-memory choice
    tuned.cache.clear()              # a cleared memo: read back from autotune.json
    _launch(tuned, x, weight, bias)
    fresh = _tuned()                 # a new decorator, as in a new process
    _launch(fresh, x, weight, bias)
    assert len(benched) == BUDGET
    assert tuned.best_config is first and str(fresh.best_config) == str(first)
    (entry,) = json.loads(cache.read_text())["entries"].values()
    assert entry["config"] == str(first) and len(entry["time_ms"]) == BUDGET

    x2 = torch.randn(M // 2, K, dtype=torch.float16)  # a new key (M) is tuned again
    out = torch.empty((M // 2, N), dtype=x.dtype)
    fresh[lambda meta: (triton.cdiv(M // 2, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)](
        x2, weight, bias, out, M // 2, N, K, x2.stride(0), x2.stride(1), weight.stride(1), weight.stride(0),
        out.stride(0), out.stride(1), ACTIVATION="relu")
    assert len(benched) > BUDGET


def test_configs_read_as_rooftune_configs():
    tutorial = triton.Config({"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8,
                              "EVEN_K": True}, num_warps=4, num_stages=3)
    assert rooftune_config(tutorial) == Config.make(4, 3, BLOCK_M=128, BLOCK_N=64, BLOCK_K=32, GROUP_M=8, SPLIT_K=1,
                                                    EVEN_K=1)
    short = triton.Config({"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64, "SPLIT_K": 2}, num_warps=8, num_stages=4)
    assert rooftune_config(short) == Config.make(8, 4, BLOCK_M=64, BLOCK_N=64, BLOCK_K=64, GROUP_M=1, SPLIT_K=2)
    assert rooftune_config(triton.Config({"BLOCK_SIZE": 1024})) is None


def test_configs_the_model_cannot_place_come_last_in_the_users_order():
    shape = GemmShape(4096, 4096, 4096, dtype="bf16")
    untiled = triton.Config({"BLOCK_SIZE": 1024})
    too_big = triton.Config({"BLOCK_M": 256, "BLOCK_N": 256, "BLOCK_K": 128}, num_warps=8, num_stages=6)  # smem
    small, large = (triton.Config({"BLOCK_M": b, "BLOCK_N": b, "BLOCK_K": 32}, num_warps=4, num_stages=3)
                    for b in (16, 128))
    assert model_order([untiled, small, too_big, large], shape, PROFILE) == [large, small, untiled, too_big]


def test_the_layout_is_read_from_bs_strides(inputs):
    x, weight, _ = inputs
    args = {"a": x, "M": M, "N": N, "K": K, "sk": weight.stride(1), "sn": weight.stride(0)}
    assert gemm_shape(args, ("M", "N", "K"), ("sk", "sn")) == SHAPE
    b = weight.t().contiguous()  # [K, N]
    args.update(sk=b.stride(0), sn=b.stride(1))
    assert gemm_shape(args, ("M", "N", "K"), ("sk", "sn")).layout == "kn"
    assert gemm_shape(args, ("M", "N", "K"), "nk").layout == "nk"
    with pytest.raises(ValueError, match="fp16, bf16 and fp32"):
        gemm_shape({**args, "a": x.to(torch.float64)}, ("M", "N", "K"), "kn")


def test_an_unreadable_cache_file_is_named(inputs, benched, cache):
    from rooftune.tuner.cache import TuneCacheError

    cache.write_text("{not json")
    with pytest.raises(TuneCacheError, match="not a readable rooftune autotune cache"):
        _launch(_tuned(), *inputs)
    assert benched == []


@pytest.mark.gpu
def test_the_example_on_the_gpu_times_only_its_budget():
    # bf16 on the GPU, the example's own 8 configs and budget 4: Triton's do_bench runs 4 of them.
    torch.manual_seed(0)
    x = torch.randn(1000, 1536, device="cuda", dtype=torch.bfloat16)
    layer = torch.nn.Linear(1536, 2304, device="cuda", dtype=torch.bfloat16)
    example.fused_gemm_kernel.cache.clear()
    for activation in ("relu", "gelu"):
        y = example.fused_linear(x, layer.weight.detach(), layer.bias.detach(), activation)
        want = example.reference(x.float(), layer.weight.detach().float(), layer.bias.detach().float(), activation)
        torch.testing.assert_close(y.float(), want, atol=5e-2, rtol=2e-2)
    timings = example.fused_gemm_kernel.configs_timings
    assert len(timings) == 4 and all(min(t) > 0 for t in timings.values())


@triton.jit
def _plain_kernel(a_ptr, M, N, K, stride_bk, stride_bn, BLOCK_SIZE_M: tl.constexpr):
    pass


def _not_a_kernel(a_ptr, M, N, K):
    pass


@pytest.mark.parametrize("kwargs, kernel, error, words", [
    ({"gemm": ("M", "N", "Q")}, _plain_kernel, ValueError, "gemm names 'Q', not an argument of _plain_kernel(a_ptr, M"),
    ({"gemm": ("M", "N")}, _plain_kernel, ValueError, "three names such as ('M', 'N', 'K'); got ('M', 'N')"),
    ({"configs": []}, _plain_kernel, ValueError, "configs must be a non-empty list of triton.Config"),
    ({"configs": [{"BLOCK_SIZE_M": 16}]}, _plain_kernel, TypeError, "configs must be triton.Config objects"),
    ({}, _not_a_kernel, TypeError, "decorates a Triton kernel: put @triton.jit under it (got _not_a_kernel)"),
    ({"budget": "20"}, _plain_kernel, TypeError, "budget must be an int"),
    ({"budget": 0}, _plain_kernel, ValueError, "budget must be at least 1, got 0"),
    ({"budget": -3}, _plain_kernel, ValueError, "budget must be at least 1, got -3"),
    ({"key": ["M", "KK"]}, _plain_kernel, ValueError, "key names 'KK', not an argument"),
    ({"key": "M"}, _plain_kernel, TypeError, "key must be a list of the kernel's argument names"),
    ({"layout": "mk"}, _plain_kernel, ValueError, "layout is 'kn', 'nk' or the names of B's two strides"),
    ({"layout": ("stride_bk", "s_bn")}, _plain_kernel, ValueError, "layout names 's_bn', not an argument"),
])
def test_arguments_that_cannot_work_are_refused_at_decoration(kwargs, kernel, error, words):
    """They were accepted and failed at the first call (KeyError, 'not enough values to unpack',
    AttributeError, TypeError)."""
    settings = {"configs": SMALL, "key": ["M", "N", "K"], **kwargs}
    with pytest.raises(error) as info:
        rooftune.autotune(**settings)(kernel)
    assert words in str(info.value)


def test_good_arguments_still_decorate():
    assert isinstance(rooftune.autotune(SMALL, ["M"], budget=np.int64(2), layout=("stride_bk", "stride_bn"))(
        _plain_kernel), OrderedAutotuner)


def test_a_choice_the_cache_cannot_keep_still_runs_and_warns(inputs, benched, monkeypatch):
    from rooftune.outputs import OutputError
    from rooftune.tuner import cache

    def full(path, data):
        raise OutputError(f"{path}: could not be written (No space left on device); nothing written")

    monkeypatch.setattr(cache, "write_atomic", full)
    x, weight, bias = inputs
    with pytest.warns(RuntimeWarning, match="the choice was not kept: .*autotune.json: could not be written"):
        y = _launch(_tuned(restore_value=["c_ptr"]), x, weight, bias)
    torch.testing.assert_close(y, example.reference(x, weight, bias), atol=2e-2, rtol=2e-2)
