"""`transfer`: another GPU's tuned table replayed here, what a user gets who copies one GPU's table to another.

The table is the other GPU's exhaustive best per shape (the best table tuning there could ship), read from a
dataset of the same shapes recorded on that GPU; here each shape measures that one config whatever the budget
(its nearest legal candidate where this GPU's legality drops it).
"""

from __future__ import annotations

from collections.abc import Mapping

from rooftune.candidates import Config
from rooftune.candidates.records import ShapeRecords
from rooftune.tuner.search.strategies import Strategy, measure_in_order, nearest_legal


class TransferError(ValueError):
    """A source dataset that cannot give every shape a config."""


def best_table(source: list[ShapeRecords]) -> dict:
    """Shape -> the fastest successful config among its recorded candidates (shapes where none ran left out)."""
    return {r.shape: r.best_candidate.config for r in source if r.best_candidate is not None}


def check_covers(table: Mapping, records: list[ShapeRecords], source_label: str) -> None:
    """Refuse a table that lacks some of `records`' shapes, naming how many and the first."""
    missing = [r.shape for r in records if r.shape not in table]
    if missing:
        raise TransferError(f"{source_label}: no successful config recorded for {len(missing)} of the "
                            f"{len(records)} shapes (first: {missing[0]}); transfer needs a dataset of the same shapes")


def transfer(table: Mapping[object, Config]) -> Strategy:
    """Measure `table`'s config for the shape (one config, whatever the budget)."""

    def strategy(shape, candidates, measure, budget, profile):
        if shape not in table:
            raise TransferError(f"the transfer table has no config for {shape}")
        return measure_in_order(nearest_legal([table[shape]], candidates), measure, budget)

    strategy.__name__ = "transfer"
    return strategy
