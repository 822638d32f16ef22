"""Every construct of language.md parses to the AST it means; section 2's separator rules hold."""

from __future__ import annotations

import pytest

from ptowsp.diagnostics import WspError
from ptowsp.frontend import ast as A
from ptowsp.frontend.parser import parse
from ptowsp.frontend.printer import dump, expr_str


def decls(text: str) -> tuple:
    return parse(text, "t.wsp").decls


def one(text: str):
    (d,) = decls(text)
    return d


def body(stmts: str) -> tuple:
    """Statements of a workload wrapping `stmts`."""
    (w,) = decls("workload w() {\n" + stmts + "\n}")
    return w.body


def expr(text: str):
    return one(f"const c = {text}").value


N = A.Name


# ---- lexical structure -------------------------------------------------------------------------


@pytest.mark.parametrize("text, value", [("42", 42), ("0x2A", 42), ("1_000", 1000), ("0XFF_FF", 65535)])
def test_integer_literals(text, value):
    assert expr(text) == A.IntLit(value)


@pytest.mark.parametrize("text, value", [("1.0", 1.0), ("1e-6", 1e-6), (".5", 0.5), ("2.", 2.0),
                                         ("1_0.5", 10.5), ("3E2", 300.0)])
def test_float_literals(text, value):
    e = expr(text)
    assert isinstance(e, A.FloatLit) and e.value == value


def test_inf_is_a_float_but_info_is_a_name():
    assert expr("inf").value == float("inf")
    assert expr("-inf").value == float("-inf")
    assert expr("info") == N("info")


def test_booleans_and_strings():
    assert expr("true") == A.BoolLit(True)
    assert expr("false") == A.BoolLit(False)
    assert expr(r'"a\tb\"c\n"') == A.StrLit('a\tb"c\n')


def test_comments_are_ignored():
    d = decls("// line\nconst a = /* inline */ 1 // tail\n/* block\n spanning */ const b = 2")
    assert [x.name.id for x in d] == ["a", "b"]


def test_spans_are_one_based_and_cover_the_construct():
    (d,) = decls("\n  const  abc = 1 + 2")
    assert (d.span.line, d.span.col) == (2, 3)
    assert (d.name.span.line, d.name.span.col, d.name.span.end_col) == (2, 10, 13)
    assert (d.value.op_span.col, d.value.op_span.end_col) == (18, 19)


def test_spans_do_not_affect_equality():
    assert decls("const a = 1") == decls("\n\n   const   a =   1")


# ---- statement separators (language.md section 2) ------------------------------------------


def test_semicolons_and_newlines_separate_statements():
    assert len(decls("const a = 1; const b = 2\nconst c = 3;")) == 3


def test_one_line_block():
    (loop,) = body("for i in P.seq(N) { step[i](x = X[i]) }")
    assert isinstance(loop, A.ForLoop) and loop.kind == "seq"
    assert isinstance(loop.body[0], A.CallStmt)


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "and", "or"])
def test_line_ending_in_an_operator_continues(op):
    (d,) = decls(f"const a = x {op}\n    y")
    assert isinstance(d.value, A.Binary) and d.value.op == op


def test_line_ending_in_open_paren_comma_or_dot_continues():
    assert expr("f(\n1,\n2)") == A.Call(N("f"), (A.IntLit(1), A.IntLit(2)))
    assert expr("X[\n1]") == A.Index(N("X"), (A.IntLit(1),))
    assert expr("t.\nindex") == A.Attr(N("t"), "index")


def test_newlines_inside_brackets_are_ignored():
    assert expr("f(1\n, 2\n)") == A.Call(N("f"), (A.IntLit(1), A.IntLit(2)))


def test_line_starting_with_dot_else_or_otherwise_continues():
    (s,) = decls("schedule main = w()\n  .streams(2)\n  .stream_by(h % 2)")
    assert [c.name.id for c in s.combinators] == ["streams", "stream_by"]
    (w,) = body("when a { k() }\nelse when b { k() }\notherwise { k() }")
    assert isinstance(w, A.When) and len(w.branches) == 2 and w.otherwise is not None


