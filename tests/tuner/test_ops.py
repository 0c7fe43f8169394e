"""Which config rooftune's PyTorch ops run: a `rooftune tune` cache entry, else the zero-trial pick, a
tune on first use with tune=True, the per-process memo, the GPU's profile; and `import rooftune`
staying light. The ops run on the CPU through Triton's interpreter (fp16)."""

import os
import subprocess
import sys
import warnings

import pytest
import torch

import rooftune
from rooftune.candidates import GemmShape, Trial, kernel_of, legal_configs
from rooftune.hwprofiles import ProfileError, load_profile
from rooftune.hwprofiles.shipped import SHIPPED_BY_GPU_NAME, shipped_profile_name
from rooftune.kernels import gemm as kgemm
from rooftune.kernels.harness.check import relative_error
from rooftune.outputs import OutputError
from rooftune.environment import SettingError
from rooftune.tuner.cache import CacheEntryWarning, TuneCache, TuneCacheError, tune_key
from rooftune.tuner.residual_choice import shipped_residual
from rooftune.tuner.tune import TuneResult
from rooftune.tuner.pytorch import ops
from rooftune.tuner.search.strategies import zero_trial_pick

PROFILE = load_profile("h200")  # the interpreter's profile (tuner/pytorch/ops.py INTERPRETER_PROFILE)
SHAPE = GemmShape(33, 65, 47, layout="kn", dtype="fp16")
TRITON = "3.6.0"  # the release the shipped routes and residuals were fitted under
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    path = tmp_path / "tune.json"
    monkeypatch.setenv("ROOFTUNE_CACHE", str(path))
    for name in ("ROOFTUNE_PROFILE", "ROOFTUNE_TUNE", "ROOFTUNE_FALLBACK", "ROOFTUNE_KERNEL_ONLY"):
        monkeypatch.delenv(name, raising=False)
    ops.clear_memo()
    yield path
    ops.clear_memo()


@pytest.fixture
def launched(monkeypatch):
    """The config of every GEMM the ops launch, in order (the kernel still runs)."""
    configs, real = [], kgemm.gemm

    def recording(a, b, config, layout="kn", out=None):
        configs.append(config)
        return real(a, b, config, layout=layout, out=out)

    monkeypatch.setattr(kgemm, "gemm", recording)
    return configs


def inputs():
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(SHAPE.m, SHAPE.k, generator=gen, dtype=torch.float16),
            torch.randn(SHAPE.k, SHAPE.n, generator=gen, dtype=torch.float16))


def key(shape=SHAPE):
    return tune_key(shape, PROFILE, ops.TUNE_BUDGET, shipped_residual(kernel_of(shape), PROFILE))


def legal():
    return legal_configs(kernel_of(SHAPE).space, SHAPE, PROFILE).configs


def zero_trial():
    return zero_trial_pick(SHAPE, legal(), PROFILE, shipped_residual(kernel_of(SHAPE), PROFILE))


def test_without_a_cache_entry_the_op_runs_the_routes_choice_the_library_where_no_route_applies(
        launched, monkeypatch):
    monkeypatch.setattr(ops, "installed_triton", lambda: TRITON)  # the release the shipped route was fitted under
    a, b = inputs()
    out = rooftune.matmul(a, b)  # the interpreter's profile (H200) ships a route: it keeps this small shape on the kernel
    assert launched == [zero_trial_pick(SHAPE, legal(), PROFILE, shipped_residual(kernel_of(SHAPE), PROFILE, TRITON))]
    assert relative_error(out.float(), a.float() @ b.float()) < 1e-2
    launched.clear()
    monkeypatch.setenv("ROOFTUNE_PROFILE", "a100_sxm4_80gb")  # no route ships for the A100: nothing says the pick wins there
    out = rooftune.matmul(a, b)
    assert launched == [] and torch.equal(out, torch.matmul(a, b))
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "1")
    out = rooftune.matmul(a, b)
    a100 = load_profile("a100_sxm4_80gb")
    assert launched == [zero_trial_pick(SHAPE, legal_configs(kernel_of(SHAPE).space, SHAPE, a100).configs, a100,
                                        shipped_residual(kernel_of(SHAPE), a100, TRITON))]
    assert relative_error(out.float(), a.float() @ b.float()) < 1e-2


