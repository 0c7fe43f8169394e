"""Building a GPU's Triton cache on the CPU: one job per binary, compiles for sm_90 in spawned workers
(outside this process's interpreter), failures as data, cache hits on a rebuild, pack and unpack
into another dir (gzip or xz), the warnings where the unpacking Triton would key binaries otherwise, and the
CLI's errors."""

import json
import tarfile
from pathlib import Path

import pytest
from triton.backends.compiler import GPUTarget
from triton.runtime.driver import driver

from rooftune.candidates import GEMM_SPACE, Config, GemmShape, legal_configs
from rooftune.candidates.tutorial import gemm_baseline_extras
from rooftune.hwprofiles import load_profile
from rooftune.kernels.gemm import specialization_key
from rooftune.kernels.harness import prebuild as pb

H200 = load_profile("h200")
H200_PROFILE = "h200"
TILE = ("BLOCK_M", "BLOCK_N", "BLOCK_K", "num_warps", "num_stages")


def binary(shape, config):
    return (specialization_key(shape), config["FIXUP"], *(config[p] for p in TILE))


def test_binary_jobs_one_per_binary():
    decode, prefill = GemmShape(16, 256, 256), GemmShape(64, 256, 256)  # one specialization group
    big = GemmShape(4096, 4096, 4096)                                      # no split-K config is legal
    unaligned = GemmShape(16, 250, 256)                                    # ALIGN_N 2: another group
    # M > FIXUP_MAX_M: split-K sums in the reduction kernel only
    mid, mid_unaligned = GemmShape(128, 256, 256), GemmShape(128, 250, 256)
    shapes = [decode, prefill, big, unaligned, mid, mid_unaligned]
    jobs = pb.binary_jobs(shapes, H200)
    gemm_jobs = [j for j in jobs if j.kind == "gemm"]
    expected = {binary(s, c) for s in shapes for c in legal_configs(GEMM_SPACE, s, H200).configs
                + gemm_baseline_extras(s, legal_configs(GEMM_SPACE, s, H200).configs)}
    assert len(gemm_jobs) == len(expected) == len({binary(j.shape, j.config) for j in gemm_jobs})
    assert {binary(j.shape, j.config) for j in gemm_jobs} == expected
    # SPLIT_K is a runtime integer: one binary serves every split; a FIXUP binary (decode, where split-K
    # sums in the GEMM kernel) is compiled with a split of its own
    assert all((j.config["SPLIT_K"] > 1) == (j.config["FIXUP"] == 1) for j in gemm_jobs)
    assert any(j.config["FIXUP"] == 1 for j in gemm_jobs)
    # decode and prefill share a group: prefill adds only tiles decode cannot use
    assert len(pb.binary_jobs([decode, prefill], H200)) < len(pb.binary_jobs([decode], H200)) + len(
        pb.binary_jobs([prefill], H200))
    assert pb.binary_jobs([decode, decode], H200) == pb.binary_jobs([decode], H200)
    # one reduction per reduce key of the shapes with a split-K config that sums in the reduction
    # kernel (not M <= 32: FIXUP only; M = 64 sums both ways, so it comes first in mid's key), after
    # every GEMM job
    reduces = [j for j in jobs if j.kind == "reduce"]
    assert pb.reduce_key(prefill) == pb.reduce_key(mid)
    assert [j.shape for j in reduces] == [prefill, mid_unaligned]
    assert not any(j.kind == "reduce" for j in pb.binary_jobs([decode, unaligned], H200))
    assert all(j.config["SPLIT_K"] > 1 for j in reduces) and jobs[-2:] == reduces
    assert pb.reduce_key(decode) == pb.reduce_key(GemmShape(7, 256, 4100, "nk"))  # K and layout do not matter
    limited = pb.binary_jobs([big], H200, max_configs=3)
    assert len(limited) == 3 and not any(j.kind == "reduce" for j in limited)


