"""Parallel pre-compilation: seconds or error strings per config, in process and in a spawn pool; one
pool reused across batches, a hung worker timed out, a dying one blamed."""

import time
from pathlib import Path

import pytest

from rooftune.candidates import Config
from rooftune.kernels.harness.compile_pool import DIED, TIMEOUT, CompilePool, CompileStalled


def fake_warmup(shape, config, device):
    """Module level, so a spawned worker can import it by reference."""
    if config["BLOCK_M"] == 256:
        raise RuntimeError("out of resources: shared memory")
    time.sleep(0.01)
    return 0.5 if config["BLOCK_M"] == 64 else None


CONFIGS = [Config.make(4, 3, BLOCK_M=bm) for bm in (32, 64, 256)]


def _check(results):
    assert set(results) == set(CONFIGS)
    assert results[CONFIGS[1]] == 0.5
    assert isinstance(results[CONFIGS[0]], float) and results[CONFIGS[0]] >= 0.01  # timed around the call
    assert "out of resources" in results[CONFIGS[2]] and "RuntimeError" in results[CONFIGS[2]]


def test_compile_in_process():
    done = []
    with CompilePool(fake_warmup, workers=0) as pool:
        _check(pool.compile([("shape", c) for c in CONFIGS], on_done=done.append))
    assert sum(done) == 3


def test_compile_in_a_spawn_pool():
    with CompilePool(fake_warmup, workers=2) as pool:
        _check(pool.compile([("shape", c) for c in CONFIGS]))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stream_compiles_each_job_from_when_it_is_added(workers):
    with CompilePool(fake_warmup, workers=workers) as pool:
        stream = pool.stream()
        for c in CONFIGS:
            stream.add("shape", c)
            assert stream.started_at is not None
        done = []
        _check(stream.results(on_done=done.append))
        assert sum(done) == 3 and [c for _, c in stream.jobs] == CONFIGS


def pid_warmup(shape, config, device):
    """Reports the worker's process id as its 'seconds'; hangs on BLOCK_M=128, dies on BLOCK_M=16, is killed
    (SIGKILL, as the kernel's OOM killer does) on BLOCK_M=8."""
    import os
    import signal

    if config["BLOCK_M"] == 128:
        time.sleep(120)
    if config["BLOCK_M"] == 16:
        os._exit(1)
    if config["BLOCK_M"] == 8:
        os.kill(os.getpid(), signal.SIGKILL)
    return float(os.getpid())


def test_one_pool_serves_every_batch():
    with CompilePool(pid_warmup, workers=2, device="cpu") as pool:
        assert pool.ready_seconds() is None  # not started
        pool.start()
        deadline = time.monotonic() + 120
        while pool.ready_seconds() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0 < pool.ready_seconds() < 120 and len(pool.loaded_at) == 2
        first = pool.compile([("shape", c) for c in CONFIGS[:2]])
        second = pool.compile([("shape", Config.make(4, 3, BLOCK_M=bm)) for bm in (32, 64, 512)])
        assert pool.pools_started == 1
    assert set(second.values()) <= set(first.values())  # the same two worker processes


@pytest.mark.slow  # waits out its timeouts (5 s, 2 s)
def test_a_hung_worker_times_out_and_the_next_batch_gets_a_fresh_pool():
    hung, ok = Config.make(4, 3, BLOCK_M=128), Config.make(4, 3, BLOCK_M=32)
    with CompilePool(pid_warmup, workers=2, device="cpu") as pool:
        started = time.monotonic()
        results = pool.compile([("shape", hung), ("shape", ok)], timeout_s=5.0)
        assert time.monotonic() - started < 30
        assert results[hung] == TIMEOUT and isinstance(results[ok], float)
        after = pool.compile([("shape", Config.make(4, 3, BLOCK_M=64))])
        assert isinstance(after[Config.make(4, 3, BLOCK_M=64)], float) and pool.pools_started == 2
        with pytest.raises(CompileStalled, match="look hung"):  # nothing finished: the pool is stuck
            pool.compile([("shape", hung), ("shape", Config.make(4, 4, BLOCK_M=128))], timeout_s=2.0)