def test_a_cached_tune_is_used_and_looked_up_once(cache, launched, monkeypatch):
    pick = zero_trial()
    winner = next(c for c in reversed(legal()) if c["BLOCK_M"] != pick["BLOCK_M"])
    result = TuneResult(SHAPE, winner, 3.0, (Trial(winner, 3.0),), "rooftune", PROFILE.name,
                        kernel_of(SHAPE).space.version, kernel="gemm")
    TuneCache(cache).put(key(), result)  # as `rooftune tune gemm --cache` stores it
    reads = []
    real_read = TuneCache.get
    monkeypatch.setattr(TuneCache, "get", lambda self, key: reads.append(key) or real_read(self, key))
    a, b = inputs()
    for _ in range(2):
        out = rooftune.matmul(a, b)
    assert launched == [winner, winner] and len(reads) == 1  # the memo answers the second call
    assert relative_error(out.float(), a.float() @ b.float()) < 1e-2


def test_tune_on_first_use_stores_what_the_command_finds(cache, launched, monkeypatch, synthetic, counting):
    # The live measurer needs a GPU: the tune runs the same `tune_shape` on a recorded one.
    measurer = counting(synthetic(SHAPE, PROFILE))
    real_tune = ops.tune_shape
    monkeypatch.setattr(ops, "tune_shape", lambda *args, **kw: real_tune(*args, measurer=measurer, **kw))
    a, b = inputs()
    rooftune.matmul(a, b, tune=True)
    stored = TuneCache(cache).get(key())
    assert stored is not None and launched == [stored.winner]
    assert sum(len(batch) for batch in measurer.batches[:-1]) <= ops.TUNE_BUDGET
    ops.clear_memo()
    measurer.batches.clear()
    monkeypatch.setenv("ROOFTUNE_TUNE", "1")
    rooftune.matmul(a, b)  # found in the cache: nothing measured
    assert launched == [stored.winner] * 2 and measurer.batches == []


def test_a_tune_the_cache_cannot_keep_still_runs_and_warns(cache, launched, monkeypatch, synthetic, counting):
    """A full disk under the cache: the tune's winner runs (the op does not fail), with a warning naming why
    it was not kept."""
    measurer = counting(synthetic(SHAPE, PROFILE))
    real_tune = ops.tune_shape
    monkeypatch.setattr(ops, "tune_shape", lambda *args, **kw: real_tune(*args, measurer=measurer, **kw))

    def full(self, key, result):
        raise OutputError(f"{self.path}: could not be written (No space left on device); nothing written")

    monkeypatch.setattr(TuneCache, "put", full)
    a, b = inputs()
    with pytest.warns(RuntimeWarning, match="was not kept: .*tune.json: could not be written"):
        out = rooftune.matmul(a, b, tune=True)
    assert measurer.batches and len(launched) == 1  # tuned, then the tune's winner ran
    assert relative_error(out.float(), a.float() @ b.float()) < 1e-2 and not cache.exists()


def _store_tune(cache, winner_us, baseline_us):
    winner = legal()[0]
    result = TuneResult(SHAPE, winner, winner_us, (Trial(winner, winner_us),), "rooftune", PROFILE.name,
                        kernel_of(SHAPE).space.version, baseline_us=baseline_us, kernel="gemm")
    TuneCache(cache).put(key(), result)
    return winner


