"""Kernel calls inside a workload body: every parameter bound by name, scalar arguments,
tile arguments (tensor views, consumed items, channel slots) against the kernel's signature.

Tensor views themselves (indices, slices, shapes) are checked by views.py; what cannot be
proved becomes a `RuntimeCheck`.
"""

from __future__ import annotations

from typing import Optional

from ... import sym
from ...diagnostics import InternalError, Note, did_you_mean
from ...dtypes import FLOAT_DTYPES
from ...limits import int_text
from ...primitives import literal_fits
from .. import ast as A
from ..env import ChannelInfo
from ..signatures import KernelSig, ParamSig
from .collectives import Operand
from .scope import Item, LetVal, Scope, describe
from .views import not_a_view_message, untranspose
from .wording import article, closest, elem_text, show, type_words


class CallChecks:
    """Part of `Body`: kernel calls and their arguments."""

    def kernel_call(
        self,
        s: A.CallStmt,
        scope: Scope,
        sig: KernelSig,
        send: Optional[ChannelInfo],
        in_send: bool,
    ) -> None:
        self.summary.kernel_calls.append(s)
        self.check_coords(s, scope)
        kname = sig.name
        pnames = [p.name for p in sig.params]
        bound: dict[str, Optional[A.Keyword]] = {}
        for i, a in enumerate(s.args):
            pname = pnames[i] if i < len(pnames) else None
            self.error(
                a.span,
                "positional-arg",
                "kernel arguments are passed by name",
                f"write `{pname} = {self.text(a)}`" if pname else "write `name = value`",
            )
            if pname is not None:
                bound.setdefault(pname, None)
        for kw in s.kwargs:
            if kw.name not in pnames:
                guess = closest(kw.name, [n for n in pnames if n not in bound])
                self.error(
                    kw.span,
                    "unknown-param",
                    f"kernel `{kname}` has no parameter `{kw.name}`",
                    did_you_mean(kw.name, [guess] if guess else pnames),
                )
                if guess is not None:  # a misspelling: do not also report that parameter as missing
                    bound.setdefault(guess, None)
            elif bound.get(kw.name) is not None or kw.name in bound:
                prev = bound.get(kw.name)
                self.error(
                    kw.span,
                    "duplicate-arg",
                    f"parameter `{kw.name}` is bound twice",
                    notes=[Note(prev.span, "first bound here")] if prev is not None else (),
                )
            else:
                bound[kw.name] = kw
        missing = [p.name for p in sig.params if p.name not in bound and p.default is None]
        if missing:
            listed = ", ".join(f"`{m}`" for m in missing)
            self.error(
                s.span,
                "missing-args",
                f"call to `{kname}` does not bind {'parameter' if len(missing) == 1 else 'parameters'} {listed}",
                "add " + ", ".join(f"`{m} = ...`" for m in missing),
            )
        # Constexpr values first: tile shapes depend on them
        cvals: dict[str, sym.Expr] = {}
        for p in sig.params:
            if p.kind != "constexpr":
                continue
            kw = bound.get(p.name)
            if kw is not None:
                n = self.compile_int(kw.value, scope, f"`{p.name}` (a Constexpr parameter)")
                if n is not None and not literal_fits(n, p.dtype):  # it names the specialisation
                    self.error(kw.value.span, "too-large", f"`{p.name}` is a Constexpr[{p.dtype}], "
                               f"but its value, {int_text(n)}, does not fit it")
                    n = None
                elif n is not None and n < 1:  # language.md: Constexpr values are at least 1
                    self.error(kw.value.span, "not-positive", f"`{p.name}` is a Constexpr, whose "
                               f"value must be at least 1 (it may size tiles), found {int_text(n)}")
                    n = None
            elif p.default is not None and p.name not in bound:
                n = self.compile_int(p.default, Scope(), "a Constexpr default", report=False)
            else:
                n = None
            if n is not None:
                cvals[p.name] = sym.const(n)
        slots_written: list[A.Keyword] = []
        self.operands = []  # the tensor views of this call, for its placement on the mesh
        for p in sig.params:
            kw = bound.get(p.name)
            if kw is None:
                continue
            if p.kind == "tile":
                self.tile_arg(
                    kw,
                    p,
                    cvals,
                    scope,
                    send,
                    in_send,
                    slots_written,
                    self.sound_param(kname, p.name),
                )
            elif p.kind == "scalar":
                self.scalar_arg(kw, p, scope)
        if self.env.mesh is not None:
            self.placement(s, self.operands)
        # decision: a token channel (or event) may not appear in the call at all; a data channel's call must write it once
        if send is not None and send.elem is not None and not slots_written:
            outs = [
                p.name for p in sig.params if p.kind == "tile" and p.tile and p.tile.mode == "Out"
            ]
            self.error(
                s.span,
                "send-no-slot",
                f"the call in `send({send.name}, ...)` does not write `{send.name}`",
                f"pass the channel to an `Out` tile parameter: `{outs[0] if outs else 'out'} = {send.name}`",
            )

    def scalar_arg(self, kw: A.Keyword, p: ParamSig, scope: Scope) -> None:
        v = self.scalar(kw.value, scope)
        if v.type == "error":
            return
        text = self.text(kw.value)
        if p.dtype == "bool":
            if v.type != "bool":
                self.error(
                    kw.value.span,
                    "scalar-type",
                    f"`{p.name}` takes Scalar[bool], but `{text}` is {type_words(v.type)}",
                    f"compare it: `{text} != 0`",
                )
        elif v.type == "bool":
            # decision: a condition is not a number; no implicit bool-to-number conversion in scalar arguments
            self.error(
                kw.value.span,
                "scalar-type",
                f"`{p.name}` takes Scalar[{p.dtype}], but `{text}` is a condition",
            )
        # decision: an integer expression may be passed to a float Scalar (converted exactly as NumPy would)
        elif v.type == "float" and p.dtype not in FLOAT_DTYPES:
            self.error(
                kw.value.span,
                "scalar-type",
                f"`{p.name}` takes Scalar[{p.dtype}], but `{text}` is a float",
                "integer scalars take integer expressions; no implicit float-to-integer conversion",
            )

    def tile_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        cvals: dict[str, sym.Expr],
        scope: Scope,
        send: Optional[ChannelInfo],
        in_send: bool,
        slots_written: list[A.Keyword],
        sound: bool = True,
    ) -> None:
        _need_tile(p)
        rows = sym.substitute(p.tile.rows, cvals) if cvals else p.tile.rows
        cols = sym.substitute(p.tile.cols, cvals) if cvals else p.tile.cols
        want = f"{p.tile.mode}[Tile[{show(rows)}, {show(cols)}, {p.tile.dtype}]]"
        tile_text = f"Tile[{show(rows)}, {show(cols)}, {p.tile.dtype}]"
        # `VIEW.T`: the view transposed (language.md section 6, "Transposed views")
        v, flip = untranspose(kw.value)
        base = v.value if isinstance(v, A.Index) else v
        if not isinstance(base, A.Name):
            self.error(
                kw.span,
                "not-a-tile",
                f"`{p.name}` takes a tile ({want}): pass a tensor or a view such as `X[i, j]`",
            )
            return
        b = scope.lookup(base.id)
        if b is not None:
            if isinstance(b, LetVal) and base is v:
                self.let_tile_arg(kw, p, b, rows, cols, want, tile_text, sound, flip)
                return
            if isinstance(b, LetVal) and b.poisoned:
                return
            if isinstance(b, LetVal) and b.tensor is not None and b.value is None:
                # decision: a `let` of a view is passed whole; it is not indexed further
                self.error(
                    kw.span,
                    "not-a-tile",
                    f"a `let` of a view is passed whole: write `{p.name} = {base.id}`",
                    f"index `{b.tensor}` in the `let` itself",
                )
                return
            if isinstance(b, Item) and base is v and flip:
                self.error(kw.value.span, "transpose-not-view",
                           not_a_view_message(self.text(kw.value), "a consumed item"))
                return
            if isinstance(b, Item) and base is v:
                self.item_arg(kw, p, b, rows, cols, tile_text, sound)
                return
            if isinstance(b, Item):
                self.error(
                    kw.span,
                    "not-a-tile",
                    f"a consumed item is passed whole: write `{p.name} = {base.id}`",
                )
                return
            self.error(
                kw.span,
                "not-a-tile",
                f"`{base.id}` is {describe(b)}, but `{p.name}` takes a tile ({want})",
                "pass a tensor or a view such as `X[i, j]`",
            )
            return
        name = base.id
        if name in self.env.channels and base is v and flip:
            slots_written.append(kw)  # it meant the slot: one error, not also "does not write"
            self.error(kw.value.span, "transpose-not-view",
                       not_a_view_message(self.text(kw.value), "a channel"))
            return
        if name in self.env.channels and base is v:
            self.channel_arg(
                kw,
                p,
                self.env.channels[name],
                rows,
                cols,
                tile_text,
                send,
                in_send,
                slots_written,
                sound,
            )
            return
        if name not in self.env.tensors:
            kind = self.env.kind_of(name)
            later = scope.later_let(name)
            if kind is None and later is not None:
                self.let_too_early(base, later)
            elif kind is None:
                self.error(
                    base.span,
                    "unknown-name",
                    f"unknown tensor `{name}`",
                    did_you_mean(
                        name, list(self.env.tensors) + list(self.env.channels) + scope.visible()
                    ),
                )
            elif kind == "tensor":
                pass  # the declaration is wrong and was reported
            else:
                self.error(
                    kw.span,
                    "not-a-tile",
                    f"`{name}` is {article(kind)}, but `{p.name}` takes a tile ({want})",
                    "pass a tensor or a view such as `X[i, j]`",
                )
            return
        t = self.env.tensors[name]
        self.read_only(kw, p, t, ())
        shape = self.view(v, t, scope, kw)
        self.operands.append(Operand(kw, t, p.tile.mode, self.last_box))
        self.gather_read_only(kw, p, v, scope)
        if flip and self.gather_transposed(kw.value, v, scope):
            return
        if flip and shape is not None:
            shape = self.transpose_shape(shape, kw.value, self.text(v))
        self.view_fits(kw, kw, p, t, shape, rows, cols, tile_text, sound, (), read_only=False)

    def read_only(self, kw: A.Keyword, p: ParamSig, t, notes) -> None:
        if t.kind == "input" and p.tile.mode != "In":
            self.error(
                kw.span,
                "read-only",
                f"`{t.name}` is an input and is read-only, but `{p.name}` is an "
                f"`{p.tile.mode}` parameter",
                f"declare `{t.name}` as `inout` to update it in place",
                notes=notes,
            )

    def view_fits(
        self,
        kw: A.Keyword,
        view_kw: A.Keyword,
        p: ParamSig,
        t,
        shape: Optional[list[sym.Expr]],
        rows: sym.Expr,
        cols: sym.Expr,
        tile_text: str,
        sound: bool,
        notes,
        read_only: bool = True,
    ) -> None:
        """The view `view_kw` (the argument `kw` itself, or the `let` it names) bound to tile
        `p`: mode, dtype and shape. Errors are reported at `kw`; run-time checks at `view_kw`."""
        if read_only:
            self.read_only(kw, p, t, notes)
        kwtext = self.text(view_kw)
        if t.dtype != p.tile.dtype:
            # decision: no implicit casts between a tensor's dtype and a tile's dtype, in either direction
            self.error(
                kw.span,
                "dtype-mismatch",
                f"`{kwtext}` is a view of {t.dtype} tensor `{t.name}` but `{p.name}` takes "
                f"{tile_text}",
                f"declare `{t.name}` as {p.tile.dtype}, or convert with a kernel that uses `cast`",
                notes=notes,
            )
        if shape is None or not sound:
            return
        self.match_shape(shape, rows, cols, view_kw, kwtext, p, tile_text, at=kw, notes=notes)

    def item_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        item: Item,
        rows: sym.Expr,
        cols: sym.Expr,
        tile_text: str,
        sound: bool,
    ) -> None:
        ch = item.channel
        if ch is None:
            return
        _need_tile(p)
        if ch.elem is None:
            self.error(
                kw.span,
                "token-item",
                f"`{item.name}` is an item of token channel `{ch.name}`, which carries no data",
                f"use `{item.name}` as a coordinate or `{item.name}.index` instead",
            )
            return
        if p.tile.mode != "In":
            self.error(
                kw.span,
                "item-read-only",
                f"a consumed item is read-only, but `{p.name}` is an `{p.tile.mode}` parameter",
                "pass it to an `In` tile parameter",
            )
            return
        if not self.elem_fits(ch, rows, cols, p.tile.dtype, sound):
            self.error(
                kw.span,
                "item-mismatch",
                f"`{item.name}` is an item of `{ch.name}` "
                f"({elem_text(ch)}) but `{p.name}` takes {tile_text}",
            )

    def elem_fits(
        self, ch: ChannelInfo, rows: sym.Expr, cols: sym.Expr, dtype: str, sound: bool
    ) -> bool:
        if ch.elem is None:
            raise InternalError("check", f"token channel `{ch.name}` has no element type")
        r, c, dt = ch.elem
        if dt != dtype:
            return False
        if not sound or not self.sound_channel(ch):
            return True  # a wrong dimension in a declaration, reported there
        for have, want in ((r, rows), (c, cols)):
            if not sym.free_vars(want) and self.decide(sym.const(have), "==", want) is False:
                return False
        return True

    def channel_arg(
        self,
        kw: A.Keyword,
        p: ParamSig,
        ch: ChannelInfo,
        rows: sym.Expr,
        cols: sym.Expr,
        tile_text: str,
        send: Optional[ChannelInfo],
        in_send: bool,
        slots_written: list[A.Keyword],
        sound: bool,
    ) -> None:
        _need_tile(p)
        if send is None or send.name != ch.name:
            if in_send and send is not None:
                msg = f"channel `{ch.name}` is passed inside `send({send.name}, ...)`"
            else:
                msg = f"channel `{ch.name}` can only be passed in a call inside `send({ch.name}, ...)`"
            self.error(
                kw.span,
                "channel-outside-send",
                msg,
                f"write `send({ch.name}, kernel[...](..., {p.name} = {ch.name}))`",
            )
            return
        if ch.elem is None:
            what = "event" if ch.is_event else "token channel"
            self.error(
                kw.span,
                "token-channel-arg",
                f"`{ch.name}` is a {what} and carries no data; do not pass it to the call",
                f"`send({ch.name}, ...)` only carries the completion of the call",
            )
            return
        slots_written.append(kw)
        # decision: only an `Out` parameter takes the slot (an `InOut` would read a slot nobody wrote)
        if p.tile.mode != "Out":
            self.error(
                kw.span,
                "channel-slot-mismatch",
                f"channel passed where no slot fits: `{ch.name}` is passed to "
                f"`{p.tile.mode}` parameter `{p.name}`",
                f"pass `{ch.name}` to an `Out` tile parameter; a `send` writes the next free slot",
            )
            return
        if len(slots_written) > 1:
            self.error(
                kw.span,
                "channel-twice",
                f"`{ch.name}` is passed to two `Out` parameters; a `send` writes one slot",
                notes=[Note(slots_written[0].span, "first passed here")],
            )
            return
        if not self.elem_fits(ch, rows, cols, p.tile.dtype, sound):
            self.error(
                kw.span,
                "channel-slot-mismatch",
                f"channel passed where no slot fits: `{ch.name}` carries "
                f"{elem_text(ch)} but `{p.name}` takes {tile_text}",
            )


def _need_tile(p: ParamSig) -> None:
    if p.tile is None:
        raise InternalError("check", f"tile parameter `{p.name}` has no tile signature")
