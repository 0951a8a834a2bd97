"""Atom interfaces: what generic code may ask an atom, never by comparing mnemonic strings.

The specification's registry model: every atom implements one *primary* interface (MMA atom, copy
atom, prefetch atom, descriptor type) and any number of *capability* interfaces (sparse
metadata, block scale, tensor memory, shared-memory descriptor, TMA, async copy).  In Python
each is a base class (abstract where it already has methods); an atom's class inherits the
ones it implements, so
``isinstance(atom, SparseMetadataAtom)`` is the ``dyn_cast`` of the C++ original.
:func:`verify_atom_instance` dispatches on them.
"""

from __future__ import annotations

import abc
import dataclasses
from typing import Any

from nvatom import diagnostics as D
from nvatom.atoms.records import atom_record
from nvatom.descriptors.base import DescriptorType  # the descriptors' own interface
from nvatom.errors import NvatomError

__all__ = [
    "AsyncCopyAtom",
    "AtomVerificationError",
    "BlockScaleAtom",
    "CopyAtom",
    "DescriptorType",
    "MmaAtom",
    "MmaAtomContract",
    "PrefetchAtom",
    "SmemDescriptorAtom",
    "SparseMetadataAtom",
    "TmaAtom",
    "TmemAtom",
    "interfaces_of",
    "verify_atom_instance",
]


class AtomVerificationError(NvatomError):
    """An atom used in a way its contract forbids; the message is the spec's diagnostic."""


@dataclasses.dataclass(frozen=True)
class MmaAtomContract:
    """The specification's ``MmaAtomContract`` (004, "MMA Records"): what the registry promises
    about an MMA atom.  Residencies are the verifiers' spellings: ``rmem`` (registers),
    ``smem_desc_view`` (a shared-memory descriptor) and ``tmem`` (tensor memory)."""

    min_tier: Any  # nvatom.arch.Tier, None for the universal FMA (every tier)
    mnk: tuple[int, int, int]
    a_type: Any  # nvatom.dtypes.DType
    b_type: Any
    c_type: Any  # the accumulator (C and D)
    a_residency: str
    b_residency: str
    d_residency: str
    supports_sparse: bool
    supports_block_scale: bool


class MmaAtom(abc.ABC):
    """Reports its MMA shape, operand element types and layouts; verifies a use."""

    @property
    @abc.abstractmethod
    def shape_mnk(self) -> tuple[int, int, int]: ...

    @abc.abstractmethod
    def verify_instance(self, target: Any, use: Any) -> None:
        """Raise AtomVerificationError with the specification's diagnostic, or return."""

    def contract(self) -> MmaAtomContract:
        """The atom's :class:`MmaAtomContract`, read off the atom: the registry record's
        minimum tier, the shape and types, the residencies its verifier requires and the
        capability interfaces it implements (``SparseMetadataAtom``, ``BlockScaleAtom``)."""
        a = getattr(self, "a", None) or getattr(self, "a_type", None) \
            or getattr(self, "element_type", None)
        b = getattr(self, "b", None) or getattr(self, "b_type", None) \
            or getattr(self, "element_type", None)
        c = getattr(self, "c", None) or getattr(self, "d", None) \
            or getattr(self, "element_type", None)
        src = getattr(self, "a_source", None)
        if isinstance(self, TmemAtom):  # UMMA: A by descriptor or in TMEM, D in TMEM
            res = ("tmem" if src == "ts" else "smem_desc_view", "smem_desc_view", "tmem")
        elif isinstance(self, SmemDescriptorAtom):  # WGMMA: A by descriptor or in registers
            res = ("rmem" if src == "rs" else "smem_desc_view", "smem_desc_view", "rmem")
        else:
            res = ("rmem", "rmem", "rmem")
        return MmaAtomContract(atom_record(self.mnemonic).min_tier,  # type: ignore[attr-defined]
                               tuple(self.shape_mnk), a, b, c, *res,  # type: ignore[arg-type]
                               supports_sparse=isinstance(self, SparseMetadataAtom),
                               supports_block_scale=isinstance(self, BlockScaleAtom))


class CopyAtom(abc.ABC):
    """Reports copy shape, value type, memory spaces, vector width and legality."""

    @abc.abstractmethod
    def verify_instance(self, target: Any, use: Any) -> None: ...


class PrefetchAtom(abc.ABC):
    """Reports descriptor, prefetch tile and cache-hint behaviour."""

    @abc.abstractmethod
    def verify_prefetch(self, target: Any, use: Any) -> None: ...


# -- capability interfaces
class SparseMetadataAtom(abc.ABC):
    """A structurally sparse operand with a metadata operand alongside it."""

    @abc.abstractmethod
    def metadata_layout(self, selector: int = 0) -> Any: ...


class BlockScaleAtom:  # a capability marker
    """Scale-factor operands scale A and B per block of K."""


class TmemAtom:  # a capability marker
    """Operands in tensor memory (SM100)."""


class SmemDescriptorAtom:  # a capability marker
    """Operands described by shared-memory descriptors (WGMMA, UMMA)."""


class TmaAtom:  # a capability marker
    """Driven by a TMA tensor map (``nvatom.atoms.tma``: the non-exec and executable TMA
    atoms)."""


class AsyncCopyAtom:  # a capability marker: completion is observed separately
    """Completes asynchronously (cp.async groups, mbarrier transactions, bulk groups)."""


_INTERFACES = (MmaAtom, CopyAtom, PrefetchAtom, DescriptorType, SparseMetadataAtom,
               BlockScaleAtom, TmemAtom, SmemDescriptorAtom, TmaAtom, AsyncCopyAtom)


def interfaces_of(atom: object) -> tuple[str, ...]:
    """Names of the interfaces an atom implements, e.g. ('MmaAtom', 'SparseMetadataAtom')."""
    return tuple(i.__name__ for i in _INTERFACES if isinstance(atom, i))


def verify_atom_instance(atom: object, target: Any, use: Any) -> None:
    """The spec's interface dispatcher (``verify_atom_instance``): MMA, then copy, then prefetch;
    anything else is an error."""
    if isinstance(atom, (MmaAtom, CopyAtom)):
        atom.verify_instance(target, use)
        return
    if isinstance(atom, PrefetchAtom):
        atom.verify_prefetch(target, use)
        return
    raise AtomVerificationError(D.NO_KNOWN_INTERFACE)
