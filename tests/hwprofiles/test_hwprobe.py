"""hwprobe: a clear error without a GPU; on a GPU, a plausible profile of every field."""

import pytest

from rooftune.hwprofiles.hwprobe import UNPROBED_FIELDS, NoGpuError, require_cuda, sm_partition


def _has_cuda():
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_has_cuda(), reason="checks the no-GPU error")
def test_no_gpu_is_a_clear_error():
    with pytest.raises(NoGpuError, match="no CUDA GPU"):
        require_cuda()
    with pytest.raises(NoGpuError):
        with sm_partition(66):
            pass


def test_no_partition_is_a_no_op():
    with sm_partition(None) as ctx:
        assert ctx is None


@pytest.mark.gpu
def test_probe_measures_every_field(tmp_path):
    from rooftune.hwprofiles import load_profile, save_profile
    from rooftune.hwprofiles.hwprobe import probe

    profile = probe()
    save_profile(profile, tmp_path / "p.json")
    back = load_profile(tmp_path / "p.json")  # validates every field
    assert back.sm_count > 0 and back.dram_bw_gbps > 100 and back.bf16_tflops > 10
    assert back.l2_bw_gbps > back.dram_bw_gbps * 0.5
    assert all(v.startswith("probed") for k, v in back.sources.items() if k not in UNPROBED_FIELDS)
    assert {"driver", "torch", "triton", "cuda", "gpu", "date"} <= set(back.meta)


@pytest.mark.gpu
def test_partition_runs_work_on_fewer_sms():
    import torch

    from rooftune.hwprofiles.hwprobe import matmul_tflops

    full = matmul_tflops("bf16", size=4096, reps=5)
    half = torch.cuda.get_device_properties(0).multi_processor_count // 2
    with sm_partition(half):
        part = matmul_tflops("bf16", size=4096, reps=5)
    assert part < 0.8 * full


def test_probe_fills_every_profile_field_on_the_cpu():
    """What `probe` writes, from fake device properties: every field present, valid, with a source."""
    from types import SimpleNamespace

    from rooftune.hwprofiles import HardwareProfile
    from rooftune.hwprofiles.hwprobe import profile_fields

    props = SimpleNamespace(name="Fake GPU", major=9, minor=0, multi_processor_count=132,
                            shared_memory_per_multiprocessor=233472, shared_memory_per_block_optin=232448,
                            regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                            L2_cache_size=62914560)
    measured = dict(dram_bw_gbps=4000.0, l2_bw_gbps=9000.0, bf16_tflops=750.0, fp16_tflops=740.0,
                    tf32_tflops=390.0, fp32_tflops=50.0, launch_overhead_us=2.0)
    nvml = {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0}
    counted = (72, "probed 2026-11-29: 72 distinct SMs ran a kernel in a green context asked for 66 SMs")
    values, sources = profile_fields(props, nvml, measured, name=None, sms=66, date="2026-11-29", partition=counted)
    profile = HardwareProfile(**values, sources=sources)
    assert profile.sm_count == 72 and profile.name == "Fake GPU (66 SMs)"
    assert set(sources) == set(values) - {"name"}
    assert "asked for 66 SMs" in sources["sm_count"] and "estimate" in sources["l2_latency_ns"]
    # what a probe measures says so; what it takes from a table or estimates never claims to be probed
    assert all(v.startswith("probed") != (k in UNPROBED_FIELDS) for k, v in sources.items())
    # where the SMs were not counted, the driver's rule gives them, and the source says it is the rule
    values, sources = profile_fields(props, nvml, measured, name=None, sms=66, date="2026-11-29")
    assert values["sm_count"] == 72 and sources["sm_count"].startswith("rule")


def test_a_partitions_l2_probe_runs_programs_for_its_own_sms(monkeypatch):
    """probe inside a partition sizes the L2 probe's programs by the partition's counted SMs, not the device's."""
    from contextlib import nullcontext
    from types import SimpleNamespace

    from rooftune.hwprofiles import hwprobe

    props = SimpleNamespace(name="Fake GPU", major=9, minor=0, multi_processor_count=132,
                            shared_memory_per_multiprocessor=233472, shared_memory_per_block_optin=232448,
                            regs_per_multiprocessor=65536, max_threads_per_multi_processor=2048,
                            L2_cache_size=62914560)
    cuda = SimpleNamespace(set_device=lambda d: None, get_device_properties=lambda d: props)
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: SimpleNamespace(cuda=cuda))
    monkeypatch.setattr(hwprobe, "_nvml_facts", lambda d: {"sm_clock_mhz": 1980.0, "mem_clock_mhz": 3201.0})
    monkeypatch.setattr(hwprobe, "software_versions", lambda d: {})
    monkeypatch.setattr(hwprobe, "sm_partition", lambda sms, device: nullcontext())
    monkeypatch.setattr(hwprobe, "partition_sm_count", lambda sms, p, date: (72, "probed: 72 counted"))
    for name in ("dram_bw_gbps", "launch_overhead_us"):
        monkeypatch.setattr(hwprobe, name, lambda: 1.0)
    monkeypatch.setattr(hwprobe, "matmul_tflops", lambda dtype: 1.0)
    l2_sms = []
    monkeypatch.setattr(hwprobe, "l2_bw_gbps", lambda l2, sms: l2_sms.append(sms) or 1.0)
    assert hwprobe.probe(sms=66).sm_count == 72 and l2_sms == [72]
    assert hwprobe.probe().sm_count == 132 and l2_sms == [72, 132]