def test_a_shape_the_library_ran_faster_runs_the_librarys_op(cache, launched, monkeypatch):
    winner = _store_tune(cache, winner_us=3.0, baseline_us=2.5)  # the tune timed cuBLAS faster, side by side
    a, b = inputs()
    out = rooftune.matmul(a, b)
    assert launched == [] and torch.equal(out, torch.matmul(a, b))
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "1")  # to benchmark rooftune's kernel itself (a new memo key)
    out = rooftune.matmul(a, b)
    assert launched == [winner] and relative_error(out.float(), a.float() @ b.float()) < 1e-2


def test_a_shape_the_kernel_ran_faster_or_untimed_runs_the_kernel(cache, launched):
    for baseline_us in (3.5, 3.0, None):  # slower, a tie, no baseline timed (a recorded tune)
        winner = _store_tune(cache, winner_us=3.0, baseline_us=baseline_us)
        ops.clear_memo()
        rooftune.matmul(*inputs())
        assert launched[-1] == winner
    assert len(launched) == 3


def test_the_library_route_of_attention_runs_sdpa_in_the_kernels_layout(monkeypatch):
    from rooftune.candidates.families import LIBRARY_ROUTE
    from rooftune.kernels import attention as kattn
    from rooftune.kernels import ops as kops

    monkeypatch.setattr(ops, "choose_config", lambda *args: LIBRARY_ROUTE)
    monkeypatch.setattr(kattn, "attention", lambda *args, **kw: pytest.fail("the kernel ran"))
    gen = torch.Generator().manual_seed(1)
    q = torch.randn(2, 4, 19, 32, generator=gen, dtype=torch.float16)
    k, v = (torch.randn(2, 2, 19, 32, generator=gen, dtype=torch.float16) for _ in range(2))
    out = rooftune.attention(q, k, v, causal=True)
    assert out.shape == q.shape and out.stride() == q.stride()
    assert torch.equal(out, kops._sdpa(q, k, v, True, None).contiguous())


def test_a_bad_cache_file_is_reported(cache):
    cache.write_text("not json")
    with pytest.raises(TuneCacheError, match="not a readable rooftune tune cache"):
        rooftune.matmul(*inputs())


def test_gpu_names_map_to_shipped_profiles():
    assert {name: load_profile(shipped_profile_name(name)).name for name in SHIPPED_BY_GPU_NAME} == {
        "NVIDIA H200": "NVIDIA H200", "NVIDIA H100 80GB HBM3": "NVIDIA H100 80GB HBM3 (SXM)",
        "NVIDIA A100-SXM4-80GB": "NVIDIA A100-SXM4-80GB", "NVIDIA B200": "NVIDIA B200"}
    with pytest.raises(ProfileError, match="rooftune hwprobe --out.*ROOFTUNE_PROFILE"):
        shipped_profile_name("NVIDIA GeForce RTX 4090")


def test_a_cache_entry_outside_the_space_is_never_run(cache, launched, monkeypatch):
    """A winner of BLOCK_M=17 was served, and crashed inside Triton: now ignored with one warning, the untuned
    choice runs."""
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "1")
    winner = next(c for c in legal() if c["BLOCK_M"] == 16)
    TuneCache(cache).put(key(), TuneResult(SHAPE, winner, 3.0, (Trial(winner, 3.0),), "rooftune", PROFILE.name,
                                           kernel_of(SHAPE).space.version, kernel="gemm"))
    cache.write_text(cache.read_text().replace("BLOCK_M=16,", "BLOCK_M=17,"))
    a, b = inputs()
    with pytest.warns(CacheEntryWarning, match=r"tune.json: tune cache entry .* ignored.*BLOCK_M=17"):
        out = rooftune.matmul(a, b)
    assert launched == [zero_trial()] and relative_error(out.float(), a.float() @ b.float()) < 1e-2


@pytest.mark.parametrize("value, words", [
    ("~nouser_of_rooftune/x.json", r"\$ROOFTUNE_CACHE='~nouser_of_rooftune/x.json': user 'nouser_of_rooftune' has no"),
])
def test_a_cache_path_naming_no_home_is_refused_naming_the_variable(monkeypatch, value, words):
    """RuntimeError: Could not determine home directory, from the CLI and the ops alike."""
    monkeypatch.setenv("ROOFTUNE_CACHE", value)
    with pytest.raises(SettingError, match=words):
        rooftune.matmul(*inputs())


