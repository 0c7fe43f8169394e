"""vLLM-format fused-MoE tables: the file name and text vLLM reads, reading its files back, its nearest-M lookup,
its stored H200 tables and its default rule."""

import json

import pytest

from rooftune.candidates import MOE_SPACE, Config, check_in_grid
from rooftune.tuner.llm.moe_tables import (
    SHIPPED_H200,
    VLLM_KEYS,
    TableError,
    default_config,
    lookup,
    read_table,
    shipped_tables,
    table_file_name,
    write_table,
)


def cfg(bm, bn, bk, group, warps, stages) -> Config:
    return Config.make(warps, stages, BLOCK_SIZE_M=bm, BLOCK_SIZE_N=bn, BLOCK_SIZE_K=bk, GROUP_SIZE_M=group)


# What a vLLM table file looks like (the head of E=128,N=384,device_name=NVIDIA_H200.json, two entries).
VLLM_TEXT = """{
    "1": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 128,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 5
    },
    "2": {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 64,
        "GROUP_SIZE_M": 1,
        "num_warps": 4,
        "num_stages": 5
    }
}
"""


def test_file_names_are_vllms():
    assert table_file_name(128, 768, "NVIDIA H200") == "E=128,N=768,device_name=NVIDIA_H200.json"
    assert table_file_name(8, 14336, "NVIDIA H100 80GB HBM3") == "E=8,N=14336,device_name=NVIDIA_H100_80GB_HBM3.json"
    assert table_file_name(64, 2560, "NVIDIA H200", dtype="fp8_w8a8") == "E=64,N=2560,device_name=NVIDIA_H200,dtype=fp8_w8a8.json"
    # a down-projection table tuned apart: SGLang's name (vLLM reads only the one above, for both GEMMs)
    assert table_file_name(128, 768, "NVIDIA H200", down=True) == "E=128,N=768,device_name=NVIDIA_H200_down.json"


def test_the_writer_writes_what_vllm_ships(tmp_path):
    path = write_table(tmp_path / table_file_name(128, 384, "NVIDIA H200"),
                       {2: cfg(16, 64, 64, 1, 4, 5), 1: cfg(16, 128, 64, 1, 4, 5)})
    assert path.read_text() == VLLM_TEXT
    data = json.loads(path.read_text())  # what vLLM's get_moe_configs does with it
    configs = {int(key): value for key, value in data.items()}
    assert list(configs) == [1, 2] and all(list(v) == list(VLLM_KEYS) for v in configs.values())
    assert all(isinstance(x, int) for v in configs.values() for x in v.values())


def test_read_back_merge_and_bad_files(tmp_path):
    path = tmp_path / "t.json"
    path.write_text(VLLM_TEXT)
    table = read_table(path)
    assert table == {1: cfg(16, 128, 64, 1, 4, 5), 2: cfg(16, 64, 64, 1, 4, 5)}
    write_table(path, {1024: cfg(128, 256, 64, 16, 8, 4), 2: cfg(32, 64, 64, 1, 4, 5)})
    assert list(read_table(path)) == [1, 2, 1024] and read_table(path)[2]["BLOCK_SIZE_M"] == 32
    write_table(path, {4: cfg(16, 64, 64, 1, 4, 5)}, merge=False)
    assert list(read_table(path)) == [4]
    path.write_text(json.dumps({"8": {**{k: 16 for k in VLLM_KEYS[:4]}, "num_warps": 4, "num_stages": 3,
                                      "SPLIT_K": 1, "kpack": 2}}))
    assert read_table(path)[8] == cfg(16, 16, 16, 16, 4, 3)  # keys this kernel does not take are left out
    for text in ('{"8": {"BLOCK_SIZE_M": 16}}', "[1, 2]", "not json"):
        path.write_text(text)
        with pytest.raises(TableError):
            read_table(path)


def test_lookup_takes_the_nearest_key_first_listed_on_a_tie():
    table = {1: cfg(16, 32, 64, 1, 4, 2), 16: cfg(16, 64, 64, 1, 4, 2), 24: cfg(32, 64, 64, 1, 4, 2),
             4096: cfg(128, 256, 64, 1, 8, 4)}
    assert lookup(table, 1) == table[1] and lookup(table, 9) == table[16] and lookup(table, 8) == table[1]
    assert lookup(table, 20) == table[16] and lookup(table, 21) == table[24] and lookup(table, 10**6) == table[4096]
    with pytest.raises(TableError):
        lookup({}, 1)


def test_the_stored_shipped_h200_tables():
    tables = shipped_tables(SHIPPED_H200)
    assert sorted(tables) == sorted(f"E={e},N={n},device_name=NVIDIA_H200.json"
                                    for e, n in ((8, 14336), (128, 768), (128, 384), (128, 192), (64, 2560)))
    for table in tables.values():
        assert list(table) == [1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 256, 512, 1024, 1536, 2048, 3072, 4096]
        for config in table.values():
            check_in_grid(MOE_SPACE, config)  # every shipped config is a point of the space
    assert tables["E=8,N=14336,device_name=NVIDIA_H200.json"][2] == cfg(32, 64, 128, 1, 4, 5)


@pytest.mark.parametrize("tokens, experts, want", [
    (1, 128, cfg(16, 64, 128, 1, 4, 4)),
    (32, 8, cfg(16, 64, 128, 1, 4, 4)),
    (33, 8, cfg(32, 64, 128, 1, 4, 3)),
    (64, 8, cfg(32, 64, 128, 1, 4, 3)),
    (96, 8, cfg(32, 128, 64, 1, 4, 3)),
    (128, 8, cfg(64, 128, 64, 1, 4, 3)),
    (512, 8, cfg(64, 128, 64, 1, 8, 3)),
    (1032, 8, cfg(128, 128, 64, 16, 8, 3)),   # 1032 // 8 = 129 > 128 tokens an expert: GROUP_SIZE_M 16
    (1032, 64, cfg(128, 128, 64, 1, 8, 3)),
    (4096, 8, cfg(128, 128, 64, 16, 8, 3)),
])
def test_vllms_default_rule(tokens, experts, want):
    got = default_config(tokens, experts, 14336, 4096, 2)
    assert got == want
    check_in_grid(MOE_SPACE, got)
