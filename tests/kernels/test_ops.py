"""rooftune.matmul / linear / attention against torch, their input errors and fallback, autograd, the
custom ops' registration (opcheck), and torch.compile.

On the CPU the kernels run in Triton's interpreter (fp16; bf16 the ops run there on fp32 copies, since the
interpreter mishandles bf16: one test checks that); each test starts with
an empty tune cache of its own and ROOFTUNE_KERNEL_ONLY=1, so the ops run the kernel's zero-trial pick (untuned,
with no route fitted for this Triton release or dtype, they would run torch's op: one test checks that). GPU-only
tests (bf16, CUDA graphs) are marked."""

import os
import subprocess
import sys

import pytest
import torch
import torch.nn.functional as F

import rooftune
from rooftune.kernels.harness.check import relative_error
from rooftune.tuner.pytorch.ops import clear_memo, torch_ops

ops = torch_ops()  # kernels/ops.py with the tuner's config resolver installed, as rooftune.matmul has it

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
DTYPE = torch.bfloat16 if DEVICE == "cuda" else torch.float16
TOL = 1e-2  # relative Frobenius error, bf16 or fp16 (kernels/harness/check.py TOLERANCE)
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


@pytest.fixture(autouse=True)
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROOFTUNE_CACHE", str(tmp_path / "tune.json"))
    for name in ("ROOFTUNE_PROFILE", "ROOFTUNE_TUNE", "ROOFTUNE_FALLBACK"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ROOFTUNE_KERNEL_ONLY", "1")  # the kernels under test, never the library's op
    clear_memo()
    yield
    clear_memo()


def randn(*shape, dtype=DTYPE, seed=0):
    gen = torch.Generator(device=DEVICE).manual_seed(seed + len(shape) * 1000 + sum(shape))
    return torch.randn(shape, generator=gen, device=DEVICE, dtype=dtype)


def assert_close(out, ref):
    assert out.shape == ref.shape
    rel = relative_error(out.float(), ref.float())
    assert rel < TOL, f"rel err {rel:.3g}"


def test_matmul_matches_torch_in_both_storage_orders():
    a, b = randn(33, 47), randn(47, 65)
    assert_close(rooftune.matmul(a, b), a.float() @ b.float())
    w = randn(65, 47)  # b as the transpose of a row-major [N, K] tensor: read in place ('nk')
    assert_close(rooftune.matmul(a, w.t()), a.float() @ w.float().t())
    x = randn(2, 3, 47)  # leading dimensions
    assert_close(rooftune.matmul(x, b), x.float() @ b.float())


def test_untuned_without_a_route_the_ops_run_torchs_own(monkeypatch):
    """No shipped route applies (the CPU's fp16 shapes; another GPU or Triton release): nothing says the kernel's
    unmeasured pick beats the library, so the untuned op runs torch's op, bit for bit."""
    from rooftune.tuner.pytorch import ops as resolver

    monkeypatch.setattr(resolver, "installed_triton", lambda: "9.9.0")  # a release no route was fitted under
    monkeypatch.delenv("ROOFTUNE_KERNEL_ONLY")
    clear_memo()
    a, b, w = randn(33, 47), randn(47, 65), randn(65, 47)
    assert torch.equal(rooftune.matmul(a, b), torch.matmul(a, b))
    assert torch.equal(rooftune.linear(a, w), F.linear(a, w))
    q, k = randn(1, 4, 37, 32), randn(1, 2, 37, 32, seed=1)
    assert torch.equal(rooftune.attention(q, k, k), F.scaled_dot_product_attention(q, k, k, is_causal=True,
                                                                                   enable_gqa=True))


def test_linear_matches_torch():
    x, w, bias = randn(2, 5, 47), randn(65, 47), randn(65)
    assert_close(rooftune.linear(x, w, bias), F.linear(x.float(), w.float(), bias.float()))
    assert_close(rooftune.linear(x[0, 0], w), F.linear(x[0, 0].float(), w.float()))


@pytest.mark.parametrize("causal", [True, False])
def test_attention_matches_sdpa(causal):
    q, k, v = randn(2, 4, 37, 64), randn(2, 2, 37, 64, seed=1), randn(2, 2, 37, 64, seed=2)  # 2 K/V heads
    ref = ops._sdpa(q.float(), k.float(), v.float(), causal, None)
    assert_close(rooftune.attention(q, k, v, causal=causal), ref)
    assert_close(rooftune.attention(q, k, v, causal, scale=0.3), ops._sdpa(q.float(), k.float(), v.float(), causal, 0.3))


@pytest.mark.parametrize("call, match", [
    (lambda: rooftune.matmul(randn(33, 47, dtype=torch.float32), randn(47, 65, dtype=torch.float32)), "bf16 or fp16"),
    (lambda: rooftune.matmul(randn(33, 47), randn(46, 65)), "inner dimensions differ.*K = 47.*K = 46"),
    (lambda: rooftune.matmul(randn(33, 47), randn(2, 47, 65)), "2-D"),
    (lambda: rooftune.matmul(randn(0, 47), randn(47, 65)), "M, N and K must be >= 1"),
    (lambda: rooftune.linear(randn(3, 47), randn(65, 47), randn(64)), "bias must be \\[65\\]"),
    (lambda: rooftune.attention(randn(1, 2, 16, 48), randn(1, 2, 16, 48), randn(1, 2, 16, 48)), "head_dim"),
    (lambda: rooftune.attention(randn(1, 3, 16, 32), randn(1, 2, 16, 32), randn(1, 2, 16, 32)), "must divide"),
    (lambda: rooftune.attention(randn(1, 2, 16, 32), randn(1, 2, 24, 32), randn(1, 2, 24, 32)), "shapes differ"),
    (lambda: rooftune.attention(*(randn(1, 2, 16, 32, dtype=torch.float32),) * 3), "bf16 or fp16"),
])
def test_unsupported_inputs_raise_a_clear_error(call, match):
    with pytest.raises(ValueError, match=match) as info:
        call()
    assert isinstance(info.value, ops.UnsupportedInputError) and "fallback=True" in str(info.value)


def test_fallback_runs_torch(monkeypatch):
    a, b = randn(5, 7, dtype=torch.float32), randn(7, 3, dtype=torch.float32)
    assert torch.equal(rooftune.matmul(a, b, fallback=True), a @ b)
    x, w = randn(4, 7, dtype=torch.float32), randn(3, 7, dtype=torch.float32)
    assert torch.equal(rooftune.linear(x, w, fallback=True), F.linear(x, w))
    q, k = randn(1, 2, 16, 32, dtype=torch.float32), randn(1, 2, 24, 32, dtype=torch.float32)  # seq 16 vs 24
    expected = F.scaled_dot_product_attention(q, k, k, is_causal=False)
    assert torch.equal(rooftune.attention(q, k, k, causal=False, fallback=True), expected)
    monkeypatch.setenv("ROOFTUNE_FALLBACK", "1")
    assert torch.equal(rooftune.matmul(a, b), a @ b)
    with pytest.raises(ValueError):  # an explicit argument wins over the environment
        rooftune.matmul(a, b, fallback=False)


def test_a_shape_over_the_kernels_size_limit_falls_back_or_is_refused():
    """K over the 32-bit indexing limit (candidates/shapes.py MAX_ROW_ELEMS): fallback=True raised ShapeError."""
    k = 2**23 + 1
    a = torch.ones(1, 1, dtype=DTYPE, device=DEVICE).expand(2, k)  # stride-0 views: no 16 MB copies
    b = torch.ones(1, 1, dtype=DTYPE, device=DEVICE).expand(k, 3)
    assert torch.equal(rooftune.matmul(a, b, fallback=True), torch.matmul(a, b))
    with pytest.raises(ops.UnsupportedInputError, match=r"k = 8388609 is over the limit.*fallback=True"):
        rooftune.matmul(a, b)
    with pytest.raises(ops.UnsupportedInputError, match="over the limit"):
        rooftune.linear(a, b.t())


@pytest.mark.parametrize("scale", [float("inf"), float("-inf"), float("nan")])
def test_a_scale_that_is_not_finite_is_refused_even_with_fallback(scale):
    """scale=inf returned all NaN (as SDPA does with it); NaN, 0 and -1 were refused already."""
    q = randn(1, 2, 16, 32)
    for fallback in (False, True):
        with pytest.raises(ops.UnsupportedInputError, match="scale must"):
            rooftune.attention(q, q, q, scale=scale, fallback=fallback)


@pytest.mark.parametrize("name", ["ROOFTUNE_TUNE", "ROOFTUNE_FALLBACK", "ROOFTUNE_KERNEL_ONLY"])
@pytest.mark.parametrize("value", ["maybe", "2", "onn"])
def test_a_setting_that_is_not_a_boolean_is_refused_naming_it(monkeypatch, name, value):
    """ROOFTUNE_TUNE=maybe and ROOFTUNE_FALLBACK=2 were read as off without a word."""
    from rooftune.environment import SettingError

    monkeypatch.setenv(name, value)
    a, b = randn(5, 7), randn(7, 3)
    with pytest.raises(SettingError, match=rf"\${name}='{value}' is not a boolean"):
        rooftune.matmul(a, b)
    with pytest.raises(SettingError, match=name):
        rooftune.attention(*(randn(1, 2, 16, 32),) * 3)


def test_gradients_match_torch():
    x, w = randn(9, 47).requires_grad_(), randn(65, 47).requires_grad_()
    rooftune.linear(x, w).float().square().sum().backward()
    xr, wr = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    F.linear(xr, wr).square().sum().backward()
    assert_close(x.grad, xr.grad)
    assert_close(w.grad, wr.grad)
    q, k, v = (randn(1, 4, 37, 32, seed=s).requires_grad_() if s == 0 else randn(1, 2, 37, 32, seed=s).requires_grad_()
               for s in range(3))
    (rooftune.attention(q, k, v).float() * randn(1, 4, 37, 32, dtype=torch.float32, seed=5)).sum().backward()
    ref = [t.detach().float().requires_grad_() for t in (q, k, v)]
    (ops._sdpa(*ref, True, None) * randn(1, 4, 37, 32, dtype=torch.float32, seed=5)).sum().backward()
    for t, r in zip((q, k, v), ref):
        assert_close(t.grad, r.grad)


def test_custom_ops_pass_opcheck():
    a, w = randn(9, 47), randn(65, 47)
    torch.library.opcheck(ops.gemm_op, (a, w, "nk", False))
    q, k = randn(1, 2, 20, 32), randn(1, 1, 20, 32, seed=1)
    torch.library.opcheck(ops.attention_op, (q, k, k, True, None, False))


def test_fake_registration_infers_shapes():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        a, b = torch.empty(33, 47, dtype=DTYPE), torch.empty(65, 47, dtype=DTYPE)
        assert ops.gemm_op(a, b, "nk", False).shape == (33, 65)
        q, k = torch.empty(2, 4, 37, 64, dtype=DTYPE), torch.empty(2, 2, 37, 64, dtype=DTYPE)
        assert ops.attention_op(q, k, k, True, None, False).shape == (2, 4, 37, 64)


class TinyBlock(torch.nn.Module):
    """A linear layer and causal self-attention over its output, through rooftune's ops."""

    def __init__(self, dim: int = 64, heads: int = 2):
        super().__init__()
        self.heads = heads
        self.fc = torch.nn.Linear(dim, dim, device=DEVICE, dtype=DTYPE)

    def forward(self, x):                                                              # [B, S, dim]
        h = torch.relu(rooftune.linear(x, self.fc.weight, self.fc.bias))
        b, s, d = h.shape
        q = h.reshape(b, s, self.heads, d // self.heads).transpose(1, 2)                # [B, H, S, D]
        return rooftune.attention(q, q, q).transpose(1, 2).reshape(b, s, d)


@pytest.mark.slow  # Inductor compiles: 5-20 s
def test_torch_compile_keeps_the_ops():
    # Inductor compiles the module around the two opaque custom ops; on the CPU they then run in
    # Triton's interpreter. No grad: the backward graph would double the compile time of this test.
    block, x = TinyBlock(), randn(2, 19, 64)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=False)(x)
    assert_close(compiled, eager)


@pytest.mark.gpu
def test_ops_in_bf16_on_the_gpu():
    a, b, w = randn(300, 520), randn(520, 1000), randn(1000, 520)
    assert_close(rooftune.matmul(a, b), a.float() @ b.float())
    assert_close(rooftune.linear(a, w), a.float() @ w.float().t())
    q, k = randn(2, 8, 300, 128), randn(2, 2, 300, 128, seed=1)
    assert_close(rooftune.attention(q, k, k), ops._sdpa(q.float(), k.float(), k.float(), True, None))


@pytest.mark.skipif(DEVICE == "cuda", reason="Triton's interpreter (bf16 on the GPU: test_ops_in_bf16_on_the_gpu)")
def test_ops_in_bf16_in_the_interpreter_are_right():
    """The interpreter's tl.dot multiplies bf16's raw bits as integers: the ops returned errors of 1e11 with
    exit 0. They run the kernel on fp32 copies there (kernels/ops.py `interpreted_bf16`): right, and in bf16."""
    bf16 = torch.bfloat16
    a, b = randn(33, 47, dtype=bf16), randn(47, 65, dtype=bf16)
    w, bias = randn(65, 47, dtype=bf16), randn(65, dtype=bf16)
    for out, ref in ((rooftune.matmul(a, b), a.float() @ b.float()),
                     (rooftune.matmul(a, w.t()), a.float() @ w.float().t()),
                     (rooftune.linear(a, w, bias), F.linear(a.float(), w.float(), bias.float()))):
        assert out.dtype == bf16 and relative_error(out.float(), ref) < 1e-2
    once = (a.double() @ b.double()).to(bf16)  # the exact product rounded to bf16 once: the GPU's result
    assert (rooftune.matmul(a, b).float() - once.float()).abs().max() <= 2 * torch.finfo(bf16).eps * once.abs().max()
    q = randn(2, 4, 37, 64, dtype=bf16)
    k, v = randn(2, 2, 37, 64, seed=1, dtype=bf16), randn(2, 2, 37, 64, seed=2, dtype=bf16)
    for causal in (True, False):
        out = rooftune.attention(q, k, v, causal=causal)
        assert out.dtype == bf16 and out.stride() == q.stride()
        assert relative_error(out.float(), ops._sdpa(q.float(), k.float(), v.float(), causal, None)) < 1e-2


def test_cpu_tensors_outside_the_interpreter_are_named_as_the_op_names_them():
    """matmul and linear said "Q, K and V are on the CPU" (attention's words)."""
    code = ("import torch, rooftune\n"
            "a, b, q = torch.randn(4, 8), torch.randn(8, 4), torch.randn(1, 2, 16, 32)\n"
            "for call in (lambda: rooftune.matmul(a.half(), b.half()),\n"
            "             lambda: rooftune.linear(a.half(), b.t().half()),\n"
            "             lambda: rooftune.attention(q.half(), q.half(), q.half())):\n"
            "    try:\n"
            "        call()\n"
            "    except ValueError as exc:\n"
            "        print(exc)\n")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    lines = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert [line.split(" are on the CPU, where the kernels run only in Triton's interpreter")[0] for line in lines] \
        == ["rooftune.matmul: a and b", "rooftune.linear: x and weight", "rooftune.attention: q, k and v"]


@pytest.mark.gpu
def test_torch_compile_with_cuda_graphs():
    # mode="reduce-overhead" captures the compiled module in a CUDA graph after warm-up runs.
    block, x = TinyBlock(dim=256, heads=2), randn(4, 128, 256)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, mode="reduce-overhead", fullgraph=False)
        for _ in range(3):
            out = compiled(x)
    assert_close(out, eager)


@pytest.mark.gpu
def test_capture_in_a_cuda_graph():
    x, w = randn(64, 512), randn(1024, 512)
    rooftune.linear(x, w)  # warm-up: resolves the config and compiles outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = rooftune.linear(x, w)
    x.copy_(randn(64, 512, seed=7))
    graph.replay()
    assert_close(out, x.float() @ w.float().t())