def test_the_device_profile(monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA B200")
    assert ops.device_profile(torch.device("cuda", 0)).name == "NVIDIA B200"
    assert ops.device_profile(torch.device("cpu")).name == "NVIDIA H200"
    monkeypatch.setenv("ROOFTUNE_PROFILE", "a100_sxm4_80gb")
    assert ops.device_profile(torch.device("cuda", 0)).name == "NVIDIA A100-SXM4-80GB"


def test_cache_path(monkeypatch, tmp_path):
    assert ops.cache_path() == tmp_path / "tune.json"
    monkeypatch.delenv("ROOFTUNE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ops.cache_path() == tmp_path / "xdg" / "rooftune" / "tune.json"


def test_import_rooftune_stays_light():
    loaded = subprocess.check_output([sys.executable, "-c", "import sys, rooftune; "
                                      "print(*sorted({'torch', 'triton'} & set(sys.modules)))"], text=True)
    assert loaded.strip() == ""  # the ops load torch on first access
    assert set(rooftune.TORCH_OPS) <= set(dir(rooftune)) and callable(rooftune.attention)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        rooftune.nothing


def test_a_short_attention_sequence_gets_the_smallest_blocks():
    from rooftune.candidates import AttentionShape

    short = AttentionShape(2, 2, 19, 32, dtype="fp16")
    configs = legal_configs(kernel_of(short).space, short, PROFILE).configs
    assert configs and {(c["BLOCK_M"], c["BLOCK_N"]) for c in configs} == {(64, 32)}
    assert ops.choose_config(short, PROFILE, ops.cache_path(), tune=False, kernel_only=True) in configs


def test_a_tune_without_a_gpu_runs_the_untuned_choice_with_one_warning(cache, launched, monkeypatch):
    from rooftune.hwprofiles.hwprobe import NoGpuError

    def no_gpu(*args, **kw):
        raise NoGpuError("no CUDA GPU is visible")

    monkeypatch.setattr(ops, "tune_shape", no_gpu)
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "1")  # the kernel's pick, whatever the route says
    a, b = inputs()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own filter: each message once per place
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        rooftune.matmul(a, b, tune=True)
        rooftune.matmul(a[:, :40], b[:40], tune=True)  # a second shape: no second warning
    assert [str(w.message) for w in caught] == ["rooftune: no GPU to tune on (a tune times configs on a CUDA GPU); "
                                                 "the op runs its untuned choice"]
    assert launched[0] == zero_trial() and len(launched) == 2 and not cache.exists()


# What a user writes: a model script without an `if __name__ == "__main__":` guard, tuning on first use.
UNGUARDED = """
import torch, rooftune
x = torch.randn(16, 32, dtype=torch.bfloat16)
w = torch.randn(24, 32, dtype=torch.bfloat16)
y = rooftune.linear(x, w)
print(float((y.float() - torch.nn.functional.linear(x.float(), w.float())).abs().max()))
"""


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the program tunes for real")
@pytest.mark.parametrize("form", ["script", pytest.param("stdin", marks=pytest.mark.slow)])  # a process tuning: 3-9 s
def test_an_unguarded_program_tuning_on_first_use_finishes(tmp_path, form):
    script = tmp_path / "model.py"
    script.write_text(UNGUARDED)
    env = {**os.environ, "ROOFTUNE_TUNE": "1", "TRITON_INTERPRET": "1", "ROOFTUNE_CACHE": str(tmp_path / "tune.json")}
    done = subprocess.run([sys.executable, str(script) if form == "script" else "-"], capture_output=True, text=True,
                          input=UNGUARDED if form == "stdin" else None, env=env, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert float(done.stdout) < 0.1 and done.stderr.count("no GPU to tune on") == 1