def test_newline_without_continuation_ends_the_statement():
    with pytest.raises(WspError) as info:
        decls("const a = 1\n+ 2")
    assert info.value.diagnostics[0].span.line == 2


def test_brace_ends_a_statement_on_the_same_line():
    stmts = body("combine { a() } sequential { b() } c()")
    assert [type(s) for s in stmts] == [A.Combine, A.Sequential, A.CallStmt]


def test_block_may_open_on_the_next_line():
    (loop,) = body("for i in P(N)\n{\n  k[i]()\n}")
    assert isinstance(loop, A.ForLoop)


# ---- declarations ----------------------------------------------------------------------------


def test_module_import_sym_const():
    d = decls('module m\nimport "lib/x.wsp"\nsym B, T\nsym S = 4096\nconst N = 64 * 2')
    assert d[0] == A.ModuleDecl(N("m"))
    assert d[1] == A.Import("lib/x.wsp")
    assert d[2:4] == (A.SymDecl(N("B"), None), A.SymDecl(N("T"), None))
    assert d[4] == A.SymDecl(N("S"), A.IntLit(4096))
    assert d[5] == A.ConstDecl(N("N"), A.Binary("*", A.IntLit(64), A.IntLit(2)))


@pytest.mark.parametrize("kind", ["input", "output", "inout", "scratch"])
def test_tensor_declarations(kind):
    d = one(f"{kind} X: f16[B, ceildiv(S, 64) * 64, 128]")
    assert d.kind == kind and d.type.dtype == "f16"
    assert expr_str(d.type.dims[1]) == "ceildiv(S, 64) * 64"


@pytest.mark.parametrize("dt", ["f16", "bf16", "f32", "f64", "i8", "i16", "i32", "i64",
                                "u8", "u16", "u32", "u64", "bool"])
def test_every_dtype(dt):
    assert one(f"input X: {dt}[4]").type.dtype == dt


def test_axis_kinds():
    d = decls("axis a = Dense[8]\naxis b = DenseDyn(B)\naxis c = Ragged(b, lens)\n"
              "axis d = Ragged(b, ceildiv(seq_lens[_], 64))\naxis e = Sparse(b, indptr, indices)\n"
              "axis f = B * 2\naxis g = Dense[8]()")
    assert d[0].axis == A.DenseAxis(A.IntLit(8))
    assert d[1].axis == A.DenseDynAxis(N("B"))
    assert d[2].axis == A.RaggedAxis(N("b"), N("lens"))
    assert expr_str(d[3].axis) == "Ragged(b, ceildiv(seq_lens[_], 64))"
    assert d[4].axis == A.SparseAxis(N("b"), N("indptr"), N("indices"))
    assert isinstance(d[5].axis, A.Binary)  # an integer expression: DenseDyn by the checker
    assert d[6].axis == A.DenseAxis(A.IntLit(8))


def test_channels_and_events():
    d = decls("channel l2c: Tile[16, 128, f32], depth = 2\nchannel tok, depth = 0\n"
              "channel plain: Tile[4, 4, f16]\nevent done")
    assert d[0] == A.ChannelDecl(N("l2c"), A.TileType(A.IntLit(16), A.IntLit(128), "f32"), A.IntLit(2))
    assert d[1] == A.ChannelDecl(N("tok"), None, A.IntLit(0))
    assert d[2].depth is None
    assert d[3] == A.EventDecl(N("done"))


