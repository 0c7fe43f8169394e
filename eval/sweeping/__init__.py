"""Sweeping: the exhaustive sweep, its shards and GPU workers, quarantine, backfills."""
