"""rooftune: few-trial autotuning of Triton kernels from a roofline + occupancy model."""

__version__ = "0.1.0"
