"""Ground truth: datasets, the exhaustive sweep, replay evaluation and metrics."""
