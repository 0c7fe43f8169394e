"""scripts/migrate_kernel_digest.py: a cache's keys move from a kernel source's old digest to its digest now, every
other field and every entry as it was."""

import json
import subprocess

from script_module import load_script

from rooftune.candidates import KERNELS
from rooftune.tuner.cache import kernel_digest

script = load_script("scripts/migrate_kernel_digest.py")


def test_only_the_digest_field_of_a_key_changes():
    entries = {"H200|1x2x3-kn-bf16|gemm-v|aaaa|triton=3.6.0|rooftune:x|budget=20": {"winner": "w"},
               "H200|aaaa-shape|gemm-v|bbbb|triton=3.6.0|rooftune:x|budget=20": {"winner": "v"}}
    out, changed = script.migrated_entries(entries, {"aaaa": "cccc"})
    assert changed == 1
    assert out == {"H200|1x2x3-kn-bf16|gemm-v|cccc|triton=3.6.0|rooftune:x|budget=20": {"winner": "w"},
                   "H200|aaaa-shape|gemm-v|bbbb|triton=3.6.0|rooftune:x|budget=20": {"winner": "v"}}


def test_the_digest_at_head_is_kernel_digest_of_an_unchanged_source():
    module = KERNELS["gemm"].module
    dirty = subprocess.run(["git", "-C", str(script.REPO), "status", "--porcelain", "--", script.source_path(module)],
                           capture_output=True, text=True, check=True).stdout
    if not dirty:
        assert script.digest_at("HEAD", module) == kernel_digest(module)


def test_the_committed_cache_names_the_kernels_as_they_are():
    data = json.loads((script.REPO / "datasets/h200/models/tune.json").read_text())
    now = {kernel_digest(spec.module) for spec in KERNELS.values()}
    assert {key.split("|")[script.DIGEST_FIELD] for key in data["entries"]} <= now
