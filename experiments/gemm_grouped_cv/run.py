"""`rooftune fit gemm` on train with CV folds grouped by layer (N, K, layout): a shape's siblings at other token
counts never in the fold that scores it. Writes the fit to argv[1]."""
import sys
from rooftune.candidates.families import KernelSpec
KernelSpec.fold_group = lambda self, shape: (shape.n, shape.k, shape.layout) if self.name == "gemm" else (
    tuple(getattr(shape, k) for k in self.fold_keys) if self.fold_keys else None)
from rooftune.tuner.cli.app import app
sys.argv = ["rooftune", "fit", "gemm", "--data", "datasets/h200/gemm/train", "--gpu", "h200", "--out", sys.argv[1]]
app()
