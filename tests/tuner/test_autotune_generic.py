"""`rooftune.autotune` on a kernel that is no GEMM (a row softmax), in Triton's interpreter: the configs read from
their sm_90 binaries and IR and ranked by the generic model, only `budget` of them timed, in that order, results
right, the choice kept per key; a kernel the model cannot read keeps the given order, with one warning."""

import json
import warnings

import pytest
import torch
import triton
import triton.language as tl

import rooftune
from rooftune.hwprofiles import load_profile
from rooftune.kernels.introspect import analyze as introspect
from rooftune.tuner.pytorch.kernel_order import generic_order

PROFILE = load_profile("h200")  # the interpreter's profile (tuner/pytorch/ops.py INTERPRETER_PROFILE)
CONFIGS = [triton.Config({"ROWS": r}, num_warps=w, num_stages=s) for r in (1, 2, 4) for w in (1, 4) for s in (1, 2)]
BUDGET = 3
ROWS, COLS = 12, 200
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@triton.jit
def softmax_kernel(x_ptr, y_ptr, n_rows, n_cols, stride, BLOCK: tl.constexpr, ROWS: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    for r in range(tl.program_id(0) * ROWS, tl.minimum(tl.program_id(0) * ROWS + ROWS, n_rows)):
        x = tl.load(x_ptr + r * stride + cols, mask=cols < n_cols, other=float("-inf"))
        e = tl.exp(x - tl.max(x, axis=0))
        tl.store(y_ptr + r * stride + cols, e / tl.sum(e, axis=0), mask=cols < n_cols)


@pytest.fixture(scope="module")
def triton_cache(tmp_path_factory):
    """One Triton cache for the file's tests: the configs compile once, later tests load them."""
    return tmp_path_factory.mktemp("triton")


@pytest.fixture(autouse=True)
def in_process(tmp_path, monkeypatch, triton_cache):
    monkeypatch.setenv("ROOFTUNE_COMPILE_WORKERS", "0")  # compile in the test's process: no workers to start
    monkeypatch.setenv("ROOFTUNE_CACHE", str(tmp_path / "tune.json"))
    monkeypatch.delenv("ROOFTUNE_PROFILE", raising=False)
    monkeypatch.setenv("TRITON_CACHE_DIR", str(triton_cache))  # not the knob: setting it outlives the test
    return tmp_path / "autotune.json"


def _grid(meta):
    return (triton.cdiv(meta["n_rows"], meta["ROWS"]),)


def _inputs():
    torch.manual_seed(0)
    x = torch.randn(ROWS, COLS)
    return x, torch.empty_like(x)


def _run(kernel, x, y):
    kernel[_grid](x, y, ROWS, COLS, x.stride(0), BLOCK=256)
    return y


def _tuned(**kwargs):
    return rooftune.autotune(**{"configs": CONFIGS, "key": ["n_rows", "n_cols"], "budget": BUDGET, **kwargs})(
        softmax_kernel)


def _model_order(x, y):
    args = {"x_ptr": x, "y_ptr": y, "n_rows": ROWS, "n_cols": COLS, "stride": x.stride(0), "BLOCK": 256}
    ordering = generic_order(softmax_kernel, CONFIGS, args, _grid, PROFILE)
    assert ordering.fallback is None and len(ordering.predicted) == len(CONFIGS)
    return [CONFIGS[i] for i in ordering.order]


def test_the_budget_is_timed_in_the_generic_models_order_and_the_result_is_right(benched):
    x, y = _inputs()
    tuned = _tuned()
    torch.testing.assert_close(_run(tuned, x, y), torch.softmax(x, dim=1), atol=1e-5, rtol=1e-5)
    expected = _model_order(x, torch.empty_like(x))[:BUDGET]
    assert benched == expected and expected != CONFIGS[:BUDGET]  # the model reorders the list
    assert tuned.best_config is expected[-1]


def test_the_choice_is_kept_per_key_in_memory_and_in_the_cache_file(benched, in_process):
    x, y = _inputs()
    tuned = _tuned()
    _run(tuned, x, y)
    _run(tuned, x, y)                 # the same key: Triton's in-memory choice
    fresh = _tuned()                  # a new decorator, as in a new process: autotune.json
    torch.testing.assert_close(_run(fresh, x, torch.empty_like(x)), torch.softmax(x, dim=1), atol=1e-5, rtol=1e-5)
    assert len(benched) == BUDGET and str(fresh.best_config) == str(tuned.best_config)
    (entry,) = json.loads(in_process.read_text())["entries"].values()
    assert entry["config"] == str(tuned.best_config) and len(entry["time_ms"]) == BUDGET


def test_a_key_stored_by_another_process_is_found_before_the_list_is_read(benched, in_process, monkeypatch):
    x, y = _inputs()
    tuned = _tuned()
    _run(tuned, x, y)
    from rooftune.tuner.pytorch import autotune as decorator

    def no_order(*args, **kwargs):
        raise AssertionError("a stored key's configs were read again")

    monkeypatch.setattr(decorator, "generic_model_order", no_order)
    fresh = _tuned()                  # a new process's decorator: the stored choice, nothing compiled or read
    torch.testing.assert_close(_run(fresh, x, torch.empty_like(x)), torch.softmax(x, dim=1), atol=1e-5, rtol=1e-5)
    assert str(fresh.best_config) == str(tuned.best_config) and len(benched) == BUDGET
    other = _tuned(budget=BUDGET + 1)  # another budget is another choice: ordered and timed again
    with pytest.raises(AssertionError, match="read again"):
        _run(other, x, torch.empty_like(x))


def test_the_real_timer_runs_only_the_budget():
    x, y = _inputs()
    tuned = _tuned(budget=2)
    torch.testing.assert_close(_run(tuned, x, y), torch.softmax(x, dim=1), atol=1e-5, rtol=1e-5)
    assert set(tuned.tune_seconds) == {"order", "bench"} and all(t > 0 for t in tuned.tune_seconds.values())
    assert len(tuned.configs_timings) == 2


def test_a_kernel_the_model_cannot_read_keeps_the_given_order_with_one_warning(benched, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("no IR today")

    monkeypatch.setattr(introspect, "analyze", broken)
    x, y = _inputs()
    with pytest.warns(RuntimeWarning, match="timed in the given order: the analysis failed: RuntimeError: no IR"):
        out = _run(_tuned(), x, y)
    torch.testing.assert_close(out, torch.softmax(x, dim=1), atol=1e-5, rtol=1e-5)
    assert benched == CONFIGS[:BUDGET]


def test_a_config_that_cannot_be_read_comes_after_the_others(benched, monkeypatch):
    real = introspect.lower_ir

    def lower_ir(kernel, config, args, arch, warp_size=32, **kwargs):
        if config is CONFIGS[-1]:
            raise RuntimeError("this one does not lower")
        return real(kernel, config, args, arch, warp_size, **kwargs)

    monkeypatch.setattr(introspect, "lower_ir", lower_ir)
    x, y = _inputs()
    args = {"x_ptr": x, "y_ptr": y, "n_rows": ROWS, "n_cols": COLS, "stride": x.stride(0), "BLOCK": 256}
    ordering = generic_order(softmax_kernel, CONFIGS, args, _grid, PROFILE)
    assert ordering.fallback is None and ordering.order[-1] == len(CONFIGS) - 1
    assert ordering.analyses[-1].stage == "lowering" and "does not lower" in ordering.analyses[-1].error
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # one config unread: no warning, the others ranked
        _run(_tuned(), x, torch.empty_like(x))
    assert CONFIGS[-1] not in benched


def test_warm_up_starts_what_a_first_tune_waits_for_and_returns(monkeypatch):
    import threading

    from rooftune.kernels.introspect import lowering
    from rooftune.tuner.pytorch import kernel_order

    started, real_pool = [], kernel_order.shared_pool
    monkeypatch.setattr(kernel_order, "shared_pool", lambda: started.append("pool"))
    monkeypatch.setattr(lowering, "prefetch_triton_key", lambda: started.append("key"))
    monkeypatch.setattr(lowering, "warm_launchers", lambda sources: started.append(("cuda utilities", sources)))
    rooftune.warm_up()
    for thread in threading.enumerate():
        if thread.name == "rooftune-cuda-utils":
            thread.join(30)
    assert started == ["pool", "key", ("cuda utilities", {})]
    monkeypatch.setattr(kernel_order, "shared_pool", real_pool)
    monkeypatch.setenv("ROOFTUNE_COMPILE_WORKERS", "many")
    with pytest.raises(ValueError, match=r"\$ROOFTUNE_COMPILE_WORKERS must be a whole number"):
        rooftune.warm_up()


@pytest.mark.slow  # starts a compile worker (seconds)
def test_a_tune_after_warm_up_uses_the_workers_it_started(monkeypatch):
    import time

    from rooftune.tuner.pytorch import kernel_order

    monkeypatch.setenv("ROOFTUNE_COMPILE_WORKERS", "1")
    monkeypatch.setattr(kernel_order, "_pools", {})
    rooftune.warm_up()
    pool = kernel_order._pools[1]
    deadline = time.monotonic() + 120
    while kernel_order.pool_ready_seconds() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert kernel_order.pool_ready_seconds() is not None
    x, y = _inputs()
    args = {"x_ptr": x, "y_ptr": y, "n_rows": ROWS, "n_cols": COLS, "stride": x.stride(0), "BLOCK": 256}
    ordering = generic_order(softmax_kernel, CONFIGS, args, _grid, PROFILE, residual=None)
    assert ordering.fallback is None and len(ordering.predicted) == len(CONFIGS)
    assert kernel_order._pools == {1: pool} and pool.pools_started == 1
    pool.close(kill=True)