def test_offline_target_answers_the_driver_and_restores_it(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    before = driver._active
    with pb.offline_target(arch=80, warp_size=32) as target:
        assert driver._active is target
        assert target.get_current_target() == GPUTarget("cuda", 80, 32)
        assert (target.get_current_device(), target.get_current_stream()) == (0, 0)
    assert driver._active is before


def test_the_interpreter_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(pb.InterpreterActive, match="TRITON_INTERPRET"):
        with pb.offline_target():
            pass
    with pytest.raises(pb.InterpreterActive, match="workers > 0"):
        pb.prebuild([], tmp_path, workers=0)


def files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under root with its inode and mtime: Triton writes a cache file anew (os.replace)."""
    return {str(p.relative_to(root)): (p.stat().st_ino, p.stat().st_mtime_ns) for p in root.rglob("*")
            if p.is_file()}


def test_build_rebuild_pack_unpack(tmp_path, monkeypatch, capsys):
    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    shape = GemmShape(16, 64, 64)
    small = Config.make(4, 2, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)
    wide = Config.make(4, 2, BLOCK_M=16, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)
    split = Config.make(4, 2, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, SPLIT_K=2)
    bad = Config.make(4, 2, BLOCK_M=24, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)  # arange: not a power of 2
    jobs = [pb.BinaryJob(shape, small), pb.BinaryJob(shape, wide), pb.BinaryJob(shape, bad),
            pb.BinaryJob(shape, split, "reduce")]
    built = tmp_path / "built"
    summary = pb.prebuild(jobs, built, workers=2, arch=90)
    assert (summary.jobs, summary.compiled) == (4, 3)
    assert list(summary.failed) == [jobs[2]] and summary.failed[jobs[2]].startswith("CompilationError")
    entries = {p.parent.name for p in built.glob("*/*.cubin")}
    assert len(entries) == 3  # two GEMMs and the reduction (the split job's GEMM is the small one)
    assert {p.name for p in built.glob("*/*.cubin")} == {"_gemm_kernel.cubin", "_splitk_reduce_kernel.cubin"}

    before = files(built)
    again = pb.prebuild(jobs[:2] + jobs[3:], built, workers=2, arch=90)
    assert again.compiled == 3 and files(built) == before  # loads: nothing compiled or written

    tar = tmp_path / "cache.tar.gz"
    assert pb.pack(built, tar) == 3
    with tarfile.open(tar) as t:
        names = t.getnames()
        manifest = json.load(t.extractfile(pb.MANIFEST))
    assert all(n.endswith((".cubin", ".json")) for n in names)  # no IR, no PTX
    assert manifest["cache_dir"] == str(built.resolve()) and manifest["archs"] == [90]

    moved = tmp_path / "elsewhere"
    assert pb.main(["unpack", str(tar), "--cache", str(moved)]) is None
    assert "3 binaries" in capsys.readouterr().out
    groups = list(moved.glob("*/__grp__*.json"))
    assert len(groups) == 3
    for group in groups:
        children = json.loads(group.read_text())["child_paths"]
        assert {Path(p).suffix for p in children.values()} == {".cubin", ".json"}
        assert all(Path(p).parent == group.parent and Path(p).is_file() for p in children.values())
    unpacked = files(moved)
    assert pb.prebuild(jobs[:2] + jobs[3:], moved, workers=2, arch=90).compiled == 3
    assert files(moved) == unpacked  # the stripped entries are cache hits

    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "default"))
    done = pb.unpack(tar)
    assert done.cache_dir == str((tmp_path / "default").resolve()) and done.groups == 3 and done.same_triton
    assert done.warnings == () and manifest["ptxas"] == {"90": pb.ptxas_key(90)} and manifest["ptxas"]["90"]


def run_cli(argv, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        pb.main(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    return err


def test_cli_errors(tmp_path, capsys):
    build = ["build", "--gpu", "h200", "--cache", str(tmp_path / "c")]
    assert "no such file" in run_cli([*build, "--shapes", str(tmp_path / "missing.json")], capsys)
    shapes = tmp_path / "shapes.json"
    shapes.write_text('[{"m": 16, "n": 64}]')
    assert "must be an object with keys m, n, k" in run_cli([*build, "--shapes", str(shapes)], capsys)
    shapes.write_text('[{"m": 16, "n": 64, "k": 64}]')
    assert "unknown GPU profile 'h900'" in run_cli(["build", "--gpu", "h900", "--cache", "c", "--shapes",
                                                    str(shapes)], capsys)
    assert "not a readable tar.gz" in run_cli(["unpack", str(shapes)], capsys)
    foreign = tmp_path / "foreign.tar.gz"
    with tarfile.open(foreign, "w:gz") as t:
        t.add(shapes, arcname="shapes.json")
    assert "no PREBUILD.json" in run_cli(["unpack", str(foreign)], capsys)
    assert not (tmp_path / "c").exists()


@pytest.mark.slow  # three prebuilds and a CLI build through ptxas: ~8 s
def test_a_binary_over_the_gpus_shared_memory_is_a_failure_with_its_bytes(tmp_path, capsys):
    """It would not launch on that GPU: prebuild records it (the binary is still cached), the CLI checks
    against the profile's per-block limit and says so, and not where --arch names another architecture."""
    import triton

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    shape = GemmShape(16, 64, 64)
    # sm_90, BLOCK_M 16: num_stages - 1 buffers of (16 + BLOCK_N) x 32 bf16: 3,072 and 5,120 bytes
    small = Config.make(4, 2, BLOCK_M=16, BLOCK_N=32, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)
    wide = Config.make(4, 2, BLOCK_M=16, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)
    jobs = [pb.BinaryJob(shape, small), pb.BinaryJob(shape, wide)]
    summary = pb.prebuild(jobs, tmp_path / "c", workers=2, arch=90, smem_limit=4096)
    assert (summary.jobs, summary.compiled) == (2, 1) and list(summary.failed) == [jobs[1]]
    assert summary.failed[jobs[1]].startswith("OverSharedMemory: 5120 bytes of shared memory, over the GPU's 4096")
    assert pb.prebuild(jobs, tmp_path / "c", workers=2, arch=90).compiled == 2  # no limit: both

    shapes = tmp_path / "shapes.json"
    shapes.write_text('[{"m": 16, "n": 64, "k": 64}]')
    tiny = {**json.loads((Path(pb.__file__).parents[2] / "hwprofiles" / "h200.json").read_text()),
            "name": "tiny", "smem_per_block_bytes": 1024}
    profile = tmp_path / "tiny.json"
    profile.write_text(json.dumps(tiny))
    build = ["build", "--shapes", str(shapes), "--gpu", str(profile), "--cache", str(tmp_path / "c"),
             "--max-configs", "2", "--workers", "2"]
    pb.main(build)
    out = capsys.readouterr().out
    assert out.count("OverSharedMemory") == 2 and "compiled 0 of 2, failed 2" in out
    pb.main([*build, "--arch", "80"])  # another architecture: the profile's limit is not its
    out = capsys.readouterr().out
    assert "compiled 2 of 2, failed 0" in out and "every binary fits" not in out
    pb.main([*build[:4], H200_PROFILE, *build[5:]])
    assert "every binary fits NVIDIA H200's 232448 bytes of shared memory per block" in capsys.readouterr().out


def test_attention_binaries_one_per_specialization_and_config_compiled_by_the_cli(tmp_path, capsys):
    import triton

    from rooftune.candidates import ATTENTION_SPACE, AttentionShape
    from rooftune.kernels import attention

    long_seq, short_seq = AttentionShape(2, 32, 4096, 128), AttentionShape(1, 8, 1000, 128)  # one specialization
    other = AttentionShape(2, 32, 4096, 64)  # head_dim is specialized
    jobs = pb.binary_jobs([long_seq, short_seq, other, GemmShape(16, 64, 64)], H200)
    attention_jobs = [j for j in jobs if j.kind == "attention"]
    expected = {(attention.specialization_key(s), c) for s in (long_seq, short_seq, other)
                for c in legal_configs(ATTENTION_SPACE, s, H200).configs}
    assert {(attention.specialization_key(j.shape), j.config) for j in attention_jobs} == expected
    assert len(attention_jobs) == len(expected) and jobs[-len(attention_jobs):] == attention_jobs  # after the GEMM's

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    shapes = tmp_path / "attention.json"
    shapes.write_text('[{"batch": 1, "heads": 2, "seq": 256, "head_dim": 64}]')
    pb.main(["build", "--kernel", "attention", "--shapes", str(shapes), "--gpu", "a100_sxm4_80gb", "--cache",
             str(tmp_path / "c"), "--max-configs", "2", "--workers", "2"])
    out = capsys.readouterr().out
    assert "1 shapes -> 2 binaries for sm_80" in out and "compiled 2 of 2, failed 0" in out
    assert "every binary fits NVIDIA A100-SXM4-80GB's" in out
    assert {p.name for p in (tmp_path / "c").glob("*/*.cubin")} == {"_attn_fwd.cubin"}
    # a GEMM list read as attention shapes is refused, with the file named
    gemm_list = tmp_path / "gemm.json"
    gemm_list.write_text('[{"m": 16, "n": 64, "k": 64}]')
    with pytest.raises(SystemExit):
        pb.main(["build", "--kernel", "attention", "--shapes", str(gemm_list), "--gpu", "h200", "--cache", "c"])
    assert "gemm.json" in capsys.readouterr().err


def test_moe_binaries_one_per_specialization_and_tile_compiled_by_the_cli(tmp_path, capsys):
    import triton

    from rooftune.candidates import MOE_SPACE, MoeShape
    from rooftune.kernels import moe

    decode, prefill = MoeShape(64, 6, 2048, 1408, 1), MoeShape(64, 6, 2048, 1408, 4096)  # one specialization
    down = MoeShape(64, 6, 2048, 1408, 1, "down")
    jobs = [j for j in pb.binary_jobs([decode, prefill, down, GemmShape(16, 64, 64)], H200) if j.kind == "moe"]
    tile = [p for p in MOE_SPACE.names if p != "GROUP_SIZE_M"]  # GROUP_SIZE_M is a run-time integer
    expected = {(moe.specialization_key(s), *(c[p] for p in tile)) for s in (decode, prefill, down)
                for c in legal_configs(MOE_SPACE, s, H200).configs}
    assert {(moe.specialization_key(j.shape), *(j.config[p] for p in tile)) for j in jobs} == expected
    assert len(jobs) == len(expected)

    if not (Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas").is_file():
        pytest.skip("this triton has no bundled ptxas")
    shapes = tmp_path / "moe.json"
    shapes.write_text('[{"experts": 8, "topk": 2, "hidden": 256, "intermediate": 128, "tokens": 4, "gemm": "down"}]')
    pb.main(["build", "--kernel", "moe", "--shapes", str(shapes), "--gpu", "h200", "--cache", str(tmp_path / "c"),
             "--max-configs", "2", "--workers", "2"])
    out = capsys.readouterr().out
    assert "1 shapes -> 2 binaries for sm_90" in out and "compiled 2 of 2, failed 0" in out
    assert {p.name for p in (tmp_path / "c").glob("*/*.cubin")} == {"_moe_kernel.cubin"}


def fake_cache(root: Path, entries: int = 3) -> Path:
    """A Triton cache as a build leaves it, without compiling: per entry a binary, its metadata (sm_90), IR that
    `pack` leaves out, and the group file naming the three by absolute path."""
    for i in range(entries):
        entry = root / f"KEY{i}"
        entry.mkdir(parents=True)
        (entry / "k.cubin").write_bytes(bytes(range(256)) * 64 + bytes([i]))
        (entry / "k.json").write_text(json.dumps({"name": "k", "target": {"backend": "cuda", "arch": 90}}))
        (entry / "k.ttir").write_text("module {}")
        children = {name: str(entry / name) for name in ("k.cubin", "k.json", "k.ttir")}
        (entry / "__grp__k.json").write_text(json.dumps({"child_paths": children}))
    return root


def contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


@pytest.mark.parametrize("suffix, magic", [(".tar.xz", b"\xfd7zXZ\x00"), (".tar.gz", b"\x1f\x8b")])
def test_pack_and_unpack_round_trip_in_xz_and_gzip(tmp_path, capsys, suffix, magic):
    """The archive's compression follows its name; unpack reads either into another dir, binaries and metadata
    byte for byte, group files pointing there, and says the binaries are keyed as built."""
    built = fake_cache(tmp_path / "built")
    tar = tmp_path / f"cache{suffix}"
    assert pb.pack(built, tar) == 3
    assert tar.read_bytes()[:len(magic)] == magic
    manifest = manifest_of(tar)
    assert manifest["archs"] == [90] and manifest["entries"] == 3 and manifest["kernel_sources"] == pb.kernel_sources()
    assert set(manifest["kernel_sources"]) >= {"rooftune.kernels.gemm", "rooftune.kernels.moe"}
    assert manifest["ptxas"] == {"90": pb.ptxas_key(90)} and manifest["cache_env"] == pb.cache_env()
    assert manifest["fp_fusion"] is pb.fp_fusion() and manifest["triton_key_sha256"] == pb.triton_key_sha256()

    moved = tmp_path / "moved"
    pb.main(["unpack", str(tar), "--cache", str(moved)])
    captured = capsys.readouterr()
    assert captured.out.strip().endswith("keyed as built (triton, ptxas, environment, kernels): cache hits")
    assert captured.err == ""
    expected = {name: data for name, data in contents(built).items() if not name.endswith((".ttir", "grp__k.json"))}
    assert {n: d for n, d in contents(moved).items() if "__grp__" not in n} == expected
    for group in moved.glob("*/__grp__k.json"):
        assert json.loads(group.read_text())["child_paths"] == {n: str(group.parent / n) for n in ("k.cubin", "k.json")}


def manifest_of(tar: Path) -> dict:
    with tarfile.open(tar) as t:
        return json.load(t.extractfile(pb.MANIFEST))


PTXAS_88 = ("ptxas: NVIDIA (R) Ptx optimizing assembler\nCuda compilation tools, release 13.0, V13.0.88\n"
            "Build cuda_13.0.r13.0/compiler.36424714_0\n-90")


def test_unpack_warns_of_each_way_this_triton_keys_the_binaries_otherwise(tmp_path, capsys, monkeypatch):
    """Built with one ptxas, fp fusion on and TRITON_DEFAULT_FP_FUSION set; unpacked where each differs: a warning
    per difference on stderr naming both sides, and the summary line says the binaries will recompile."""
    monkeypatch.setattr(pb, "ptxas_key", lambda arch: PTXAS_88)
    monkeypatch.setattr(pb, "cache_env", lambda: {"TRITON_DEFAULT_FP_FUSION": "true"})
    monkeypatch.setattr(pb, "fp_fusion", lambda: True)
    tar = tmp_path / "cache.tar.xz"
    pb.pack(fake_cache(tmp_path / "built"), tar)
    assert pb.unpack(tar, tmp_path / "same").warnings == ()

    monkeypatch.setattr(pb, "ptxas_key", lambda arch: PTXAS_88.replace("V13.0.88", "V13.0.48"))
    monkeypatch.setattr(pb, "cache_env", lambda: {})
    monkeypatch.setattr(pb, "fp_fusion", lambda: False)
    pb.main(["unpack", str(tar), "--cache", str(tmp_path / "other")])
    captured = capsys.readouterr()
    warnings = captured.err.splitlines()
    assert len(warnings) == 3 and all(w.startswith("warning: ") for w in warnings)
    assert warnings[0] == ("warning: built with another ptxas for sm_90: Cuda compilation tools, release 13.0, "
                           "V13.0.88; Build cuda_13.0.r13.0/compiler.36424714_0; here Cuda compilation tools, "
                           "release 13.0, V13.0.48; Build cuda_13.0.r13.0/compiler.36424714_0: its binaries will "
                           "recompile")
    assert "{'TRITON_DEFAULT_FP_FUSION': 'true'}, here {}" in warnings[1]
    assert "built with fp fusion on, here off" in warnings[2]
    assert "3 difference(s) from the build: these binaries will recompile" in captured.out
    edited = {**manifest_of(tar)["kernel_sources"], "rooftune.kernels.moe": "0"}
    monkeypatch.setattr(pb, "kernel_sources", lambda: edited)
    assert pb.unpack(tar, tmp_path / "edited").warnings[-1].startswith(
        "kernel sources changed since the build (rooftune.kernels.moe): where a jitted function changed")
    monkeypatch.setattr(pb, "ptxas_key", lambda arch: None)  # no ptxas found here
    assert "here no ptxas: its binaries will recompile" in pb.unpack(tar, tmp_path / "none").warnings[0]


def test_an_archive_of_another_triton_or_an_older_manifest(tmp_path):
    """Another triton's keys: not the same triton, and said; a manifest from before the ptxas and environment were
    recorded is compared on its triton key alone."""
    built = fake_cache(tmp_path / "built", entries=1)
    for name, manifest, warned in [("old", {"triton_key_sha256": pb.triton_key_sha256()}, False),
                                   ("other", {"triton_key_sha256": "0" * 64, "triton": "3.6.0", "python": "3.12.1"},
                                    True)]:
        tar = tmp_path / f"{name}.tar.xz"
        with tarfile.open(tar, "w:xz") as t:
            t.add(built / "KEY0" / "k.cubin", arcname="KEY0/k.cubin")
            pb._add_bytes(t, pb.MANIFEST, json.dumps(manifest).encode())
        done = pb.unpack(tar, tmp_path / name)
        assert done.same_triton is not warned and len(done.warnings) == warned
    assert done.warnings[0].startswith("built with triton 3.6.0 on Python 3.12.1, whose cache keys differ")