def test_kernel_with_every_parameter_kind():
    k = one("kernel k(x: In[Tile[R, 128, f32]], y: Out[Tile[R, 128, f32]],\n"
            "         acc: InOut[Tile[R, 1, f32]], eps: Scalar[f32] = 1e-6, R: Constexpr[i32] = 16) {\n"
            "    let a = tl.exp(x)\n    a = pto.add(a, 1)\n    store(y, a)\n}")
    modes = [type(p.type).__name__ for p in k.params]
    assert modes == ["TileParamType", "TileParamType", "TileParamType", "ScalarParamType",
                     "ConstexprParamType"]
    assert [p.type.mode for p in k.params[:3]] == ["In", "Out", "InOut"]
    assert k.params[0].type.tile.rows == N("R")
    assert k.params[3].default.value == 1e-6 and k.params[4].default == A.IntLit(16)
    let, assign, store = k.body
    assert let == A.Let(N("a"), A.Call(N("exp"), (N("x"),), (), "tl"))
    assert assign == A.Assign(N("a"), A.Call(N("add"), (N("a"), A.IntLit(1)), (), "pto"))
    assert store == A.Store(N("y"), N("a"))


def test_extern_kernels():
    k = one('kernel topk(x: In[Tile[1, 8, f32]], y: Out[Tile[1, 2, i32]]) extern c """\n'
            '  for (int i = 0; i < 2; i++) y.data[i] = i;\n"""\n  extern ascend """ /* npu */ """')
    assert k.body is None
    assert [(x.lang, x.code.strip()) for x in k.externs] == [
        ("c", "for (int i = 0; i < 2; i++) y.data[i] = i;"), ("ascend", "/* npu */")]


def test_matmul_keyword_argument():
    k = one("kernel k(a: In[Tile[4, 4, f16]], b: In[Tile[4, 4, f16]], c: InOut[Tile[4, 4, f32]]) {\n"
            "  store(c, matmul(a, b, acc = c))\n}")
    (store,) = k.body
    assert store.value.kwargs == (A.Keyword("acc", N("c")),)


def test_workload_parameters():
    w = one("workload attn(batch: DenseDyn, heads: Dense[8], tok: Ragged, r: Sparse, plain) { }")
    assert [(p.name.id, p.kind) for p in w.params] == [
        ("batch", "DenseDyn"), ("heads", "Dense"), ("tok", "Ragged"), ("r", "Sparse"), ("plain", "any")]
    assert w.params[1].extent == A.IntLit(8)


# ---- workload statements -----------------------------------------------------------------------


@pytest.mark.parametrize("spelling, kind", [("P", "grid"), ("P.grid", "grid"), ("P.seq", "seq")])
def test_loops(spelling, kind):
    (loop,) = body(f"for a in {spelling}(batch) {{ }}")
    assert loop.kind == kind and loop.spelling == spelling and loop.vars == (N("a"),)


def test_grid_over_several_axes_and_ragged_inner():
    (loop,) = body("for b, h in P(batch, heads) {\n for s in P(tok[b]) { k[b, h, s]() } }")
    assert loop.vars == (N("b"), N("h"))
    inner = loop.body[0]
    assert inner.axes == (A.Index(N("tok"), (N("b"),)),)


def test_sel_loop_with_pos():
    (loop,) = body("for e in P.sel(routing[b]) { expert[b, e](w = W[e], slot = e.pos) }")
    assert loop.kind == "sel"
    call = loop.body[0]
    assert call.kwargs[1].value == A.Attr(N("e"), "pos")


def test_when_chains_and_p_when_spellings():
    (w,) = body("when n <= 2048 { a() } else when n <= 8192 { b() } otherwise { c() }")
    assert [expr_str(b.pred) for b in w.branches] == ["n <= 2048", "n <= 8192"]
    (pw,) = body("P.when(n <= 2048) { a() }\nP.otherwise { c() }")
    assert isinstance(pw, A.When) and pw.otherwise is not None
    (pw2,) = body("P.when(n > 0) { a() } P.otherwise() { c() }")
    assert pw2.otherwise == (A.CallStmt(N("c"), None, (), ()),)
    (alone,) = body("when not q and n > 0 or false { a() }")
    assert alone.otherwise is None


