"""Lowering a user's kernel to TTIR in the calling process: configs that differ only in options applied after TTIR
(warps, stages) share one lowering, and the shared text is the text each would get alone; their launch keys stay
their own; and one reading of the IR over the grid, with the counts each would get alone."""

import triton
import triton.language as tl

from rooftune.kernels.introspect import lowering


@triton.jit
def scale_rows(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.program_id(0)
    x = tl.load(x_ptr + row * n_cols + cols, mask=cols < n_cols)
    acc = tl.zeros((BLOCK,), tl.float32)
    for _ in range(4):
        acc += x * 2.0
    tl.store(y_ptr + row * n_cols + cols, acc, mask=cols < n_cols)


def _args():
    import torch

    x = torch.empty(64, 1000)
    return {"x_ptr": x, "y_ptr": torch.empty_like(x), "n_cols": 1000}


def test_warps_and_stages_share_one_lowering_of_the_same_text(monkeypatch):
    calls = []
    frontend = lowering._frontend
    monkeypatch.setattr(lowering, "_frontend", lambda *a: calls.append(a) or frontend(*a))
    monkeypatch.setattr(lowering, "_ttir_memo", {})
    configs = [triton.Config({"BLOCK": 1024}, num_warps=w, num_stages=s) for w in (1, 4, 8) for s in (1, 3)]
    lowered = [lowering.lower(scale_rows, c, _args(), 90) for c in configs]
    assert len(calls) == 1 and len({lc.launch_hash for lc in lowered}) == len(configs)
    assert [lc.options["num_warps"] for lc in lowered] == [1, 1, 4, 4, 8, 8]
    for c, shared in zip(configs[1:], lowered[1:]):  # each alone, nothing remembered: the same text
        monkeypatch.setattr(lowering, "_ttir_memo", {})
        assert lowering.lower(scale_rows, c, _args(), 90).ttir == shared.ttir
    other = lowering.lower(scale_rows, triton.Config({"BLOCK": 512}, num_warps=4), _args(), 90)
    assert other.ttir != lowered[0].ttir and len(calls) == 1 + len(configs[1:]) + 1


def test_the_memo_keeps_a_bounded_number_of_texts(monkeypatch):
    monkeypatch.setattr(lowering, "TTIR_MEMO_SIZE", 2)
    monkeypatch.setattr(lowering, "_ttir_memo", {})
    for block in (128, 256, 512):
        lowering.lower(scale_rows, triton.Config({"BLOCK": block}, num_warps=4), _args(), 90)
    assert len(lowering._ttir_memo) == 2


def test_configs_sharing_a_ttir_and_grid_share_one_reading_of_it(monkeypatch):
    from rooftune.kernels.introspect import analyze

    tallies = []
    tally = analyze.tally
    monkeypatch.setattr(analyze, "tally", lambda *a: tallies.append(a) or tally(*a))
    configs = [triton.Config({"BLOCK": 1024}, num_warps=w) for w in (2, 4)]
    together = analyze.analyze(scale_rows, configs, _args(), (64,), pool=None)
    assert len(tallies) == 1
    alone = [analyze.analyze(scale_rows, [c], _args(), (64,), pool=None)[0] for c in configs]
    assert len(tallies) == 3
    for shared, own in zip(together, alone):
        assert shared.counts == own.counts and shared.counts.compiled.num_warps == own.config.num_warps


def test_one_launcher_is_built_per_signature_and_never_raises(monkeypatch):
    from triton.backends.nvidia import driver as nvidia

    built, utils = [], []
    monkeypatch.setattr(nvidia.CudaDriver, "is_active", staticmethod(lambda: True))
    monkeypatch.setattr(nvidia, "CudaUtils", lambda: utils.append(1))
    monkeypatch.setattr(nvidia, "CudaLauncher", lambda source, metadata: built.append((source, metadata)))
    sources: dict = {}
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (512, 1024) for w in (1, 4)]
    lowered = [lowering.lower(scale_rows, c, _args(), 90, sources=sources) for c in configs]
    assert len(sources) == 1  # one signature: the BLOCK constants and the options do not change the launcher's
    assert lowering.warm_launchers(sources) == 1 and len(built) == 1 and utils == [1]
    (source, meta), = built
    assert source.fn.__name__ == lowered[0].name and meta.tensordesc_meta is None and "n_cols" in source.fn.arg_names

    def no_compiler(source, metadata):
        raise RuntimeError("no C compiler")

    monkeypatch.setattr(nvidia, "CudaLauncher", no_compiler)
    assert lowering.warm_launchers(sources) == 0  # the launch builds it then
    monkeypatch.setattr(nvidia.CudaDriver, "is_active", staticmethod(lambda: False))
    monkeypatch.setattr(nvidia, "CudaLauncher", lambda source, metadata: built.append(source))
    assert lowering.warm_launchers(sources) == 0 and len(built) == 1  # no GPU here: nothing built, nothing raised


