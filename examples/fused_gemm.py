"""A user's own Triton GEMM with a fused bias + activation epilogue, tuned by `rooftune.autotune`.

The kernel is the Triton tutorial's matmul with an epilogue; the only change a `@triton.autotune` user
makes is the decorator's name and three arguments: which arguments are M, N and K, where B's strides
are (to read its layout), and how many configs to time. Run it: `python examples/fused_gemm.py`
(on a GPU, or on the CPU with TRITON_INTERPRET=1, slowly).
"""

import os

import torch
import triton
import triton.language as tl

import rooftune

CONFIGS = [
    triton.Config({"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": 8},
                  num_warps=warps, num_stages=stages)
    for bm, bn, bk, warps, stages in [
        (128, 256, 64, 8, 3), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4), (128, 64, 32, 4, 4),
        (64, 128, 32, 4, 4), (128, 32, 32, 4, 4), (64, 32, 32, 2, 5), (32, 64, 32, 2, 5),
    ]
]


@rooftune.autotune(configs=CONFIGS, key=["M", "N", "K"], gemm=("M", "N", "K"),
                   layout=("stride_bk", "stride_bn"), budget=4)
@triton.jit
def fused_gemm_kernel(a_ptr, b_ptr, bias_ptr, c_ptr, M, N, K,
                      stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
                      ACTIVATION: tl.constexpr, BLOCK_SIZE_M: tl.constexpr, BLOCK_SIZE_N: tl.constexpr,
                      BLOCK_SIZE_K: tl.constexpr, GROUP_SIZE_M: tl.constexpr):
    """C = act(A @ B + bias): A [M, K], B [K, N] (any strides), bias [N]; fp32 accumulation."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    group = GROUP_SIZE_M * num_pid_n
    first_m = (pid // group) * GROUP_SIZE_M
    group_m = min(num_pid_m - first_m, GROUP_SIZE_M)
    pid_m = first_m + (pid % group) % group_m
    pid_n = (pid % group) // group_m

    rm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    rn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    rk = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] < k_left), other=0.0)
        b = tl.load(b_ptrs, mask=(rk[:, None] < k_left) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    acc += tl.load(bias_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu":  # exact GELU: x · Φ(x)
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    c_ptrs = c_ptr + rm[:, None] * stride_cm + rn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(rm[:, None] < M) & (rn[None, :] < N))


def fused_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str = "relu") -> torch.Tensor:
    """act(x @ weight.T + bias) for an nn.Linear weight [N, K]: B = weight.T, read through its strides."""
    (m, k), (n, _) = x.shape, weight.shape
    out = torch.empty((m, n), device=x.device, dtype=x.dtype)
    grid = lambda meta: (triton.cdiv(m, meta["BLOCK_SIZE_M"]) * triton.cdiv(n, meta["BLOCK_SIZE_N"]),)
    fused_gemm_kernel[grid](x, weight, bias, out, m, n, k, x.stride(0), x.stride(1),
                            weight.stride(1), weight.stride(0), out.stride(0), out.stride(1), ACTIVATION=activation)
    return out


def reference(x, weight, bias, activation="relu"):
    y = x.float() @ weight.float().T + bias.float()
    return (torch.relu(y) if activation == "relu" else torch.nn.functional.gelu(y)).to(x.dtype)


if __name__ == "__main__":
    device = "cuda" if torch.cuda.is_available() and not os.environ.get("TRITON_INTERPRET") else "cpu"
    m, n, k = (4096, 4096, 4096) if device == "cuda" else (64, 96, 80)
    x = torch.randn(m, k, device=device, dtype=torch.float16)
    layer = torch.nn.Linear(k, n, device=device, dtype=torch.float16)
    for activation in ("relu", "gelu"):
        y = fused_linear(x, layer.weight, layer.bias, activation)
        torch.testing.assert_close(y, reference(x, layer.weight, layer.bias, activation), atol=2e-2, rtol=2e-2)
    timed = getattr(fused_gemm_kernel, "configs_timings", None)  # Triton's: set where it benchmarked
    how = f"timed {len(timed)} of {len(CONFIGS)} configs" if timed else "found in rooftune's cache"
    print(f"{m}x{n}x{k}: {how}, chose {fused_gemm_kernel.best_config}")
