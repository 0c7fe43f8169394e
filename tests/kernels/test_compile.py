"""Parallel pre-compilation: seconds or error strings per config, in process and in a spawn pool."""

import time

from rooftune.candidates import Config
from rooftune.kernels.compile import precompile


def fake_warmup(shape, config, device):
    """Module level, so a spawned worker can import it by reference."""
    if config["BLOCK_M"] == 256:
        raise RuntimeError("out of resources: shared memory")
    time.sleep(0.01)
    return 0.5 if config["BLOCK_M"] == 64 else None


CONFIGS = [Config.make(4, 3, BLOCK_M=bm) for bm in (32, 64, 256)]


def _check(results):
    assert set(results) == set(CONFIGS)
    assert results[CONFIGS[1]] == 0.5
    assert isinstance(results[CONFIGS[0]], float) and results[CONFIGS[0]] >= 0.01  # timed around the call
    assert "out of resources" in results[CONFIGS[2]] and "RuntimeError" in results[CONFIGS[2]]


def test_precompile_in_process():
    done = []
    _check(precompile(fake_warmup, [("shape", c) for c in CONFIGS], workers=0, on_done=done.append))
    assert sum(done) == 3


def test_precompile_in_a_spawn_pool():
    _check(precompile(fake_warmup, [("shape", c) for c in CONFIGS], workers=2))
