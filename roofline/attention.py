"""The causal-attention cost model (placeholder while the GEMM model is built)."""
from dataclasses import dataclass
@dataclass(frozen=True)
class AttentionBreakdown:
    time_us: object
def predict_attention(shape, columns, profile):
    raise NotImplementedError
