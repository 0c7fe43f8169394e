"""The tune cache as a store many processes share (issue 57): concurrent stores lose nothing, a reader never sees
part of a file, a hung holder of the lock makes a store fail rather than wait forever."""

import json
import subprocess
import sys
import time

import pytest

from rooftune.outputs import OutputError, file_lock
from rooftune.tuner import cache

WRITERS, STORES = 4, 40
# One writer: STORES entries of its own into the file, each a read-modify-write (what a tune's `put` is).
WRITER = """
import sys
from rooftune.tuner.cache import CACHE_FORMAT, CacheFile
path, me, stores = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = CacheFile(path, CACHE_FORMAT, "tune")
for i in range(stores):
    store.put_entry(f"{me}|{i}", {"writer": me, "i": i, "pad": "x" * 2000})
"""


def test_processes_storing_into_one_cache_keep_every_entry_and_a_reader_never_sees_half_a_file(tmp_path):
    """2 x 40 stores kept 52 of 80 without the lock. Here 4 processes x 40, while this process reads the file in a
    loop: all 160 kept, and every read is a whole cache."""
    path = tmp_path / "tune.json"
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), f"w{n}", str(STORES)]) for n in range(WRITERS)]
    reads = 0
    while any(p.poll() is None for p in procs):
        if path.exists():
            data = json.loads(path.read_text())  # a half-written file would raise here
            assert data["format"] == cache.CACHE_FORMAT
            reads += 1
        time.sleep(0.001)
    assert all(p.wait() == 0 for p in procs)
    entries = json.loads(path.read_text())["entries"]
    assert sorted(entries) == sorted(f"w{n}|{i}" for n in range(WRITERS) for i in range(STORES))
    assert reads > 0 and (tmp_path / ".tune.json.lock").is_file()
    assert not list(tmp_path.glob(".tune.json.*.tmp"))


def test_a_store_waits_for_another_stores_lock_then_gives_up_rather_than_hang(tmp_path, monkeypatch):
    store = cache.CacheFile(tmp_path / "tune.json", cache.CACHE_FORMAT, "tune")
    monkeypatch.setattr(cache, "LOCK_TIMEOUT_S", 0.3)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time\nfrom rooftune.outputs import file_lock\n"
        "with file_lock(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(30)\n"), str(store.lock_path)],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        with pytest.raises(OutputError, match=r"\.tune\.json\.lock: another process has held this lock .* over 0\.3 s"):
            store.put_entry("k", {})
        assert time.monotonic() - start < 5 and not store.path.exists()
    finally:
        holder.kill()
        holder.wait()
    store.put_entry("k", {})  # the kernel released the killed holder's lock
    assert store.read()["entries"] == {"k": {}}


def test_the_lock_of_a_linked_cache_is_beside_the_file_the_link_names(tmp_path):
    real = tmp_path / "real" / "tune.json"
    real.parent.mkdir()
    link = tmp_path / "link.json"
    link.symlink_to(real)
    store = cache.CacheFile(link, cache.CACHE_FORMAT, "tune")
    assert store.lock_path == real.with_name(".tune.json.lock")
    store.put_entry("k", {"v": 1})
    assert json.loads(real.read_text())["entries"] == {"k": {"v": 1}} and link.is_symlink()


def test_file_lock_is_exclusive_within_a_process_too(tmp_path):
    with file_lock(tmp_path / "x.lock"):
        with pytest.raises(OutputError, match="held this lock of the thing"):
            with file_lock(tmp_path / "x.lock", timeout_s=0.1, what="the thing"):
                pass
