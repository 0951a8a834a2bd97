"""Pictures of layouts and fragments (nvatom.layout.svg, nvatom.atoms.frag_view): valid SVG,
bounded in size and time, and the right content -- checked against rules written here from
the PTX ISA ("Matrix Fragments for mma.m16n8k16", "Register Fragments ... wgmma" D layout)
and from CuTe's Swizzle definition, not against our own output."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from nvatom.atoms.frag_view import FragmentViewError
from nvatom.atoms.pictures import picture
from nvatom.atoms.registry import family, mma_form
from nvatom.atoms.tiled_mma import make_tiled_mma
from nvatom.cli import main
from nvatom.errors import NvatomError
from nvatom.layout import ComposedLayout, Layout
from nvatom.layout.svg import MAX_CELLS, MAX_DRAWN, MAX_PX, layout_svg
from nvatom.tables.swizzles import smem_swizzle

NS = "{http://www.w3.org/2000/svg}"
M16N8K16 = "sm80.mma.m16n8k16.f32.bf16.bf16.f32"
TIP = re.compile(r"\((\d+),(\d+)\) (.*)")


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg"
    w, h = int(root.get("width")), int(root.get("height"))  # type: ignore[arg-type]
    assert 0 < w <= MAX_PX and 0 < h <= MAX_PX, (w, h)
    return root


def cells(root: ET.Element) -> dict[tuple[int, int], str]:
    """(row, col) -> the cell's tooltip text after the coordinate."""
    out = {}
    for rect in root.iter(f"{NS}rect"):
        if rect.get("class") == "cell":
            m = TIP.fullmatch(rect.find(f"{NS}title").text)  # type: ignore[union-attr,arg-type]
            assert m, rect
            out[int(m[1]), int(m[2])] = m[3]
    return out


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


# --------------------------------------------------------------------------- layouts


def test_rank2_layout_cells_show_offsets_and_banks() -> None:
    lay = Layout((4, 8), (8, 1))  # row-major 4 x 8
    root = parse(lay._repr_svg_())
    got = cells(root)
    assert len(got) == 32
    for (r, c), tip in got.items():
        o = 8 * r + c
        assert tip == f"index {r + 4 * c} -> offset {o}, bank {o % 32}"
    labels = texts(root)
    assert all(str(o) in labels for o in range(32))
    html = lay._repr_html_()
    assert "<pre>(4,8):(8,1)  size=32 cosize=32</pre>" in html and "<svg" in html


def _sw128_bytes(b: int) -> int:
    # PTX ISA 128B swizzle: 16-byte chunk c of 128-byte line l moves to chunk c ^ (l % 8)
    return b ^ (((b >> 7) & 7) << 4)


