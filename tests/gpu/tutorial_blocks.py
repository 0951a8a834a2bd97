"""The code blocks of docs/tutorial.md, for tests/test_tutorial.py (CPU) and
tests/gpu/test_tutorial_gpu.py (GPU).

A block opens with a fence line of exactly ```` ```python ```` (runs everywhere) or
```` ```python gpu ```` (needs a GPU) and closes with ```` ``` ````.  Blocks run in
document order in one namespace, as a reader pasting them into one interpreter would.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
from pathlib import Path

TUTORIAL = Path(__file__).resolve().parents[2] / "docs" / "tutorial.md"
_FENCE = re.compile(r"^```python( gpu)?\s*\n(.*?)^```\s*$", re.M | re.S)


@dataclasses.dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    gpu: bool
    code: str


def blocks(text: str | None = None) -> list[Block]:
    text = TUTORIAL.read_text() if text is None else text
    return [Block(text.count("\n", 0, m.start()) + 1, bool(m.group(1)), m.group(2))
            for m in _FENCE.finditer(text)]


def run(selected: list[Block], namespace: dict | None = None) -> tuple[dict, list[str]]:
    """Execute the blocks in order; returns the namespace and each block's stdout.  A failing
    block raises AssertionError naming its line in the tutorial."""
    ns: dict = {"__name__": "tutorial"} if namespace is None else namespace
    outputs = []
    for b in selected:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(b.code, f"{TUTORIAL}:{b.line}", "exec"), ns)
        except Exception as e:
            raise AssertionError(
                f"docs/tutorial.md block at line {b.line} failed: {type(e).__name__}: {e}\n"
                f"its output so far:\n{out.getvalue()}") from e
        outputs.append(out.getvalue())
    return ns, outputs
