"""The shipped residuals keyed by Triton release (roofline/releases.py): which one ranks under 3.6, 3.7, 3.9 and an
unknown release, checked ones after fitted ones, the routes beside them. The selection tests run on a temporary folder
holding the shipped 3.6 residuals and a 3.7 and a 3.9 one made from them (scaled coefficients, so each is told
apart); the first test checks what is shipped: 3.6 for every kernel, 3.9 for GEMM and fused MoE on the H200."""

import json
import shutil

import pytest

from rooftune.candidates import kernel_spec
from rooftune.hwprofiles import load_profile
from rooftune.roofline import releases
from rooftune.roofline.releases import (
    check_source,
    choose_residual,
    load_residual,
    release_order,
    shipped_releases,
    shipped_residual_path,
)
from rooftune.roofline.residual import ResidualError
from rooftune.roofline.route import load_route
from rooftune.tuner import residual_choice
from rooftune.tuner.routing import route_choice

PROFILE = load_profile("h200")
SPACE = kernel_spec("gemm").space.version
SHIPPED = releases.residuals_root()


def _write(root, release: str, tritons: list[str], scale: float, kernel: str = "gemm", name: str | None = None):
    """A copy of the shipped 3.6 residual of `kernel` into root/triton-`release`/, recording `tritons`, its
    coefficients times `scale`."""
    data = json.loads((SHIPPED / "triton-3.6" / f"{kernel}-NVIDIA_H200.json").read_text())
    data["coefficients"] = {k: v * scale for k, v in data["coefficients"].items()}
    # no neighbour vote: the shipped one's misses were measured against the unscaled coefficients
    data["fit"] = {**data["fit"], "triton": tritons, "data": f"datasets/h200/triton-{release}/{kernel}/train",
                   "vote": None}
    folder = root / f"triton-{release}"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / (name or f"{kernel}-NVIDIA_H200.json")).write_text(json.dumps(data))
    return data


@pytest.fixture
def root(tmp_path, monkeypatch):
    """The shipped 3.6 residuals copied to a temporary folder that selection reads, with a 3.7 and a 3.9 GEMM
    residual beside them (the shipped 3.9 ones are left out: these tests tell residuals apart by their scale)."""
    shutil.copytree(SHIPPED / "triton-3.6", tmp_path / "residuals" / "triton-3.6")
    monkeypatch.setattr(releases, "residuals_root", lambda: tmp_path / "residuals")
    _write(tmp_path / "residuals", "3.7", ["3.7"], 0.5)
    _write(tmp_path / "residuals", "3.9", ["3.9"], 0.25)
    return tmp_path / "residuals"


def _scale(residual) -> float:
    shipped = json.loads((SHIPPED / "triton-3.6" / "gemm-NVIDIA_H200.json").read_text())["coefficients"]
    name = max(shipped, key=lambda n: abs(shipped[n]))
    return residual.coefficients[name] / shipped[name]


@pytest.mark.parametrize(("kernel", "fitted"), [("gemm", ("3.6", "3.9")), ("attention", ("3.6",)),
                                                ("moe", ("3.6", "3.9"))])
def test_the_shipped_residuals_are_filed_by_the_release_they_were_fitted_under(kernel, fitted):
    assert shipped_releases(kernel, PROFILE) == fitted
    space = kernel_spec(kernel).space.version
    for release in fitted:
        residual, line = choose_residual(kernel, PROFILE, space, f"{release}.0")
        assert residual.tritons == (release,) and f"under Triton {release}" in line
        assert f"triton-{release}/{kernel}/train" in residual.fit["data"] or release == "3.6"  # the release's own sweep
        assert shipped_residual_path(kernel, PROFILE, f"{release}.2") == \
            SHIPPED / f"triton-{release}" / f"{kernel}-NVIDIA_H200.json"
    if fitted == ("3.6",):  # a release with none of its own ranks by the model alone
        assert choose_residual(kernel, PROFILE, space, "3.9.0")[0] is None
    assert choose_residual(kernel, PROFILE, space, "3.7.1")[0] is None  # none is fitted or checked under 3.7


@pytest.mark.parametrize(("triton", "scale"), [("3.6.0", 1.0), ("3.7.1", 0.5), ("3.9.0", 0.25), ("3.9.1+git", 0.25)])
def test_each_release_ranks_with_the_residual_fitted_under_it(root, triton, scale):
    residual, line = choose_residual("gemm", PROFILE, SPACE, triton)
    assert residual is not None and _scale(residual) == pytest.approx(scale)
    release = triton[:3]
    assert residual.tritons == (release,) and f"under Triton {release}" in line
    chosen, note = residual_choice.residual_choice(kernel_spec("gemm"), PROFILE, triton)  # what a live tune takes
    assert _scale(chosen) == pytest.approx(scale) and note.startswith("the model ×")


