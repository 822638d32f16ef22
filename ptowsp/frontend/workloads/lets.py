"""`let` in workload bodies (language.md section 6, "Names: `let`"): a name for a scalar
expression or a tensor view, visible from the statement after it to the end of its block.

A `let` is checked once, where it stands, in the scope it stands in: an error in its expression
is reported there and the name is bound *poisoned* (known, silent at every use), so one mistake
gives one diagnostic, not one per use; a use before the `let` is reported once per `let`. A use reads what that check left (`LetVal`): a scalar's
`SVal`, a view's extents, matched against the tile of each call it is passed to. Lowering gives
the name the same meaning by lowering the expression, in the scope of its `let`, at each use
(lower/workloads.py), so a program lowers to the IR of the expression written in place.
"""

from __future__ import annotations

from ...diagnostics import Note
from ...dtypes import FLOAT_DTYPES
from .. import ast as A
from ..signatures import ParamSig
from .collectives import Operand
from .edges import task_binding
from .scope import ERR, LetVal, Scope, SVal, describe
from .views import not_a_view_message, untranspose
from .wording import article


class LetChecks:
    """Part of `Body`: `let` statements and the uses of their names."""

    def stmt_Let(self, s: A.Let, scope: Scope) -> None:
        name = s.name.id
        scope.later.pop(name, None)
        task = task_binding(s, self.env.kernel_sigs)
        if task is not None:  # `let t = k(...)`: a task handle (edges.py)
            self.stmt_CallStmt(task, scope)
            return
        free = self.let_name_free(s, scope)
        val = self.let_value(s, scope)
        # decision: a `let` whose name is taken binds nothing: the name keeps its meaning
        if free:
            scope.names[name] = val

    def let_name_free(self, s: A.Let, scope: Scope) -> bool:
        """Whether the `let` may take its name; reports why not."""
        # decision: a workload `let` shadows nothing (as in kernels): not a name of the module,
        # nor a parameter, loop variable, item, process or `let` of this or an enclosing block
        name = s.name.id
        b = scope.lookup(name)
        if isinstance(b, LetVal) and name in scope.names:
            self.error(
                s.name.span,
                "let-redefined",
                f"`{name}` is already defined by a `let` in this block",
                "give the new value its own name",
                notes=[Note(b.stmt.name.span, "first defined here")],
            )
            return False
        if b is not None:
            notes = [Note(b.stmt.name.span, "defined here")] if isinstance(b, LetVal) else []
            self.error(
                s.name.span,
                "let-shadows",
                f"`{name}` is already {describe(b)} here; a `let` cannot take its name",
                "give the `let` its own name",
                notes=notes,
            )
            return False
        kind = self.env.kind_of(name)
        if kind is not None:
            self.error(
                s.name.span,
                "let-shadows",
                f"`{name}` is {article(kind)} of the module; a `let` cannot take its name",
                "give the `let` its own name",
            )
            return False
        return True

    def let_value(self, s: A.Let, scope: Scope) -> LetVal:
        """What the `let` names, its expression checked here (poisoned after an error)."""
        e, flip = untranspose(s.value)
        base = e.value if isinstance(e, A.Index) else e
        if isinstance(base, A.Name):
            b = scope.lookup(base.id)
            if isinstance(b, LetVal) and base is e:  # `let q2 = q`: the same meaning
                o = b.origin
                if flip and not b.poisoned and (o.tensor is None or o.value is not None):
                    what = "a scalar" if o.tensor is None else f"an element of `{o.tensor}`"
                    self.error(s.value.span, "transpose-not-view",
                               not_a_view_message(self.text(s.value), what))
                    return LetVal(s, scope, poisoned=True)
                bad = False
                if flip and not b.poisoned and o.view is not None:
                    bad = self.transpose_shape(o.view, s.value, base.id) is None
                return LetVal(s, scope, o.value, o.tensor, o.view, b.poisoned or bad, origin=o,
                              transposed=b.transposed != flip)
            if b is None and base.id in self.env.tensors:
                t = self.env.tensors[base.id]
                if flip:
                    # decision: a `.T` of a tensor or view is a view, even of every index of an
                    # integer tensor (a 1 x 1 tile); its extents are checked at each use
                    kw = LetVal(s, scope).keyword()
                    shape = self.view(e, t, scope, kw)
                    bad = self.gather_transposed(s.value, e, scope)
                    if shape is not None and not bad:
                        bad = self.transpose_shape(shape, s.value, self.text(e)) is None
                    return _boxed(LetVal(s, scope, None, t.name, shape, shape is None or bad,
                                         transposed=True), self.last_box)
                if isinstance(e, A.Index) and _element(e, t):
                    # decision: `let n = T[i, j]` indexing every dimension of an integer or
                    # bool tensor is an element (a scalar); passed to a tile it is a 1 x 1 view
                    v = self.element(e, scope)
                    return LetVal(s, scope, v, t.name, poisoned=v.type == "error")
                # decision: a `let` of a tensor or of `T[...]` with a slice or fewer indices
                # than dimensions (or of a float tensor) is a view; its indices are checked here
                kw = LetVal(s, scope).keyword()
                shape = self.view(e, t, scope, kw)
                return _boxed(LetVal(s, scope, None, t.name, shape, poisoned=shape is None),
                              self.last_box)
        v = self.scalar(s.value, scope)
        return LetVal(s, scope, v, poisoned=v.type == "error")

    def let_scalar(self, n: A.Name, b: LetVal) -> SVal:
        """A `let` name in a scalar expression."""
        if b.poisoned:
            return ERR
        if b.origin.value is not None:
            return b.origin.value
        self.error(
            n.span,
            "not-scalar",
            f"`{n.id}` is a `let` of a view of `{b.tensor}`, not a scalar",
            f"pass it to a tile parameter (`x = {n.id}`), or index `{b.tensor}` itself",
        )
        return ERR

    def let_too_early(self, n: A.Name, later: A.Let) -> None:
        """A use of a `let` name before the `let` (reported at the first such use only)."""
        if later in self.early:
            return
        self.early.append(later)
        self.error(
            n.span,
            "let-before-definition",
            f"`{n.id}` is used before its `let`",
            "a `let` is visible from the statement after it to the end of its block",
            notes=[Note(later.name.span, "defined here")],
        )

    def let_tile_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        b: LetVal,
        rows,
        cols,
        want: str,
        tile_text: str,
        sound: bool,
        flip: bool = False,
    ) -> None:
        """`x = q` (or `x = q.T`, `flip`) where `q` is a `let`: its view must fit the tile.
        Compile-time mismatches are reported at this argument; run-time checks at the `let`'s
        view, which they name."""
        if b.poisoned:
            return
        o = b.origin
        if flip and (o.tensor is None or o.value is not None):
            what = "a scalar" if o.tensor is None else f"an element of `{o.tensor}`"
            self.error(kw.value.span, "transpose-not-view",
                       not_a_view_message(self.text(kw.value), what))
            return
        if o.tensor is None:
            self.error(
                kw.span,
                "not-a-tile",
                f"`{b.name}` is {describe(b)} of a scalar, but `{p.name}` takes a tile ({want})",
                "pass a tensor or a view such as `X[i, j]`",
            )
            return
        t = self.env.tensors[o.tensor]
        view_kw = o.keyword()
        if o.view is None:
            # an element let passed to a tile: a 1 x 1 view (its indices passed at the `let`)
            o.view = self.view(o.stmt.value, t, o.scope, view_kw)
            o.box = self.last_box
        self.operands.append(Operand(kw, t, p.tile.mode, o.box))
        notes = [Note(view_kw.span, f"`{b.name}` is defined here")]
        view_expr = untranspose(o.stmt.value)[0]
        self.gather_read_only(kw, p, view_expr, o.scope, notes)
        shape = o.view
        if b.transposed != flip:
            if self.gather_transposed(kw.value, view_expr, o.scope, notes):
                return
            if shape is not None:  # a `let` of a `.T` was checked there: only `q.T` can fail
                shape = self.transpose_shape(shape, kw.value if flip else kw, b.name, notes)
        self.view_fits(kw, view_kw, p, t, shape, rows, cols, tile_text, sound, notes)


def _boxed(b: LetVal, box) -> LetVal:
    """`b` with its view's box (where it lies on the mesh)."""
    b.box = box
    return b


def _element(e: A.Index, t) -> bool:
    return (
        t.dtype not in FLOAT_DTYPES
        and len(e.items) == len(t.dims)
        and not any(isinstance(i, A.Slice) for i in e.items)
    )