def test_calls_with_and_without_coordinates():
    a, b, c = body("k[b, t](x = X[b, t*16 : t*16 + 16, :], y = W)\nk2(x = 1)\nother(batch)")
    assert a.coords == (N("b"), N("t"))
    view = a.kwargs[0].value
    assert isinstance(view.items[1], A.Slice) and view.items[2] == A.Slice(None, None)
    assert expr_str(view) == "X[b, t * 16 : t * 16 + 16, :]"
    assert b.coords is None and b.kwargs == (A.Keyword("x", A.IntLit(1)),)
    assert c == A.CallStmt(N("other"), None, (N("batch"),), ())


def test_combine_and_sequential():
    c, s = body("combine { a() \n b() }\nsequential { a(); b() }")
    assert isinstance(c, A.Combine) and len(c.body) == 2
    assert isinstance(s, A.Sequential) and len(s.body) == 2


def test_pipe_processes_send_consume():
    (pipe,) = body("pipe {\n process loader {\n for i in P.seq(tiles) {\n"
                   "  send(l2c, load_tile[i](src = X[i], dst = l2c))\n } }\n"
                   " process computer * 4 {\n consume(l2c) as t {\n"
                   "  store_tile[t](src = t, dst = Y[t.index], who = computer.id)\n } } }")
    loader, computer = pipe.body
    assert loader.replicas is None and computer.replicas == A.IntLit(4)
    send = loader.body[0].body[0]
    assert isinstance(send, A.Send) and send.channel == N("l2c") and send.call.callee == N("load_tile")
    consume = computer.body[0]
    assert consume.channel == N("l2c") and consume.var == N("t")
    (p2,) = body("P.pipe { process a { } }")
    assert isinstance(p2, A.Pipe)


def test_events_and_slots():
    stmts = body("k()\nrecord(ev)\nsynchronize(ev)\nwhen query(ev) { }\n"
                 "slot_set(3, B * 2)\nslot_load(4, T[i, 0])\nwhen slot(3) > 0 { }")
    assert stmts[1] == A.Record(N("ev")) and stmts[2] == A.Synchronize(N("ev"))
    assert stmts[3].branches[0].pred == A.Call(N("query"), (N("ev"),))
    assert stmts[4] == A.SlotSet(A.IntLit(3), A.Binary("*", N("B"), A.IntLit(2)))
    assert stmts[5] == A.SlotLoad(A.IntLit(4), A.Index(N("T"), (N("i"), A.IntLit(0))))


def test_schedule_with_every_combinator():
    s = one("schedule fast = attention(batch, heads)\n    .dispatch(affinity(b))\n    .streams(4)\n"
            "    .stream_by(h % 4)\n    .timing(batched(16))\n"
            "    .task_graph(window = 8192, unit = tasks, mode = stall)")
    assert s.workload == N("attention") and s.args == (N("batch"), N("heads"))
    assert [c.name.id for c in s.combinators] == ["dispatch", "streams", "stream_by", "timing", "task_graph"]
    assert s.combinators[0].args == (A.Call(N("affinity"), (N("b"),)),)
    assert [k.name for k in s.combinators[4].kwargs] == ["window", "unit", "mode"]


def test_operator_precedence():
    assert expr_str(expr("a + b * c - d / e % f")) == "a + b * c - d / e % f"
    e = expr("a + b * c")
    assert e.op == "+" and e.right.op == "*"
    e = expr("not a < b and c or d")
    assert e.op == "or" and e.left.op == "and" and e.left.left == A.Unary("not", A.Binary("<", N("a"), N("b")))
    assert expr_str(expr("(a + b) * -c")) == "(a + b) * -c"
    assert expr("a - b - c").left.op == "-"  # left-associative


def test_language_md_first_program_dumps_stably():
    text = open("examples/rmsnorm.wsp").read()
    sf = parse(text, "examples/rmsnorm.wsp")
    assert dump(sf) == dump(parse("\n" + text.replace("    ", "\t"), "examples/rmsnorm.wsp"))
