"""The suite of kernels the generic model is trained and judged on (issue 58): `SUITE`, name -> `SuiteKernel`, and
its committed split into training and held-out kernels (`suite_split`). docs/suite.md describes each kernel."""

from rooftune.kernels.suite.decode import PAGED_DECODE
from rooftune.kernels.suite.flash import ATTN_BWD_PREPROCESS, FLASH_ATTN_FWD
from rooftune.kernels.suite.flash_bwd import FLASH_ATTN_BWD
from rooftune.kernels.suite.gemms import GEMM_BIAS_GELU, INT8_GEMM, SPLITK_GEMM
from rooftune.kernels.suite.layernorm import LAYERNORM_BWD, LAYERNORM_FWD
from rooftune.kernels.suite.linear_attn import CHUNK_LINEAR_ATTN
from rooftune.kernels.suite.persistent import GROUPED_GEMM, PERSISTENT_GEMM
from rooftune.kernels.suite.pointwise import EMBEDDING, FP8_QUANT, SWIGLU
from rooftune.kernels.suite.record import SuiteKernel, launch, shape_id
from rooftune.kernels.suite.rmsnorm import ADD_RMSNORM, RMSNORM_BWD, RMSNORM_FWD
from rooftune.kernels.suite.rotary import ROTARY
from rooftune.kernels.suite.scan import SCAN
from rooftune.kernels.suite.softmax import SOFTMAX
from rooftune.kernels.suite.split import suite_split
from rooftune.kernels.suite.vocab import ARGMAX, CROSS_ENTROPY

SUITE: dict[str, SuiteKernel] = {k.name: k for k in (
    RMSNORM_FWD, RMSNORM_BWD, ADD_RMSNORM, LAYERNORM_FWD, LAYERNORM_BWD, SOFTMAX, CROSS_ENTROPY, ARGMAX, ROTARY,
    SWIGLU, EMBEDDING, FP8_QUANT, SCAN, ATTN_BWD_PREPROCESS,
    GEMM_BIAS_GELU, SPLITK_GEMM, INT8_GEMM, PERSISTENT_GEMM, GROUPED_GEMM, FLASH_ATTN_FWD, FLASH_ATTN_BWD,
    PAGED_DECODE, CHUNK_LINEAR_ATTN)}

__all__ = ["SUITE", "SuiteKernel", "launch", "shape_id", "suite_split"]