def test_an_unknown_release_ranks_by_the_model_alone_and_says_which_releases_have_residuals(root):
    assert shipped_releases("gemm", PROFILE) == ("3.6", "3.7", "3.9")
    residual, line = choose_residual("gemm", PROFILE, SPACE, "3.8.0")
    assert residual is None
    assert "fitted or checked under Triton 3.8" in line and "fitted under Triton 3.6, 3.7, 3.9" in line
    assert "rooftune fit gemm --out shipped" in line and "rooftune fit gemm --check shipped" in line
    chosen, note = residual_choice.residual_choice(kernel_spec("gemm"), PROFILE, "3.8.0")
    assert chosen is None and note.startswith("the model alone: ") and "3.6, 3.7, 3.9" in note
    assert choose_residual("moe", PROFILE, kernel_spec("moe").space.version, "3.9.0")[0] is None  # no MoE one for 3.9


def test_a_residual_checked_under_a_release_ranks_there_after_one_fitted_under_it(root):
    _write(root, "3.6", ["3.6", "3.8"], 1.0)  # `fit --check` found the 3.6 residual ranks well under 3.8
    assert _scale(choose_residual("gemm", PROFILE, SPACE, "3.8.0")[0]) == pytest.approx(1.0)
    _write(root, "3.7", ["3.7", "3.8"], 0.5)  # a newer release's, checked there too, comes first
    assert _scale(choose_residual("gemm", PROFILE, SPACE, "3.8.0")[0]) == pytest.approx(0.5)
    _write(root, "3.8", ["3.8"], 0.125)  # and one fitted under 3.8 before both
    assert _scale(choose_residual("gemm", PROFILE, SPACE, "3.8.0")[0]) == pytest.approx(0.125)


def test_no_release_known_takes_the_newest_and_releases_sort_as_versions(root):
    assert _scale(load_residual("gemm", PROFILE)) == pytest.approx(0.25)  # data that name no Triton: 3.9's
    _write(root, "3.10", ["3.10"], 2.0)
    assert shipped_releases("gemm", PROFILE) == ("3.6", "3.7", "3.9", "3.10") and release_order("3.10") > (3, 9)
    assert _scale(load_residual("gemm", PROFILE)) == pytest.approx(2.0)


def test_another_space_ranks_by_the_model_alone_whatever_the_release(root):
    residual, line = choose_residual("gemm", PROFILE, "gemm-000000000000", "3.9.0")
    assert residual is None and "these measurements are gemm-000000000000" in line


def test_a_residual_in_another_releases_folder_is_refused(root):
    _write(root, "3.9", ["3.7"], 0.5)
    with pytest.raises(ResidualError, match="fitted under Triton 3.7, in the folder of 3.9; move it to"):
        choose_residual("gemm", PROFILE, SPACE, "3.9.0")


def test_fit_check_shipped_takes_the_newest_release_other_than_the_datas(root):
    assert check_source("gemm", PROFILE, "3.9.0") == root / "triton-3.7" / "gemm-NVIDIA_H200.json"
    assert check_source("gemm", PROFILE, "3.10.0") == root / "triton-3.9" / "gemm-NVIDIA_H200.json"
    assert check_source("moe", PROFILE, "3.6.0") is None  # only its own release has one


def test_the_route_of_the_running_release_is_read_from_its_folder(root):
    spec = kernel_spec("gemm")
    shipped = load_residual("gemm", PROFILE, "3.6.0")
    route, line = route_choice(spec, PROFILE, shipped, "3.6.0")
    assert route is not None and route.fit["triton"] == ["3.6"]
    route, line = route_choice(spec, PROFILE, None, "3.9.0")
    assert route is None and line == "no route is fitted for gemm on NVIDIA H200 under Triton 3.9"
    shutil.copy(root / "triton-3.6" / "route-gemm-NVIDIA_H200.json", root / "triton-3.9")
    assert load_route("gemm", PROFILE, release="3.9") is not None
    route, line = route_choice(spec, PROFILE, None, "3.9.0")  # a 3.6 route in 3.9's folder still says 3.6
    assert route is None and "fitted under Triton 3.6, not 3.9" in line