@pytest.mark.parametrize("requested, cc, granted", [
    (66, (9, 0), 72), (64, (9, 0), 64), (1, (9, 0), 8), (129, (10, 0), 136),  # groups of 8 from 9.0 on
    (66, (8, 0), 66), (7, (8, 0), 8), (1, (7, 5), 2),                          # groups of 2 before
])
def test_a_green_context_gets_whole_groups_of_sms(requested, cc, granted):
    from rooftune.hwprofiles.hwprobe import granted_sms

    assert granted_sms(requested, cc) == granted


def test_the_model_of_a_partition_counts_the_granted_sms():
    from rooftune.hwprofiles import load_profile
    from rooftune.hwprofiles.hwprobe import partition_profile

    h200 = load_profile("h200")
    assert partition_profile(h200, None) is h200
    assert partition_profile(h200, 66).sm_count == 72 and partition_profile(h200, 64).sm_count == 64


def test_the_partitions_sm_count_is_counted_where_the_kernel_runs_else_the_rule():
    from types import SimpleNamespace

    from rooftune.hwprofiles.hwprobe import partition_sm_count

    props = SimpleNamespace(major=9, minor=0, multi_processor_count=132)
    seen = []
    count, source = partition_sm_count(66, props, "2026-12-02", measure=lambda programs: seen.append(programs) or 72)
    assert (count, seen) == (72, [8 * 132]) and "72 distinct SMs" in source and "as the rule" in source
    count, source = partition_sm_count(66, props, "2026-12-02", measure=lambda programs: 70)
    assert count == 70 and "the rule of groups says 72" in source  # the count wins; the source shows the rule

    def broken(programs):
        raise RuntimeError("no smid here")

    count, source = partition_sm_count(66, props, "2026-12-02", measure=broken)
    assert count == 72 and source.startswith("rule, not counted (RuntimeError)")


@pytest.mark.gpu
def test_a_partition_runs_on_the_sms_the_rule_grants():
    """The rule the model counts SMs by, checked on this GPU: a kernel inside `--sms 66` runs on granted_sms(66) SMs."""
    import torch

    from rooftune.hwprofiles.hwprobe import granted_sms, sms_in_use

    props = torch.cuda.get_device_properties(0)
    assert sms_in_use(8 * props.multi_processor_count) == props.multi_processor_count
    with sm_partition(66):
        counted = sms_in_use(8 * props.multi_processor_count)
    assert counted == granted_sms(66, (props.major, props.minor))


@pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")  # the interpreter
def test_l2_read_kernel_sums_what_each_program_reads():
    """The L2 probe's kernel (in the interpreter without a GPU): program p sums `iters` blocks from
    block p mod n_blocks on, wrapping around, so the bytes it is credited with are really loaded."""
    import numpy as np
    import torch

    from rooftune.hwprofiles.hwprobe import L2_READ_BLOCK, l2_read

    device = "cuda" if torch.cuda.is_available() else "cpu"
    n_blocks, programs, iters = 3, 5, 4
    buf = torch.randn(n_blocks * L2_READ_BLOCK, generator=torch.Generator().manual_seed(0)).to(device)
    blocks = buf.cpu().double().numpy().reshape(n_blocks, L2_READ_BLOCK).sum(axis=1)
    want = [sum(blocks[(p + i) % n_blocks] for i in range(iters)) for p in range(programs)]
    got = l2_read(buf, programs, iters).cpu().double().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-2)
    with pytest.raises(ValueError, match="multiple of"):
        l2_read(buf[:-1], programs, iters)


def test_nvml_index_matches_the_cuda_device_by_uuid(monkeypatch):
    """A worker that sees only GPU 2 (CUDA device 0) reads NVML's GPU 2; without a match, the device itself."""
    import sys
    import types

    import torch

    from rooftune.hwprofiles.hwprobe import nvml_index

    uuids = ["GPU-aaaa-0", b"GPU-bbbb-1", "GPU-CCCC-2"]
    fake = types.SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None,
                                 nvmlDeviceGetCount=lambda: len(uuids), nvmlDeviceGetHandleByIndex=lambda i: i,
                                 nvmlDeviceGetUUID=lambda handle: uuids[handle])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    uuid_of = {0: "cccc-2", 1: "ffff-9"}
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(uuid=uuid_of[d]))
    nvml_index.cache_clear()  # asked once per device in a process: this test's fakes are new
    assert nvml_index(0) == 2
    assert nvml_index(1) == 1  # no NVML GPU has its UUID
    nvml_index.cache_clear()


