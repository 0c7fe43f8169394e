"""Shape size limits (what the kernels index with 32-bit integers) and configs outside a space's grid."""

import pytest

from rooftune.candidates import (
    ATTENTION_SPACE,
    GEMM_SPACE,
    AttentionShape,
    Config,
    ConfigError,
    GemmShape,
    ShapeError,
    check_in_grid,
    shapes,
)


def test_limits_follow_the_spaces():
    blocks = [v for space in (GEMM_SPACE, ATTENTION_SPACE) for n, values in space.grid if n.startswith("BLOCK_")
              for v in values]
    assert shapes.MAX_TILE_EDGE == max(blocks)
    grid = dict(GEMM_SPACE.grid)
    assert shapes.GEMM_MIN_TILE == min(grid["BLOCK_M"] + grid["BLOCK_N"])
    assert shapes.ATTENTION_MIN_BLOCK_M == min(dict(ATTENTION_SPACE.grid)["BLOCK_M"])
    # the largest tile's int32 offsets: 256 rows of the longest allowed row, and the last row index
    assert shapes.MAX_TILE_EDGE * shapes.MAX_ROW_ELEMS <= 2**31 - 1
    assert shapes.MAX_ROWS + shapes.MAX_TILE_EDGE <= 2**31 - 1


def test_gemm_limits_name_the_field():
    GemmShape(shapes.MAX_ROWS, 16, shapes.MAX_ROW_ELEMS)
    GemmShape(1, shapes.MAX_ROW_ELEMS, shapes.MAX_ROW_ELEMS)
    for dims, field in (((shapes.MAX_ROWS + 1, 1, 1), "m ="), ((1, shapes.MAX_ROW_ELEMS + 1, 1), "n ="),
                        ((1, 1, shapes.MAX_ROW_ELEMS + 1), "k ="), ((2**30, 2**10, 1), "output tiles")):
        with pytest.raises(ShapeError, match=field):
            GemmShape(*dims)


def test_attention_limits_name_the_field():
    AttentionShape(1, 1, shapes.MAX_ROWS, 64)
    with pytest.raises(ShapeError, match="seq ="):
        AttentionShape(1, 1, shapes.MAX_ROWS + 1, 64)
    with pytest.raises(ShapeError, match="batch · heads"):
        AttentionShape(2**16, 2**10, 2**11 + 1, 64)


def test_check_in_grid_names_parameter_value_and_allowed_values():
    good = Config.make(4, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, SPLIT_K=1, TMA=1, PERSISTENT=0, FIXUP=0, BLOCK_N2=0)
    check_in_grid(GEMM_SPACE, good)
    bad = Config.make(4, 3, BLOCK_M=100, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)
    with pytest.raises(ConfigError, match=r"BLOCK_M=100 is not in the gemm space; BLOCK_M is one of 16, 32, 64"):
        check_in_grid(GEMM_SPACE, bad)
    with pytest.raises(ConfigError, match="num_warps=3"):
        check_in_grid(GEMM_SPACE, Config.make(3, 3, **good.kernel_params()))


def test_check_in_grid_names_a_bad_value_before_what_is_missing():
    partial = Config.make(3, 3, BLOCK_M=64, BLOCK_N=64, BLOCK_K=32, GROUP_M=1, SPLIT_K=1)  # no TMA ... BLOCK_N2
    with pytest.raises(ConfigError, match="num_warps=3 is not in the gemm space"):
        check_in_grid(GEMM_SPACE, partial)
    with pytest.raises(ConfigError, match="num_warps=3"):
        check_in_grid(GEMM_SPACE, partial, complete=False)
    check_in_grid(GEMM_SPACE, Config.make(4, 3, BLOCK_M=64), complete=False)  # what is there is in the grid
    with pytest.raises(ConfigError, match="gemm config lacks BLOCK_N, BLOCK_K, .*BLOCK_N2"):
        check_in_grid(GEMM_SPACE, Config.make(4, 3, BLOCK_M=64))
