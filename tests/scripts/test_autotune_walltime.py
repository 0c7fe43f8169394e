"""scripts/device/autotune_walltime.py on the CPU, its first calls faked: each kernel's two modes side by side in the
file, a kernel already there skipped (a later call resumes), `--seconds` starting no kernel the time left cannot
cover, the summary; importing the script loads neither torch nor Triton."""

import json

from script_module import gpu_stack_after_import, load_script

wt = load_script("scripts/device/autotune_walltime.py")


def test_importing_the_script_loads_no_gpu_stack():
    assert gpu_stack_after_import("scripts/device/autotune_walltime.py") == (False, False)


def test_each_kernel_is_timed_once_in_both_modes_and_a_rerun_resumes(tmp_path, monkeypatch, capsys):
    now, calls = [0.0], []

    def fake_child(mode, name, budget, next_keys=0, warm_up_s=0.0):
        calls.append((mode, name))
        now[0] += 30.0
        return {"kernel": name, "shape": {}, "configs": 40, "mode": mode, "choice": "", "choice_us": 10.0,
                "first_call_s": 20.0 if mode == "triton" else 4.0}

    monkeypatch.setattr(wt, "run_child", fake_child)
    out = tmp_path / "suite" / "walltime.jsonl"
    # the first kernel takes 60 s; 100 s leave 40 for the second, which needs ~60: not started
    assert len(wt.measure(["softmax", "argmax", "rotary"], str(out), 5, 100, [], clock=lambda: now[0])) == 2
    assert calls == [("triton", "softmax"), ("rooftune", "softmax")]
    assert "argmax: not started" in capsys.readouterr().out
    wt.main(["--out", str(out), "--kernels", "softmax,argmax,rotary"])
    assert calls[2:] == [("triton", "argmax"), ("rooftune", "argmax"), ("triton", "rotary"), ("rooftune", "rotary")]
    assert len(out.read_text().splitlines()) == 6 and json.loads(out.read_text().splitlines()[0])["mode"] == "triton"
    summary = capsys.readouterr().out
    assert summary.count("= 5.0x") == 3 and "softmax (40 configs)" in summary


def test_a_failing_first_call_is_an_error_row_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    class Done:
        def __init__(self, code, out, err):
            self.returncode, self.stdout, self.stderr = code, out, err

    def fake_run(command, **kw):
        mode, name = command[-4], command[-3]
        if name == "softmax" and mode == "rooftune":
            return Done(1, "", "Traceback (most recent call last):\n  ...\nRuntimeError: out of resources")
        row = {"kernel": name, "shape": {}, "configs": 40, "mode": mode, "choice": "", "choice_us": 1.0,
               "first_call_s": 2.0}
        return Done(0, json.dumps(row) + "\n", "")

    monkeypatch.setattr(wt.subprocess, "run", fake_run)
    out = tmp_path / "walltime.jsonl"
    rows = wt.measure(["softmax", "argmax"], str(out), 5, float("inf"), [])
    failed = "exit 1: Traceback (most recent call last): | ... | RuntimeError: out of resources"
    assert [r.get("error", "") for r in rows] == ["", failed, "", ""]
    wt.main(["--out", str(out), "--kernels", "softmax,argmax"])
    summary = capsys.readouterr().out
    assert "softmax: failed (rooftune: exit 1:" in summary and "argmax (40 configs)" in summary


def test_a_first_call_past_its_time_is_an_error_row(monkeypatch):
    def too_slow(command, **kw):
        raise wt.subprocess.TimeoutExpired(command, kw["timeout"])

    monkeypatch.setattr(wt.subprocess, "run", too_slow)
    assert wt.run_child("triton", "softmax", 5, timeout_s=3) == {"kernel": "softmax", "mode": "triton",
                                                                  "error": "no first call within 3 s"}


def test_unknown_kernels_are_refused_and_report_measures_nothing(tmp_path, monkeypatch, capsys):
    import pytest

    monkeypatch.setattr(wt, "run_child", lambda *a: (_ for _ in ()).throw(AssertionError("measured")))
    out = tmp_path / "walltime.jsonl"
    with pytest.raises(SystemExit) as stop:
        wt.main(["--out", str(out), "--kernels", "softmax,nope"])
    assert stop.value.code == 2 and "not suite kernels: nope" in capsys.readouterr().err and not out.exists()
    rows = [{"kernel": "softmax", "shape": {}, "configs": 40, "mode": m, "choice": "", "choice_us": 1.0,
             "first_call_s": s} for m, s in (("triton", 9.0), ("rooftune", 3.0))]
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    wt.main(["--out", str(out), "--report"])
    assert "softmax (40 configs): first call 9.0 s ÷ 3.0 s = 3.0x" in capsys.readouterr().out


def test_a_call_with_less_time_than_the_files_longest_kernel_starts_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(wt, "run_child", lambda *a: (_ for _ in ()).throw(AssertionError("started")))
    done = [{"kernel": "softmax", "mode": m, "first_call_s": s} for m, s in (("triton", 50.0), ("rooftune", 20.0))]
    assert wt.longest_kernel(done) == 70.0 and wt.longest_kernel([]) == wt.FIRST_KERNEL_S
    assert wt.measure(["argmax"], str(tmp_path / "w.jsonl"), 5, 65, done) == []
    assert "argmax: not started, 65 s left, ~70 s needed" in capsys.readouterr().out
    assert wt.measure(["argmax"], str(tmp_path / "w.jsonl"), 5, 50, []) == []  # none timed yet: 60 s assumed


def test_further_keys_are_asked_of_the_child_and_summarized(tmp_path, monkeypatch, capsys):
    commands = []

    class Done:
        returncode, stderr = 0, ""

        def __init__(self, mode, name):
            further = [{"shape": {}, "call_s": 6.0 if mode == "triton" else 0.5 * k, "phases_s": {}, "choice": "",
                        "choice_us": 1.0} for k in (1, 2)]
            self.stdout = json.dumps({"kernel": name, "shape": {}, "configs": 40, "mode": mode, "choice": "",
                                      "choice_us": 1.0, "first_call_s": 2.0, "next_calls": further}) + "\n"

    def fake_run(command, **kw):
        commands.append(command)
        return Done(command[-4], command[-3])

    monkeypatch.setattr(wt.subprocess, "run", fake_run)
    out = tmp_path / "walltime.jsonl"
    wt.main(["--out", str(out), "--kernels", "softmax", "--next-keys", "2"])
    assert all(c[c.index("--next-keys") + 1] == "2" for c in commands) and len(commands) == 2
    assert all(c[c.index("--warm-up") + 1] == "0.0" for c in commands)
    summary = capsys.readouterr().out
    assert "further keys: 6.00 s ÷ 0.50 s = 12.0x" in summary and "2 further keys: 8.5x less (min 6.0x)" in summary
    # the kernel's seconds count its further keys: the next --seconds budget plans for them
    assert wt.longest_kernel(wt.done_rows(str(out))) == 2 * 2.0 + 12.0 + 1.5