def test_nvml_gpu_name_reads_the_gpu_cuda_would_use(monkeypatch):
    """Without torch (and so for the compute capability too): CUDA_VISIBLE_DEVICES' entry for the device picks NVML's GPU; bytes or str names;
    None where NVML fails (no driver)."""
    import sys
    import types

    from rooftune.hwprofiles.hwprobe import nvml_compute_capability, nvml_gpu_name

    names = [b"NVIDIA H200", "NVIDIA A100-SXM4-80GB", "NVIDIA B200"]
    capabilities = [(9, 0), (8, 0), (10, 0)]
    fake = types.SimpleNamespace(nvmlInit=lambda: None, nvmlShutdown=lambda: None,
                                 nvmlDeviceGetHandleByIndex=lambda i: i, nvmlDeviceGetName=lambda handle: names[handle],
                                 nvmlDeviceGetCudaComputeCapability=lambda handle: capabilities[handle])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert nvml_gpu_name() == "NVIDIA H200" and nvml_gpu_name(1) == "NVIDIA A100-SXM4-80GB"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,1")
    assert nvml_gpu_name() == "NVIDIA B200" and nvml_gpu_name(1) == "NVIDIA A100-SXM4-80GB"
    assert nvml_compute_capability() == (10, 0)  # the same GPU: one mapping for every NVML question
    monkeypatch.setattr(fake, "nvmlInit", lambda: (_ for _ in ()).throw(RuntimeError("no driver")))
    assert nvml_gpu_name() is None


def _fake_partition(monkeypatch, with_stream: bool):
    """sm_partition over a fake torch: its green context (the calls it saw) and torch.cuda.graph."""
    from types import SimpleNamespace

    from rooftune.hwprofiles import hwprobe

    class FakeStream:  # torch.cuda.Stream
        def __init__(self, stream_id, device_index, device_type):
            self.ids = (stream_id, device_index, device_type)

    class FakeContext:
        def __init__(self):
            self.calls = []

        def set_context(self):
            self.calls.append("enter")

        def pop_context(self):
            self.calls.append("leave")

    if with_stream:  # GreenContext.Stream (torch 2.11 on) returns a generic torch.Stream
        FakeContext.Stream = lambda self: SimpleNamespace(stream_id=7, device_index=0, device_type=1)
    ctx = FakeContext()
    graph = type("graph", (), {"default_capture_stream": "whole-chip stream"})
    props = SimpleNamespace(multi_processor_count=132, major=9, minor=0)
    cuda = SimpleNamespace(graph=graph, get_device_properties=lambda d: props, synchronize=lambda *device: None,
                           Stream=FakeStream)
    monkeypatch.setattr(hwprobe, "require_cuda", lambda: SimpleNamespace(cuda=cuda))
    green = SimpleNamespace(GreenContext=SimpleNamespace(create=lambda num_sms, device_id: ctx))
    monkeypatch.setitem(__import__("sys").modules, "torch.cuda.green_contexts", green)
    return ctx, graph


def test_a_partition_captures_graphs_on_the_green_contexts_own_stream(monkeypatch):
    """Graphs captured inside a partition go to a stream of the green context, not to one torch made earlier
    for the whole GPU; leaving, the next capture gets a fresh stream."""
    ctx, graph = _fake_partition(monkeypatch, with_stream=True)
    with sm_partition(66):
        assert graph.default_capture_stream.ids == (7, 0, 1)
    assert graph.default_capture_stream is None and ctx.calls == ["enter", "leave"]


def test_a_partition_whose_groups_pass_the_devices_sms_is_refused(monkeypatch):
    from rooftune.hwprofiles.hwprobe import PartitionError

    ctx, _ = _fake_partition(monkeypatch, with_stream=True)
    with pytest.raises(PartitionError, match=r"--sms 130: .* groups of 8 SMs, 136 here, more than its 132; ask for "
                                             r"at most 128"):
        with sm_partition(130):
            pass
    assert ctx.calls == []  # refused before any green context


def test_without_a_green_context_stream_a_partition_captures_on_a_fresh_stream(monkeypatch):
    """A torch whose green context has no Stream: the whole GPU's capture stream is forgotten entering and leaving."""
    ctx, graph = _fake_partition(monkeypatch, with_stream=False)
    with sm_partition(66):
        assert graph.default_capture_stream is None
        graph.default_capture_stream = "partition stream"
    assert graph.default_capture_stream is None and ctx.calls == ["enter", "leave"]


def test_the_sm_counting_kernel_compiles_for_sm_90_on_the_cpu():
    """`sms_in_use`'s kernel builds for the H200 without one (a probe inside a partition runs it): it reads the SM id
    and spins on the global timer. Compiled in a process of its own, outside the tests' Triton interpreter."""
    import os
    import subprocess
    import sys

    script = (
        "import triton\n"
        "from triton.backends.compiler import GPUTarget\n"
        "from rooftune.hwprofiles.hwprobe import _record_sm_kernel\n"
        "src = triton.compiler.ASTSource(fn=_record_sm_kernel(), signature={'out_ptr': '*i32', 'spin_ns': 'i32'},"
        " constexprs={})\n"
        "ptx = triton.compile(src, target=GPUTarget('cuda', 90, 32), options={'num_warps': 1}).asm['ptx']\n"
        "print('%smid' in ptx, '%globaltimer' in ptx)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["True", "True"]
