"""Copy operands of sub-byte elements address whole bytes (found with the b1 WGMMA kernel:
the lowering scaled element offsets by ``element_bits // 8``, 0 for them, so every lane and
every access of a 1- or 4-bit operand addressed the tile's base).  The b1 universal copies
are checked in tests/ir/test_ir_b1_wgmma.py; here the decompressing ldmatrix."""

from __future__ import annotations

import re

from nvatom.atoms import registry as R
from nvatom.ir import driver
from nvatom.ir.generate import atom_use
from nvatom.ir.lower import lower


def test_decompressing_ldmatrix_rows_are_16_bytes_apart() -> None:
    # PTX ISA ldmatrix .m8n16 .b8x16.b4x16_p64: each of lanes 0-7 gives the address of a
    # 16-byte row (sixteen 4-bit elements, 64 bits of padding); the generated use's rows are
    # dense, so lane l's address is base + 16 * (l % 8)
    fam = next(f for f in R.FAMILIES if f.name == "copy")
    atom = next(a for a in fam.atoms(None) if a.name == "atom.ldsm<m8n16.x1.b8x16.b4x16_p64>")
    mod = driver.parse(atom_use(fam, atom, "sm_100a").text, "ldsm.mlir")
    ptx = lower(mod, driver.verify(mod)).ptx
    lane = re.search(r"and\.b32 (%r\d+), %r\d+, 7;\s*shl\.b32 %r\d+, \1, 4;", ptx)
    assert lane, ptx
    assert re.search(r"ldmatrix\.sync\.aligned\.m8n16\.x1\.shared\.b8x16\.b4x16_p64", ptx)
