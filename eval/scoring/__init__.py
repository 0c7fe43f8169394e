"""Scoring: the recorded measurer that replays a dataset, metrics and reports."""
