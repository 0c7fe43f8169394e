"""The Triton kernels, the reference check, timing, and parallel pre-compilation."""