def test_a_dying_worker_is_the_culprit_and_the_pool_goes_on():
    dies = Config.make(4, 3, BLOCK_M=16)
    with CompilePool(pid_warmup, workers=2, device="cpu") as pool:
        results = pool.compile([("shape", c) for c in (dies, *CONFIGS[:2])])
        assert results[dies] == DIED and all(isinstance(results[c], float) for c in CONFIGS[:2])
        assert isinstance(pool.compile([("shape", CONFIGS[0])])[CONFIGS[0]], float)


def test_a_stream_whose_pool_broke_between_adds_runs_the_refused_jobs_again():
    from concurrent.futures import wait

    dies = Config.make(4, 3, BLOCK_M=16)
    with CompilePool(pid_warmup, workers=2, device="cpu") as pool:
        stream = pool.stream()
        stream.add("shape", dies)
        wait(list(stream._futures))  # its worker is gone: the pool refuses the next jobs
        for c in CONFIGS[:2]:
            stream.add("shape", c)
        assert [c for _, c in stream._crashed] == CONFIGS[:2]
        results = stream.results(timeout_s=120)
        assert results[dies] == DIED and all(isinstance(results[c], float) for c in CONFIGS[:2])


# A user's program without an `if __name__ == "__main__":` guard: spawned workers that re-ran it would start a
# pool of their own while bootstrapping and die. Its third config's worker is killed mid-compile.
UNGUARDED = r"""
import json, sys
sys.path.insert(0, {testdir!r})
from test_compile import pid_warmup
from rooftune.candidates import Config
from rooftune.kernels.harness.compile_pool import CompilePool
print("the program ran", flush=True)
configs = [Config.make(4, 3, BLOCK_M=bm) for bm in (32, 64, 8)]
with CompilePool(pid_warmup, workers=2, device="cpu") as pool:
    results = pool.compile([("shape", c) for c in configs], timeout_s=60)
print(json.dumps([results[c] for c in configs]))
"""


@pytest.mark.parametrize("form", ["script", "-c", "stdin"])
def test_workers_never_rerun_an_unguarded_program(tmp_path, form):
    import json
    import subprocess
    import sys

    program = UNGUARDED.format(testdir=str(Path(__file__).parent))
    script = tmp_path / "model.py"
    script.write_text(program)
    args = {"script": [str(script)], "-c": ["-c", program], "stdin": ["-"]}[form]
    done = subprocess.run([sys.executable, *args], input=program if form == "stdin" else None, capture_output=True,
                          text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    ran, results = done.stdout.splitlines()
    assert ran == "the program ran"  # once: in this process, never in a worker
    first, second, killed = json.loads(results)
    assert isinstance(first, float) and isinstance(second, float) and killed == DIED


def torch_loaded_after(warmup, shape, config, device):
    """`warmup`'s seconds, or -1.0 where it left torch loaded in this worker (the real one has a file; an
    offline worker's stand-in, kernels/harness/compile_pool.py `_NoTorch`, has none)."""
    import sys

    seconds = warmup(shape, config, device)
    torch = sys.modules.get("torch")
    return -1.0 if torch is not None and "__file__" in vars(torch) else seconds


def test_offline_workers_compile_for_the_gpus_architecture_without_one(tmp_path, monkeypatch):
    # What a live tune's workers do: compile for sm_90 with no CUDA context; the binary lands in
    # Triton's cache (a launch on an H200 then loads it). No GPU here, so this also proves none is needed.
    # Nor torch: Triton's specializer would load it at a worker's first compile, seconds in each worker.
    import functools

    from rooftune.candidates import GemmShape, parse_config
    from rooftune.kernels.harness.compile_pool import offline_warmup_by_name

    monkeypatch.delenv("TRITON_INTERPRET", raising=False)  # the spawned worker compiles, not interprets
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path))
    config = parse_config("BLOCK_M=64,BLOCK_N=64,BLOCK_K=32,GROUP_M=1,SPLIT_K=1,num_warps=4,num_stages=3")
    offline = offline_warmup_by_name("rooftune.kernels.gemm", 90)
    warmup = functools.partial(torch_loaded_after, offline)
    warmup.needs_torch = offline.needs_torch
    with CompilePool(warmup, workers=1) as pool:
        result = pool.compile([(GemmShape(256, 256, 256), config)], timeout_s=300)
    assert isinstance(result[config], float) and result[config] >= 0, result[config]
    assert list(tmp_path.rglob("*.cubin"))


