"""Which residual ranks for the H100, chosen on the H100's training shapes only (issue 56, item 3).

Four candidates, each scored on datasets/h100/KERNEL/train at 1, 5, 10, 20 configs (mean / worst-decile mean):
(a) the model alone from the probed profile; (b) the H200's shipped residual carried over unchanged (its neighbour
vote left behind, as `fit --check` carries it); (c) a residual fitted on the H100's training shapes only;
(d) one fitted on both GPUs' training shapes (a Hopper residual: `fit --also`). (a) and (b) fit nothing on the H100,
so their scores over all its training shapes are honest; (c) and (d) are cross-validated over the same 5 folds of
the H100's shapes (the H200's shapes sit in every fold's fit of (d), never scored). The choice is the fit's own
objective (mean + worst-decile mean, summed over the budgets). Held-out data are never read (refused).
Each candidate's residual is written to --out (for the held-out scoring after the choice, `rooftune eval
--residual PATH`), and the ranking of the datasheet profile against the probed one is printed (the model's
per-shape Spearman, and the model alone's scores).

    PYTHONPATH=$PWD python3 experiments/h100_transfer/choose.py --kernel attention --out /tmp/h100fit
"""
import argparse
from pathlib import Path

from rooftune.eval.datasets.format import read_manifest
from rooftune.eval.datasets.readers import load_records
from rooftune.hwprofiles import load_profile
from rooftune.roofline.releases import shipped_residual_path
from rooftune.roofline.residual import read_residual, write_residual
from rooftune.tuner.evaluation import evaluate
from rooftune.tuner.fitting import (
    CV_BUDGETS,
    AlsoData,
    fit_kernel,
    fit_shapes_from_records,
    fitted_residual,
    objective,
    refuse_held_out,
)
from rooftune.tuner.search.strategies import rooftune_strategy

TRITON = "3.6.0"
DATASHEET = "datasets/h100/probe/h100_sxm_datasheet.json"


def replayed(records, profile, residual) -> dict:
    """Per budget, the summary of `rooftune`'s search with `residual` (None: the model alone) over `records`."""
    methods = {"m": rooftune_strategy(residual)}
    return {b: evaluate(records, b, profile, methods)["methods"]["m"] for b in CV_BUDGETS}


def spearman(records, profile) -> float:
    return evaluate(records, 1, profile, {"m": rooftune_strategy(None)})["spearman"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernel", required=True, choices=("gemm", "attention"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    k = args.kernel
    h100_dir, h200_dir = Path(f"datasets/h100/{k}/train"), Path(f"datasets/h200/{k}/train")
    for d in (h100_dir, h200_dir):
        refuse_held_out(read_manifest(d), str(d))
    h100, h200 = load_profile("h100_sxm"), load_profile("h200")
    records = load_records(h100_dir, kernel=k)
    shapes = fit_shapes_from_records(records)
    manifest = read_manifest(h100_dir)
    args.out.mkdir(parents=True, exist_ok=True)

    carried = read_residual(shipped_residual_path(k, h200, TRITON)).without_vote()
    write_residual(carried, args.out / f"{k}-carried.json")
    rows = {"(a) model alone": replayed(records, h100, None), "(b) H200's carried": replayed(records, h100, carried)}
    also = [AlsoData(fit_shapes_from_records(load_records(h200_dir, kernel=k)), h200, str(h200_dir))]
    for label, name, extra in (("(c) H100's own", "h100", ()), ("(d) both GPUs'", "hopper", also)):
        report = fit_kernel(k, shapes, h100, str(h100_dir), also=extra)
        write_residual(fitted_residual(report, shapes, manifest), args.out / f"{k}-{name}.json")
        rows[label] = report.cv

    print(f"{k}: {len(shapes)} H100 training shapes; mean / worst-decile mean at {', '.join(map(str, CV_BUDGETS))} "
          f"configs; objective = their sum ((c), (d) cross-validated)")
    for label, cv in rows.items():
        cells = "  ".join(f"{cv[b]['mean']:.3f} / {cv[b]['worst_decile_mean']:.3f}" for b in CV_BUDGETS)
        print(f"  {label:<20} {cells}   objective {objective(cv):.4f}")
    chosen = max(rows, key=lambda label: objective(rows[label]))
    print(f"chosen on train: {chosen}")

    sheet = load_profile(DATASHEET)
    print("the model's ranking, datasheet profile against probed (mean per-shape Spearman; model alone at 1 / 20):")
    for label, folder in (("train", h100_dir), ("held-out (no fit reads it)", Path(f"datasets/h100/{k}/heldout"))):
        if not (folder / "manifest.json").is_file():
            continue
        recs = load_records(folder, kernel=k)
        for pname, prof in (("datasheet", sheet), ("probed", h100)):
            s = replayed(recs, prof, None)
            print(f"  {label:<27} {pname:<9} Spearman {spearman(recs, prof):.4f}   "
                  f"model alone {s[1]['mean']:.3f} / {s[1]['worst_decile_mean']:.3f} at 1, "
                  f"{s[20]['mean']:.3f} / {s[20]['worst_decile_mean']:.3f} at 20")


if __name__ == "__main__":
    main()