def test_the_launchers_are_built_beside_the_lowering_with_a_pool(monkeypatch):
    from rooftune.kernels.introspect import analyze

    warmed = []
    monkeypatch.setattr(analyze, "warm_launchers", lambda sources: warmed.append(len(sources)))

    configs = [triton.Config({"BLOCK": b}, num_warps=4) for b in (256, 1024)]
    out = analyze.analyze(scale_rows, configs, _args(), (64,), pool=NoCompiles([]))
    assert warmed == [1] and all(o.stage == "compile" for o in out)
    warmed.clear()
    analyze.analyze(scale_rows, configs, _args(), (64,), pool=None)  # compiled here: no side thread, no launchers
    assert warmed == []


class NoCompiles:
    """A compile pool that compiles nothing (every config a compile error, which the analysis reports) and logs
    when each config reached it."""

    def __init__(self, events: list):
        self.events = events

    def stream(self):
        pool = self

        class Stream:
            started_at = None

            def __init__(self):
                self.jobs = []

            def add(self, job, index):
                pool.events.append(("compile", index))
                self.jobs.append(index)

            def results(self, timeout_s=None):
                return {i: "not compiled here" for i in self.jobs}

        return Stream()


def test_each_config_goes_to_the_pool_as_soon_as_it_is_lowered(monkeypatch):
    """Once Triton's key is known (here: before the list), a config compiles while the next ones lower."""
    from triton.runtime import cache as triton_cache

    from rooftune.kernels.introspect import analyze

    triton_cache.triton_key()
    events: list = []
    real = analyze.lower_ir

    def logged(kernel, config, *args, **kwargs):
        events.append(("lower", config.kwargs["BLOCK"]))
        return real(kernel, config, *args, **kwargs)

    monkeypatch.setattr(analyze, "lower_ir", logged)
    monkeypatch.setattr(analyze, "warm_launchers", lambda sources: 0)
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (2, 4)]
    out = analyze.analyze(scale_rows, configs, _args(), (64,), pool=NoCompiles(events))
    assert events == [("lower", 256), ("compile", 0), ("lower", 256), ("compile", 1), ("lower", 1024),
                      ("compile", 2), ("lower", 1024), ("compile", 3)]
    assert [o.stage for o in out] == ["compile"] * 4


def test_triton_s_key_is_hashed_once_in_a_thread_while_the_list_lowers(monkeypatch):
    import functools
    import threading
    import time

    from triton.runtime import cache as triton_cache

    from rooftune.kernels.introspect import analyze

    real = triton_cache.triton_key()
    hashed_in = []

    @functools.lru_cache
    def slow_key():
        hashed_in.append(threading.current_thread().name)
        time.sleep(0.05)
        return real

    monkeypatch.setattr(triton_cache, "triton_key", slow_key)
    monkeypatch.setattr(lowering, "_key_thread", None)
    configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (256, 1024) for w in (2, 4)]
    args = _args()
    out = analyze._lowered([(scale_rows, c, args, (64,)) for c in configs], 90)
    assert hashed_in == ["rooftune-triton-key"] and lowering._key_thread is None
    assert [o[1].launch_hash for o in out] == [lowering.lower(scale_rows, c, args, 90).launch_hash for c in configs]
    assert all(o[1].triton_key == real for o in out)


def test_the_ttir_does_not_depend_on_the_hash_it_is_made_under(monkeypatch):
    monkeypatch.setattr(lowering, "_ttir_memo", {})
    made = []
    frontend = lowering._frontend
    monkeypatch.setattr(lowering, "_frontend", lambda *a: made.append(frontend(*a[:-1], "0" * 64)) or
                        frontend(*a))
    lowering.lower(scale_rows, triton.Config({"BLOCK": 512}, num_warps=4), _args(), 90)
    (other,) = made  # the same config's TTIR made under another hash
    assert other == next(iter(lowering._ttir_memo.values()))