def test_nvml_answers_none_without_a_gpu():
    from rooftune.hwprofiles.hwprobe import gpu_visible, nvml_compute_capability

    capability = nvml_compute_capability()
    assert capability is None if not gpu_visible() else capability >= (7, 0)


def test_a_gpu_pool_compiles_offline_for_the_capability_nvml_reports(monkeypatch):
    # A sweep's and a tune's workers: no torch, no CUDA context, for the GPU's own architecture.
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness.compile_pool import gpu_pool

    monkeypatch.setattr(hwprobe, "nvml_compute_capability", lambda device=0: (9, 0))
    with gpu_pool("rooftune.kernels.gemm", workers=0) as pool:
        assert pool.warmup.needs_torch is False
        assert pool.warmup.args == ("rooftune.kernels.gemm", 90)
        assert pool.warmup.__module__ == "rooftune.kernels.gemm"


def test_a_gpu_pool_asks_cuda_where_nvml_cannot_tell(monkeypatch):
    from rooftune.hwprofiles import hwprobe
    from rooftune.kernels.harness.compile_pool import gpu_pool

    monkeypatch.setattr(hwprobe, "nvml_compute_capability", lambda device=0: None)
    monkeypatch.setattr(hwprobe, "gpu_visible", lambda: True)  # NVML sees a GPU but not its capability
    with gpu_pool("rooftune.kernels.attention", workers=0) as pool:
        assert getattr(pool.warmup, "needs_torch", True) is True
        assert pool.warmup.args == ("rooftune.kernels.attention",)


def test_no_gpu_pool_starts_without_a_gpu(monkeypatch):
    from rooftune.hwprofiles import hwprobe
    from rooftune.hwprofiles.hwprobe import NoGpuError
    from rooftune.kernels.harness import compile_pool as compile_module

    started = []
    monkeypatch.setattr(hwprobe, "nvml_compute_capability", lambda device=0: None)
    monkeypatch.setattr(hwprobe, "gpu_visible", lambda: False)
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: (_ for _ in ()).throw(NoGpuError("no GPU")))
    monkeypatch.setattr(compile_module.CompilePool, "start", lambda self, workers=None: started.append(self))
    with pytest.raises(NoGpuError):
        compile_module.gpu_pool("rooftune.kernels.gemm")
    assert started == []


def busy_warmup(shape, config, device):
    """A compile that keeps its worker busy (and holding the GIL) for a minute."""
    started = time.time()
    while time.time() - started < 60:
        pass
    return 60.0


PARENT_SCRIPT = r"""
import os, signal, sys, time
sys.path.insert(0, sys.argv[1])
from test_compile import busy_warmup
from rooftune.kernels.harness.compile_pool import CompilePool
if __name__ == "__main__":
    pool = CompilePool(busy_warmup, workers=2, device="cpu")
    for bm in (16, 32, 64, 128):  # two running, the rest queued
        pool.submit("shape", {"BLOCK_M": bm})
    while len(pool._pool._processes) < 2:
        time.sleep(0.1)
    time.sleep(1.0)
    print(" ".join(str(pid) for pid in pool._pool._processes), flush=True)
    os.kill(os.getpid(), signal.SIGTERM)  # as `timeout` or a scheduler ends a sweep: no cleanup runs
"""


def _running(pid: int) -> bool:
    """Alive and not a zombie (a container's init may never reap an orphan)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads process states from /proc")
def test_workers_exit_when_the_process_that_started_them_dies(tmp_path):
    import os
    import signal
    import subprocess
    import sys

    out = tmp_path / "pids.txt"
    with out.open("w") as f:  # a file, not a pipe: a surviving worker would hold a pipe open
        parent = subprocess.run([sys.executable, "-c", PARENT_SCRIPT, str(Path(__file__).parent)], stdout=f,
                                stderr=subprocess.DEVNULL, timeout=120)
    assert parent.returncode == -signal.SIGTERM
    pids = [int(p) for p in out.read_text().split()]
    assert len(pids) == 2
    deadline = time.monotonic() + 10
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    survivors = [p for p in pids if _running(p)]
    for p in survivors:  # leave nothing behind, whatever the outcome
        os.kill(p, signal.SIGKILL)
    assert not survivors, "compile workers outlived their parent"
