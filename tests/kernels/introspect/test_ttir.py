"""Reading Triton IR text: ops, results, regions and blocks, the arguments' parameter names, tensor types."""

import pytest

from rooftune.kernels.introspect.ttir import (
    TtirError,
    element_bytes,
    parse_ttir,
    strip_locations,
    tensor_types,
)

# A loop of loads into an accumulator, a while loop over a counter and a branch on the program id, as Triton 3.6
# prints them for sm_90 (locations kept on the signature, as Triton writes them).
WHILE_AND_IF = """#loc = loc("/tmp/k.py":8:0)
module {
  tt.func public @wk(%x_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("x_ptr"(#loc)), %y_ptr: !tt.ptr<f32> {tt.divisibility = 16 : i32} loc("y_ptr"(#loc)), %n: i32 loc("n"(#loc))) attributes {noinline = false} {
    %cst = arith.constant dense<2.000000e+00> : tensor<128xf32> loc(#loc1)
    %c128_i32 = arith.constant 128 : i32 loc(#loc1)
    %c0_i32 = arith.constant 0 : i32 loc(#loc1)
    %acc = arith.constant dense<0.000000e+00> : tensor<128xf32> loc(#loc2)
    %acc_0:2 = scf.while (%i = %c0_i32, %acc_1 = %acc) : (i32, tensor<128xf32>) -> (i32, tensor<128xf32>) {
      %2 = arith.cmpi slt, %i, %n : i32 loc(#loc3)
      scf.condition(%2) %i, %acc_1 : i32, tensor<128xf32> loc(#loc3)
    } do {
    ^bb0(%i: i32 loc("i"), %acc_1: tensor<128xf32> loc("acc")):
      %acc_2 = tt.addptr %x_ptr, %i : !tt.ptr<f32>, i32 loc(#loc4)
      %acc_3 = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32> loc(#loc4)
      %acc_4 = tt.splat %acc_2 : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>> loc(#loc4)
      %acc_5 = tt.addptr %acc_4, %acc_3 : tensor<128x!tt.ptr<f32>>, tensor<128xi32> loc(#loc4)
      %acc_6 = tt.load %acc_5 : tensor<128x!tt.ptr<f32>> loc(#loc4)
      %acc_7 = arith.addf %acc_1, %acc_6 : tensor<128xf32> loc(#loc5)
      %i_8 = arith.addi %i, %c128_i32 : i32 loc(#loc6)
      scf.yield %i_8, %acc_7 : i32, tensor<128xf32> loc(#loc7)
    } loc(#loc8)
    %0 = tt.get_program_id x : i32 loc(#loc9)
    %1 = arith.cmpi eq, %0, %c0_i32 : i32 loc(#loc9)
    scf.if %1 {
      %2 = tt.make_range {end = 128 : i32, start = 0 : i32} : tensor<128xi32> loc(#loc10)
      %3 = tt.splat %y_ptr : !tt.ptr<f32> -> tensor<128x!tt.ptr<f32>> loc(#loc10)
      %4 = tt.addptr %3, %2 : tensor<128x!tt.ptr<f32>>, tensor<128xi32> loc(#loc10)
      tt.store %4, %acc_0#1 : tensor<128x!tt.ptr<f32>> loc(#loc11)
    } else {
      %6 = arith.mulf %acc_0#1, %cst : tensor<128xf32> loc(#loc12)
    } loc(#loc13)
    tt.return loc(#loc14)
  } loc(#loc)
} loc(#loc)
"""


def _ops(function):
    return [op.name for op in function.body.ops]


def test_a_function_reads_into_ops_regions_and_blocks():
    fn = parse_ttir(WHILE_AND_IF)
    assert fn.name == "wk"
    assert [(a.ssa, a.type, a.param) for a in fn.args] == [
        ("x_ptr", "!tt.ptr<f32>", "x_ptr"), ("y_ptr", "!tt.ptr<f32>", "y_ptr"), ("n", "i32", "n")]
    assert _ops(fn) == ["arith.constant"] * 4 + ["scf.while", "tt.get_program_id", "arith.cmpi", "scf.if",
                                                  "tt.return"]
    loop = fn.body.ops[4]
    assert loop.results == ("acc_0#0", "acc_0#1") and len(loop.regions) == 2
    before, after = loop.regions
    assert [op.name for op in before.ops] == ["arith.cmpi", "scf.condition"]
    assert after.blocks[0].args == ("i", "acc_1") and after.blocks[0].ops[4].name == "tt.load"
    branch = fn.body.ops[7]
    assert branch.operands == ("1",) and [len(r.ops) for r in branch.regions] == [4, 1]
    store = branch.regions[0].ops[3]
    assert store.operands == ("4", "acc_0#1") and "loc" not in store.text


def test_a_generic_op_keeps_the_types_after_its_region():
    text = """module {
  tt.func public @r(%x: !tt.ptr<f32>) attributes {noinline = false} {
    %s = "tt.reduce"(%acc) <{axis = 0 : i32}> ({
    ^bb0(%a: f32 loc(callsite(#loc3 at #loc41)), %b: f32 loc(callsite(#loc3 at #loc41))):
      %c = arith.addf %a, %b : f32 loc(#loc45)
      tt.reduce.return %c : f32 loc(#loc43)
    }) : (tensor<1024xf32>) -> f32 loc(#loc43)
    tt.return
  }
}"""
    (reduce, _) = parse_ttir(text).body.ops
    assert reduce.name == "tt.reduce" and reduce.results == ("s",)
    assert reduce.tail == ": (tensor<1024xf32>) -> f32"
    assert [op.name for op in reduce.regions[0].ops] == ["arith.addf", "tt.reduce.return"]
    assert reduce.regions[0].blocks[0].args == ("a", "b")


def test_tensor_types_and_element_sizes():
    (ptrs,) = tensor_types("%x = tt.load %p : tensor<64x32x!tt.ptr<bf16>>")
    assert (ptrs.shape, ptrs.element, ptrs.pointee, ptrs.numel) == ((64, 32), "ptr", "bf16", 2048)
    a, b, c = tensor_types("tt.dot %a, %b, %c : tensor<128x64xf16> * tensor<64x32xf16> -> tensor<128x32xf32, #mma>")
    assert (a.shape, b.shape, c.shape, c.element) == ((128, 64), (64, 32), (128, 32), "f32")
    assert [element_bytes(e) for e in ("bf16", "f32", "i1", "i64", "f8E4M3FN", "!tt.ptr<f16>")] == [2, 4, 1, 8, 1, 8]


def test_locations_are_stripped_whatever_they_hold():
    line = '%a = arith.addi %b, %c : i32 loc(callsite("x"(#loc3) at #loc4))'
    assert strip_locations(line) == "%a = arith.addi %b, %c : i32"
    assert strip_locations("%a = tt.alloc loc(#loc)") == "%a = tt.alloc"


def test_text_without_a_function_is_refused():
    with pytest.raises(TtirError, match="no tt.func"):
        parse_ttir("module {\n}")