def test_128b_swizzled_bf16_tile_offsets_and_banks() -> None:
    tile = smem_swizzle("SW128").atom(16)  # the bf16 K-major atom: 8 rows of 128 bytes
    assert tile.shape == (8, 64)
    svg = tile.picture(element_bits=16).svg
    assert tile.picture(element_bits=16)._repr_svg_() == svg
    root = parse(svg)
    got = cells(root)
    assert len(got) == 8 * 64
    banks: dict[int, set[int]] = {}
    for (r, c), tip in got.items():
        o = _sw128_bytes(2 * (64 * r + c)) // 2
        bank = (2 * o // 4) % 32
        assert tip == f"index {r + 8 * c} -> offset {o}, bank {bank}"
        banks.setdefault(c, set()).add(bank)
    # the point of the 128B swizzle: one column's 8 rows lie in 8 different banks
    assert all(len(b) == 8 for b in banks.values())
    t = texts(root)
    assert "colour: bank of 16-bit elements" in t and "511" in t  # full offset labels
    assert not any(x.startswith("small cells") for x in t)
    # the same tile written with the byte-level swizzle's name draws at the same scale
    root = parse(ComposedLayout("Sw<3,4,3> o 0 o (8,64):(64,1)")._repr_svg_())
    assert len(cells(root)) == 512 and "511" in texts(root)


def test_deep_and_rank1_layouts() -> None:
    root = parse(Layout(((4, 8), (2, 2, 2)), ((32, 1), (16, 8, 128)))._repr_svg_())
    got = cells(root)
    assert max(got) == (31, 7) and len(got) == 256
    root = parse(Layout((2, 3, 4))._repr_svg_())  # modes 1.. become the columns
    assert max(cells(root)) == (1, 11)
    assert any("modes 1.. are the columns" in x for x in texts(root))
    got = cells(parse(Layout(16, 2)._repr_svg_()))
    assert got[0, 5] == "index 5 -> offset 10, bank 10" and max(got) == (0, 15)


def test_huge_layouts_are_bounded_in_time_and_size() -> None:
    t0 = time.perf_counter()
    huge = Layout((1 << 20, 1 << 20))
    html = ET.fromstring(huge._repr_html_())
    assert html.tag == "div" and html.find("pre").text.startswith("(1048576,1048576)")  # type: ignore[union-attr]
    for svg in (huge._repr_svg_(), ET.tostring(html[1], encoding="unicode"),
                layout_svg(Layout((300, 300)))):
        root = parse(svg)
        assert cells(root) == {}
        assert any("too many to draw" in x for x in texts(root))
    # at the cell limit: evaluated, but only the corner that the caps allow is drawn
    tall = Layout((MAX_CELLS // 16, 16))
    root = parse(tall._repr_svg_())
    got = cells(root)
    assert 0 < len(got) <= MAX_DRAWN and max(got)[1] == 15
    assert any(x.startswith("elided: rows 0..") for x in texts(root))
    wide = Layout((2, MAX_CELLS // 2))
    got = cells(parse(wide._repr_svg_()))
    assert 0 < len(got) <= MAX_DRAWN
    assert time.perf_counter() - t0 < 10


# --------------------------------------------------------------------------- fragments


def _owners(tip: str) -> list[tuple[int, int]]:
    return [(int(t), int(v)) for t, v in re.findall(r"T(\d+):V(\d+)", tip)]


def test_m16n8k16_a_fragment_follows_the_isa() -> None:
    view = mma_form(M16N8K16).picture("A")
    root = parse(view._repr_svg_())
    got = cells(root)
    assert len(got) == 16 * 16
    want: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for lane in range(32):  # PTX ISA m16n8k16 .bf16 A: a0..a7
        g, tig = lane >> 2, lane % 4
        for i in range(8):
            row = g + 8 * ((i >> 1) & 1)
            col = tig * 2 + (i & 1) + 8 * (i >> 2)
            want.setdefault((row, col), []).append((lane, i))
    assert {k: _owners(v) for k, v in got.items()} == want
    # lane 0 holds (0,0), (0,1), (8,0), (8,1), (0,8), (0,9), (8,8), (8,9)
    assert [rc for rc, o in want.items() if o[0][0] == 0] == \
        [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)]
    labels = texts(root)
    assert "T0:V0" in labels and "T31:V7" in labels  # full labels at this size
    assert "<pre>" in view._repr_html_() and view.table.startswith("     ")


def test_wgmma_m64n256_accumulator_is_readable_and_bounded() -> None:
    form = family("wgmma").atom("sm90.mma.m64n256k16.ss.f32.f16.f16")
    svg = picture(form, "D").svg
    root = parse(svg)
    got = cells(root)
    assert len(got) == 64 * 256
    for (r, c), tip in got.items():
        # PTX ISA wgmma D (m64nNk16, f32): warp w owns rows 16w..16w+15; in a warp,
        # row = 16w + lane/4 + 8*(i/2 % 2), col = 8*(i/4) + 2*(lane%4) + i%2
        w, rr = divmod(r, 16)
        lane = 4 * (rr % 8) + (c % 8) // 2
        i = 4 * (c // 8) + 2 * (rr // 8) + c % 2
        assert _owners(tip) == [(32 * w + lane, i)], (r, c, tip)
    labels = texts(root)
    assert "127" in labels and "T127:V127" not in labels  # lane numbers in small cells
    assert any(x.startswith("small cells: short labels") for x in labels)
    assert len(svg) < 4_000_000
    legend = [x for x in root.iter(f"{NS}rect") if x.get("class") != "cell"]
    assert len(legend) == 128  # one swatch per thread of the warpgroup


def test_wgmma_smem_operand_has_no_picture() -> None:
    form = family("wgmma").atom("sm90.mma.m64n256k16.ss.f32.f16.f16")
    with pytest.raises(NvatomError, match="shared memory"):
        picture(form, "B")
    with pytest.raises(NvatomError, match="unknown operand 'E'"):
        mma_form(M16N8K16).picture("E")
    with pytest.raises(FragmentViewError, match="object: no register fragment picture"):
        picture(object(), "A")


def test_other_forms_render() -> None:
    sm70 = family("register_mma").atom("sm70.mma.m8n8k4.row.row.f32.f16.f16.f16")
    assert len(cells(parse(sm70.picture("C").svg))) == 64  # type: ignore[attr-defined]
    sm120 = family("sm120").atom(
        "SM120.mma_bs.m16n8k32.mxf8f6f4.1X.f32.e4m3.e4m3.f32.ue8m0")
    got = cells(parse(picture(sm120, "A").svg))
    assert len(got) == 16 * 32 and all(len(_owners(t)) == 1 for t in got.values())


def test_tiled_mma_c_follows_warp_placement() -> None:
    tm = make_tiled_mma(mma_form(M16N8K16), (2, 2, 1))  # 32 x 16 x 16, 128 threads
    got = cells(parse(tm.picture("C").svg))
    assert len(got) == 32 * 16
    for (r, c), tip in got.items():
        wm, rr = divmod(r, 16)
        wn, cc = divmod(c, 8)
        lane = 4 * (rr % 8) + cc // 2  # ISA m16n8 C: row = lane/4 + 8*(i/2), col = 2*(lane%4)+i%2
        i = 2 * (rr // 8) + cc % 2
        assert _owners(tip) == [(32 * (wm + 2 * wn) + lane, i)], (r, c, tip)
    a = cells(parse(tm.picture("A").svg))  # A is replicated across the two N warps
    assert len(a) == 32 * 16 and all(len(_owners(t)) == 2 for t in a.values())
    html = tm._repr_html_()
    assert html.count("<svg") == 3


# --------------------------------------------------------------------------- CLI


def test_cli_layout_and_banks_write_svg(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sw.svg"
    assert main(["layout", "Sw<3,4,3> o 0 o (8,64):(64,1)", "--element-bits", "16",
                 "--svg", str(out)]) == 0
    got = cells(parse(out.read_text()))
    o = 64 ^ ((64 & (0b111 << 7)) >> 3)  # CuTe Swizzle<3,4,3>(64): bits 7..9 into 4..6
    assert len(got) == 512 and got[1, 0] == f"index 1 -> offset {o}, bank {o * 2 // 4 % 32}"
    out = tmp_path / "b.svg"
    assert main(["banks", "ldsm.x4", "--smem", "(16,64):(64,1)", "--detail", "0",
                 "--svg", str(out)]) == 0
    root = parse(out.read_text())
    assert len(cells(root)) == 16 * 64
    assert texts(root)[0].startswith("ldsm.x4 over (16,64):(64,1): ")
    assert "wrote" in capsys.readouterr().out
