"""Triton 3.9 against 3.6 on the same GEMM shapes (issue 43): is 3.9's lower ranking the release or its smaller
training set? Both questions asked of the 3.6 ground truth restricted to the shapes the 3.9 folders hold.

    PYTHONPATH=$PWD python3 experiments/release_same_shapes/same_shapes.py > experiments/release_same_shapes/same_shapes.log

1. The 50 held-out shapes of the release subsample, with their 3.6 files (datasets/h200/gemm/heldout), scored by
   `rooftune eval` with the shipped 3.6 residual and route at 1, 5, 10 and 20 configs: the 3.6 figures beside the
   3.9 check on the same shapes.
2. A 3.6 residual fitted (`rooftune fit`, to a scratch file) on the 3.6 files of the 73 shapes the 3.9 training folder
   holds: its cross-validation on train beside the 3.9 residual's (`fit.cv` of the shipped 3.9 file).
Each restricted folder is a temporary copy (the shapes' files, the manifest and the list it names beside it), so
`fit` refuses held-out data by the same manifest; nothing shipped is written.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

H200 = Path("datasets/h200/gemm")
RELEASE = Path("datasets/h200/releases/triton-3.9/gemm")


def restricted(source: Path, like: Path, into: Path) -> Path:
    """A copy of dataset `source` holding only the shape files that dataset `like` holds, under `into`."""
    folder = into / source.name
    (folder / "shapes").mkdir(parents=True)
    names = {p.name for p in (like / "shapes").iterdir()}
    for path in (source / "shapes").iterdir():
        if path.name in names:
            shutil.copy(path, folder / "shapes" / path.name)
    shutil.copy(source / "manifest.json", folder / "manifest.json")
    listed = json.loads((source / "manifest.json").read_text()).get("shapes_file")
    if listed and (source.parent / listed).is_file():
        shutil.copy(source.parent / listed, into / listed)
    print(f"{folder.name}: {len(list((folder / 'shapes').iterdir()))} of {source}'s shapes, those of {like}", flush=True)
    return folder


def rooftune(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "rooftune.tuner.cli.app", *args], capture_output=True, text=True,
                          check=False, env={**os.environ, "COLUMNS": "120"})
    if done.returncode != 0:
        sys.exit(f"rooftune {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        heldout = restricted(H200 / "heldout", RELEASE / "heldout", Path(tmp))
        print("1. the 3.6 files of the release's held-out subsample, the shipped 3.6 residual and route")
        for budget in (1, 5, 10, 20):
            out = rooftune("eval", "gemm", "--data", str(heldout), "--budget", str(budget), "--gpu", "h200",
                           "--methods", "rooftune")
            rows = [line for line in out.splitlines() if "rooftune │" in line or line.strip().startswith("untuned:")]
            print(f"  budget {budget:>2}: " + " | ".join(" ".join(r.split()) for r in rows))
        train = restricted(H200 / "train", RELEASE / "train", Path(tmp))
        print("2. a 3.6 residual fitted on the 3.6 files of the 3.9 training folder's shapes (CV on train)")
        out = rooftune("fit", "gemm", "--data", str(train), "--gpu", "h200", "--out", str(Path(tmp) / "fit36.json"))
        lines = " ".join(out.split()).replace(" CV at", "\nCV at").replace(" wrote ", "\nwrote ").splitlines()
        print("\n".join("  " + line for line in lines if line.startswith("CV at")))
        shipped = json.loads(Path("hwprofiles/residuals/triton-3.9/gemm-NVIDIA_H200.json").read_text())["fit"]["cv"]
        print("  the shipped 3.9 residual's fit.cv (mean / worst-tenth mean): "
              + ", ".join(f"{b}: {v['mean']:.3f} / {v['worst_decile_mean']:.3f}" for b, v in shipped.items()))


if __name__ == "__main__":
    main()
