"""The live check's bookkeeping on the CPU: the shapes it picks, resume, and the fraction it reports."""

import json
import subprocess

from script_module import load_script

from rooftune.candidates import GEMM_SPACE, Trial, legal_configs, parse_gemm_shape
from rooftune.candidates.records import ShapeRecords
from rooftune.eval.datasets.format import shape_id
from rooftune.hwprofiles import load_profile

PROFILE = load_profile("h200")


livecheck = load_script("scripts/device/livecheck.py")


def _records(text):
    shape = parse_gemm_shape(text)
    configs = legal_configs(GEMM_SPACE, shape, PROFILE).configs[:5]
    return ShapeRecords(shape, tuple(Trial(c, 10.0 + i) for i, c in enumerate(configs)))


def test_pick_shapes_is_spread_and_deterministic():
    recs = [_records(f"{m}x256x256") for m in range(1, 41)]
    picked = livecheck.pick_shapes(recs, 4)
    assert len(picked) == 4 and picked == livecheck.pick_shapes(list(reversed(recs)), 4)


def test_main_tunes_cold_resumes_and_reports_the_fraction(tmp_path, monkeypatch, capsys):
    recs = [_records("64x256x256"), _records("128x256x256")]
    monkeypatch.setattr("rooftune.eval.datasets.readers.load_records", lambda path: recs)
    winners = {shape_id(r.shape): r.trials[1].config for r in recs}  # second-fastest recorded wins the tune
    calls = []

    def fake_run(cmd, capture_output, text, env=None):
        calls.append(cmd)
        if "--json" in cmd:
            sid = next(s for s in winners if cmd[cmd.index("--shape") + 1] in s)
            path = cmd[cmd.index("--json") + 1]
            json.dump({"winner": str(winners[sid]), "phases_s": {"total_s": 5.0}}, open(path, "w"))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(livecheck.subprocess, "run", fake_run)
    monkeypatch.setattr(livecheck, "retime", lambda pairs, profile, sms=None: {
        shape_id(r.shape): {"winner_us": 11.0, "best_us": 10.0, "error": None} for r, w, b in pairs})
    assert livecheck.main(["--out", str(tmp_path), "--count", "2"]) == 0
    state = json.loads((tmp_path / "livecheck.json").read_text())
    assert len(state["shapes"]) == 2 and all(e["retime"]["best_us"] == 10.0 for e in state["shapes"].values())
    assert "live fraction mean 0.909" in capsys.readouterr().out
    tunes = [c for c in calls if "--json" in c]
    assert len(tunes) == 2
    calls.clear()
    livecheck.main(["--out", str(tmp_path), "--count", "2"])  # resumed: nothing tuned again
    assert not [c for c in calls if "--json" in c]


def test_tune_arguments_name_each_kernels_shape():
    from rooftune.candidates import AttentionShape, GemmShape

    assert livecheck.tune_args(GemmShape(64, 256, 512, layout="nk")) == ["gemm", "--shape", "64x256x512",
                                                                         "--layout", "nk"]
    assert livecheck.tune_args(AttentionShape(2, 32, 1000, 128, kv_heads=8)) == ["attention", "--shape",
                                                                                 "2x32x1000x128x8"]
    assert livecheck.tune_args(AttentionShape(2, 32, 1000, 64))[2] == "2x32x1000x64"


def test_sms_reaches_every_tune_and_the_retime(tmp_path, monkeypatch):
    recs = [_records("64x256x256")]
    monkeypatch.setattr("rooftune.eval.datasets.readers.load_records", lambda path: recs)
    calls, seen = [], {}

    def fake_run(cmd, capture_output, text, env=None):
        calls.append(cmd)
        if "--json" in cmd:
            json.dump({"winner": str(recs[0].trials[0].config), "phases_s": {}}, open(cmd[cmd.index("--json") + 1], "w"))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    def fake_retime(pairs, profile, sms=None):
        seen["sms"] = sms
        return {shape_id(r.shape): {"winner_us": 10.0, "best_us": 10.0, "error": None} for r, w, b in pairs}

    monkeypatch.setattr(livecheck.subprocess, "run", fake_run)
    monkeypatch.setattr(livecheck, "retime", fake_retime)
    livecheck.main(["--out", str(tmp_path), "--count", "1", "--sms", "66", "--gpu", "h200-sm66"])
    assert calls and all(c[c.index("--sms") + 1] == "66" and c[c.index("--gpu") + 1] == "h200-sm66" for c in calls)
    assert seen["sms"] == 66
