"""The one output writer (rooftune/outputs.py): whole or not at all, the path and the reason named, never a
rename over a device, pipe or folder, a plain file's permissions."""

import errno
import math
import os
import stat
from pathlib import Path

import pytest

from rooftune import outputs
from rooftune.outputs import OutputError, json_text, write_all, write_atomic


def _full_disk(monkeypatch):
    """fsync fails as on a full disk (data written to the page cache, refused on the way to the device)."""
    def refuse(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", refuse)


def test_a_failed_write_leaves_the_old_file_and_no_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    write_atomic(target, "old\n")
    _full_disk(monkeypatch)
    with pytest.raises(OutputError, match=r"out\.json: could not be written \(No space left on device\)"):
        write_atomic(target, "new\n" * 10000)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_failed_write_of_a_new_file_leaves_nothing(tmp_path, monkeypatch):
    _full_disk(monkeypatch)
    with pytest.raises(OutputError, match="No space left"):
        write_atomic(tmp_path / "new.json", b"x")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_new_file_is_named():
    with pytest.raises(OutputError, match=r"/proc/x\.json: cannot create a file in /proc"):
        write_atomic("/proc/x.json", "{}")


def test_never_renames_over_a_pipe_or_a_folder(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OutputError, match="pipe: is not a regular file"):
        write_atomic(fifo, "x")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    with pytest.raises(OutputError, match="is a folder"):
        write_atomic(tmp_path, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
def test_never_replaces_a_device_node():
    """`fit --out /dev/full`, run as root, once replaced the device node with a regular file."""
    before = os.stat("/dev/full")
    with pytest.raises(OutputError, match="/dev/full: is not a regular file"):
        write_atomic("/dev/full", "{}")
    after = os.stat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev


def test_a_new_file_gets_a_plain_files_permissions_and_a_replaced_one_keeps_its_own(tmp_path):
    plain = tmp_path / "plain"
    plain.write_bytes(b"x")
    write_atomic(tmp_path / "new", b"x")
    assert (tmp_path / "new").stat().st_mode & 0o777 == plain.stat().st_mode & 0o777  # not mkstemp's 0600
    kept = tmp_path / "private"
    kept.write_bytes(b"old")
    kept.chmod(0o640)
    write_atomic(kept, b"new")
    assert kept.stat().st_mode & 0o777 == 0o640 and kept.read_bytes() == b"new"


def test_a_symbolic_link_is_written_through(tmp_path):
    (tmp_path / "real.json").write_text("old")
    (tmp_path / "link.json").symlink_to("real.json")
    write_atomic(tmp_path / "link.json", "new")
    assert (tmp_path / "link.json").is_symlink() and (tmp_path / "real.json").read_text() == "new"


def test_write_all_writes_the_others_and_names_every_failure(tmp_path, monkeypatch):
    bad = tmp_path / "folder.json"
    bad.mkdir()
    done = []
    writes = [(tmp_path / "a.json", lambda: write_atomic(tmp_path / "a.json", "a")),
              (bad, lambda: write_atomic(bad, "b")),
              (tmp_path / "c.md", lambda: write_atomic(tmp_path / "c.md", "c"))]
    with pytest.raises(OutputError, match=r"1 of 3 outputs not written: .*folder\.json: is a folder"):
        write_all(writes, done=done.append)
    assert done == [tmp_path / "a.json", tmp_path / "c.md"] and (tmp_path / "c.md").read_text() == "c"
    assert write_all(writes[:1]) == [tmp_path / "a.json"]


def test_json_text_is_strict_json():
    assert json_text({"mean": math.nan, "runs": [1.5, math.inf], "n": 0}, indent=None) == \
        '{"mean": null, "runs": [1.5, null], "n": 0}\n'


def test_no_temporary_file_survives_an_interrupt(tmp_path, monkeypatch):
    def interrupted(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(tmp_path / "x.json", "x")
    assert list(tmp_path.iterdir()) == []


# A writer killed mid-write (SIGKILL): run in a child that stops inside the write, then killed.
KILLED_WRITER = """
import os, sys, time
from rooftune import outputs
def stop(fd):
    print("writing", flush=True)
    time.sleep(60)
outputs.os.fsync = stop
outputs.write_atomic(sys.argv[1], "new\\n")
"""


def _age(path: Path, seconds: float) -> None:
    past = path.stat().st_mtime - seconds
    os.utime(path, (past, past))


def test_a_killed_writers_temporary_file_is_removed_by_the_next_write(tmp_path):
    """A SIGKILL mid-write left a hidden .NAME.xxxxxxxx.tmp that no later run removed."""
    import subprocess
    import sys

    target = tmp_path / "tune.json"
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    (left,) = tmp_path.glob(".tune.json.*.tmp")
    other = tmp_path / ".tune.json.abcdefgh.tmp"  # a live writer's, young: kept
    other.write_text("x")
    child.kill()
    child.wait()
    write_atomic(target, "first\n")
    assert left.exists(), "a young temporary file may be a writer's between mkstemp and its lock: kept"
    _age(left, 2 * outputs.STALE_TEMP_S)
    write_atomic(target, "second\n")
    assert not left.exists() and other.exists() and target.read_text() == "second\n"


def test_a_temporary_file_a_live_writer_holds_is_kept_however_old(tmp_path):
    import fcntl

    target = tmp_path / "out.json"
    held = tmp_path / ".out.json.a1b2c3d4.tmp"
    unrelated = tmp_path / ".out.json.other.tmp"  # not a name write_atomic gives
    for path in (held, unrelated):
        path.write_text("x")
        _age(path, 2 * outputs.STALE_TEMP_S)
    with open(held) as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        write_atomic(target, "x")
        assert held.exists()
    assert outputs.remove_stale_temps(target) == [held] and unrelated.exists()
