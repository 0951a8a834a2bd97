"""Verifiers of register-MMA uses (SM70-SM89) with the specification's diagnostics.

A *use* (:class:`MmaUse`) says what the surrounding code feeds an atom: each operand's element
type, residency and (thread, value) layout, plus metadata and selector for sparse forms.
:func:`verify_register_mma` checks, in this order, and stops at the first failure:

1. the target has the atom (tier and feature; the specification: "target verification rejects atoms
   whose tier exceeds the selected target");
2. the shape, when the use states one;
3. no composed (swizzled) layouts ("doesn't support composed layout for A/B/D, ...");
4. A, B and D live in registers ("expects rmem for input operands, but got A: ...");
5. element types, A then B then C/D ("expects operand a with element type ..."; the C and D
   slots both print ``c`` as the specification's ladder does);
6. layouts are static integer layouts ("expects static and no scaled basis layout for");
7. each layout is equivalent to the atom's canonical one ("expects Mma atom layout of ...",
   compared with ``layouts_equivalent``);
8. sparse forms: a metadata operand in one 32-bit register, a selector in the legal range,
   and the metadata operand's layout equivalent to slot 3 of the synthesized layouts (the
   specification's ``verify_sm80_mma``: ``layouts_equivalent(use.sparse_metadata.layout,
   expected.slots[3])``), i.e. :meth:`~nvatom.atoms.mma.SparseMmaForm.metadata_layout` for
   the use's selector; a wrong one fails with "expects Mma atom layout of <slot 3> for
   operand E (metadata), but got <layout>".
"""

from __future__ import annotations

import dataclasses

from nvatom import diagnostics as D
from nvatom.arch import Target, feature, target
from nvatom.atoms.interfaces import AtomVerificationError, MmaAtom, SparseMetadataAtom
from nvatom.atoms.records import atom_record
from nvatom.atoms.sparse import MetadataLayout
from nvatom.dtypes import DType, dtype
from nvatom.layout import ComposedLayout, Layout, layouts_equivalent

__all__ = ["MmaUse", "OperandUse", "check_target_and_shape", "verify_register_mma"]


@dataclasses.dataclass(frozen=True)
class OperandUse:
    """One operand as the surrounding code provides it."""

    element_type: DType | str
    residency: str = "rmem"  # rmem, smem, gmem, tmem, smem_desc_view
    layout: object | None = None  # a Layout (thread, value) -> element, or None: not checked

    @property
    def dtype(self) -> DType:
        return dtype(self.element_type)

    @property
    def type_name(self) -> str:
        t = self.element_type
        return t if isinstance(t, str) else t.name

    def __str__(self) -> str:
        lay = f", {self.layout}" if self.layout is not None else ""
        return f"memref<{self.type_name}, {self.residency}{lay}>"


@dataclasses.dataclass(frozen=True)
class MmaUse:
    a: OperandUse
    b: OperandUse
    c: OperandUse
    d: OperandUse | None = None  # defaults to C's type, in registers
    metadata: OperandUse | None = None
    selector: int | None = None
    shape: tuple[int, int, int] | None = None

    @property
    def d_(self) -> OperandUse:
        return self.d if self.d is not None else OperandUse(self.c.element_type, "rmem")

    @classmethod
    def canonical(cls, form: MmaAtom, *, with_layouts: bool = True, selector: int = 0) -> MmaUse:
        """The use a correct caller makes of ``form`` (every check passes)."""

        def op(name: str) -> OperandUse:
            lay = form.tv_layout(name) if with_layouts else None
            return OperandUse(form.operand_type(name).name, "rmem", lay)

        meta = None
        if form.is_sparse:
            lay = form.metadata_layout(selector) if with_layouts else None  # type: ignore[attr-defined]
            meta = OperandUse("u32", "rmem", lay)
        return cls(op("A"), op("B"), op("C"), op("D"), meta,
                   selector if form.is_sparse else None, form.shape)


# The metadata operand of mma.sp is one .b32 register.
_METADATA_TYPES = ("u32", "b32", "i32", "s32")


def _fail(msg: str) -> None:
    raise AtomVerificationError(msg)


def check_target_and_shape(form: object, t: Target, use: MmaUse) -> None:
    """Steps 1-2 of every MMA verifier: the atom's tier and feature on ``t``, and the shape."""
    name = form.name  # type: ignore[attr-defined]
    record = atom_record(form.mnemonic)  # type: ignore[attr-defined]
    why = record.rejection(t, name)
    if why is not None:
        _fail(why)
    if not form.available_on(t):  # type: ignore[attr-defined]
        f = feature(form.feature)  # type: ignore[attr-defined]
        _fail(f"atom '{name}' is not available on {t.name}: it needs {f.description} "
              f"({f.rule})")
    shape = form.shape  # type: ignore[attr-defined]
    if use.shape is not None and tuple(use.shape) != shape:
        _fail(f"atom '{name}' has shape {shape}, but the use has shape {tuple(use.shape)}")


def verify_register_mma(form: MmaAtom, target_: Target | str, use: MmaUse) -> None:
    t = target(target_)
    check_target_and_shape(form, t, use)

    a, b, c, d = use.a, use.b, use.c, use.d_
    if any(isinstance(x.layout, ComposedLayout) for x in (a, b, d)):
        _fail(D.COMPOSED_LAYOUT + D.COMPOSED_LAYOUT_ABD.format(a.layout, b.layout, d.layout))
    if any(x.residency != "rmem" for x in (a, b, d)):
        _fail(f"{D.RMEM_INPUTS}{a}, B: {b}, D: {d}")

    for slot, got, want in (("a", a, form.a), ("b", b, form.b), ("c", c, form.c),
                            ("c", d, form.d)):
        if got.dtype != want:
            _fail(D.OPERAND_ELEMENT_TYPE.format(slot, want.name, got.dtype.name))

    for name, op in (("A", a), ("B", b), ("C", c), ("D", d)):
        if op.layout is None:
            continue
        if not isinstance(op.layout, Layout):
            _fail(f"{D.STATIC_LAYOUT} {op.layout!r}")
        want_layout = form.tv_layout(name)
        if not layouts_equivalent(op.layout, want_layout):
            _fail(f"{D.MMA_ATOM_LAYOUT}{want_layout} for operand {name}, but got {op.layout}")

    if isinstance(form, SparseMetadataAtom):
        if use.metadata is None:
            _fail(f"atom '{form.name}' expects a sparse metadata operand")
        assert use.metadata is not None
        if use.metadata.residency != "rmem" or use.metadata.type_name not in _METADATA_TYPES:
            _fail(f"atom '{form.name}' expects the metadata in one 32-bit register, but got "
                  f"{use.metadata}")
        sel = use.selector
        if sel is None or sel not in form.selectors:
            _fail(f"atom '{form.name}': sparsity selector {sel} out of range "
                  f"[0..{max(form.selectors)}]")
        got = use.metadata.layout
        if got is not None:
            want_meta = form.metadata_layout(sel)
            if not isinstance(got, Layout | MetadataLayout):
                _fail(f"{D.STATIC_LAYOUT} {got!r}")
            if not want_meta.equivalent(got):
                _fail(f"{D.MMA_ATOM_LAYOUT}{want_meta} for operand E (metadata), but got {got}")
    elif use.metadata is not None or use.selector is not None:
        _fail(f"atom '{form.name}' is dense and takes no metadata or selector")
