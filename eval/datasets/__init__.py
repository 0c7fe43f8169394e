"""The dataset format: writing and reading ground truth, and other formats' readers."""
