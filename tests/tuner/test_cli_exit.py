"""`rooftune`'s program entry: a command that initialized CUDA exits without Python's teardown, with its
exit code and its output flushed; any other command exits as usual."""

import sys
import types

import pytest

from rooftune.tuner.cli import app as cli


def _run(monkeypatch, code, cuda_initialized):
    exits, printed = [], []
    torch = types.SimpleNamespace(cuda=types.SimpleNamespace(is_initialized=lambda: cuda_initialized))
    monkeypatch.setitem(sys.modules, "torch", torch)

    def app():
        printed.append("done")
        raise SystemExit(code)

    monkeypatch.setattr(cli, "app", app)
    monkeypatch.setattr(cli.os, "_exit", lambda c: exits.append(c))
    import multiprocessing.util

    monkeypatch.setattr(multiprocessing.util, "_run_finalizers", lambda minpriority=None: exits.append("finalizers"))
    return exits, printed


@pytest.mark.parametrize("code", [0, 1, 2])
def test_after_gpu_work_the_process_ends_at_once_with_its_code(monkeypatch, code):
    exits, printed = _run(monkeypatch, code, cuda_initialized=True)
    with pytest.raises(SystemExit):  # only because os._exit is a stand-in here that returns
        cli.main()
    assert printed == ["done"] and exits == ["finalizers", code]


def test_without_gpu_work_the_exit_is_pythons(monkeypatch):
    exits, _ = _run(monkeypatch, 2, cuda_initialized=False)
    with pytest.raises(SystemExit) as raised:
        cli.main()
    assert raised.value.code == 2 and exits == []
