"""scripts/prebuild_legal_backfill.py on the CPU: what it builds is the legal backfill's plan, and bad input is a
clear error."""

from script_module import load_script

from rooftune.candidates import GemmShape
from rooftune.eval.sweeping import backfill
from rooftune.hwprofiles import load_profile

script = load_script("scripts/prebuild_legal_backfill.py")


def test_it_builds_the_plans_binaries_and_refuses_what_is_not_a_dataset(tmp_path, monkeypatch, capsys):
    import json

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps([{"m": 1024, "n": 2560, "k": 2048, "layout": "nk"}]))
    assert script.main(["--shapes", str(shapes), "--data", str(tmp_path / "none"), "--gpu", "h200-sm66",
                        "--cache", str(tmp_path / "c")]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    shape = GemmShape(1024, 2560, 2048, "nk")
    plan = {shape: backfill.legal_configs(backfill.GEMM_SPACE, shape, load_profile("h200-sm66")).configs[:3]}
    seen = {}
    monkeypatch.setattr(script, "legal_backfill_plan", lambda root, profile, listed: seen.update(
        root=root, profile=profile.name, listed=listed) or plan)
    monkeypatch.setattr(script, "build_and_pack", lambda jobs, cache, profile, **kw: seen.update(
        jobs=jobs, cache=cache, **kw) or type("S", (), {"failed": {}})())
    assert script.main(["--shapes", str(shapes), "--data", "DIR", "--gpu", "h200-sm66", "--cache", "C",
                        "--tar", "T.tar.gz"]) == 0
    assert seen["root"] == "DIR" and seen["profile"] == "h200-sm66" and seen["listed"] == [shape]
    assert seen["cache"] == "C" and seen["tar"] == "T.tar.gz"
    tile = ("BLOCK_M", "BLOCK_N", "BLOCK_K")
    assert seen["jobs"] and all(j.shape == shape for j in seen["jobs"])  # the plan's configs' binaries, no others
    assert ({(*(j.config[p] for p in tile), j.config.num_warps, j.config.num_stages) for j in seen["jobs"]}
            == {(*(c[p] for p in tile), c.num_warps, c.num_stages) for c in plan[shape]})
    assert "1 shapes to backfill" in capsys.readouterr().out
