import math

from tiles import cgen, dtypes, ir

rows, cols, s = ir.Dim("A", 2), ir.Dim("A", 3), ir.ScalarArg("s", dtypes.f32)


def test_integer_ops_are_c_integer_ops():
    assert cgen.c_expr(rows // 2 + cols % 3) == "((A.rows / 2) + (A.cols % 3))"
    assert cgen.c_expr(ir.Call("cdiv", (rows, ir.as_expr(64)))) == "tiles_cdiv(A.rows, 64)"


def test_true_division_of_ints_is_exact_in_c():
    # the IR's / divides exactly (interpreter: 7 / 2 = 3.5); C would truncate two ints
    e = rows / (cols + 1)
    assert ir.evaluate(e, {("dim", "A", 2): 7, ("dim", "A", 3): 1}) == 3.5
    assert cgen.c_expr(e) == "((float)A.rows / (A.cols + 1))"
    assert cgen.c_expr(s / rows) == "(s / A.rows)"


def test_float_constants():
    assert cgen.c_expr(ir.as_expr(-math.inf)) == "-INFINITY"
    assert cgen.c_expr(s * 1.5) == "(s * 1.5f)"
