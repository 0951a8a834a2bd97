"""``make demo`` on a fresh machine: the install step says what it is doing (issue 28).

The ``$(STAMP)`` rule installs for about 30 s with ``pip -q``; each command that takes time
must follow an ``@echo`` saying what it is about to do, and what is installed stays the same.
Read from the Makefile (nothing is installed here)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _stamp_recipe() -> list[str]:
    lines = (ROOT / "Makefile").read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith("$(STAMP):"))
    recipe = []
    for ln in lines[start + 1:]:
        if not ln.startswith("\t"):
            break
        recipe.append(ln[1:])
    return recipe


def test_every_slow_step_of_the_install_is_announced() -> None:
    recipe = [ln for ln in _stamp_recipe() if not ln.startswith("#")]
    slow = [i for i, ln in enumerate(recipe) if " -m venv " in ln or " -m pip " in ln]
    assert len(slow) == 4
    for n, i in enumerate(slow, 1):
        assert recipe[i - 1].startswith("@echo"), recipe[i]
        said = [ln for ln in recipe[slow[n - 2] + 1 if n > 1 else 0:i] if ln.startswith("@echo")]
        assert any(f"[{n}/4]" in ln for ln in said), recipe[i]
    assert recipe[0].startswith("@echo") and "about 30 s" in recipe[0]
    assert recipe[-1].startswith("@echo") and "ready" in recipe[-1]


def test_what_is_installed_is_unchanged() -> None:
    pip = [re.sub(r"\s+", " ", ln) for ln in _stamp_recipe() if " -m pip " in ln]
    assert pip == [
        "$(VPY) -m pip install -q --disable-pip-version-check -U pip",
        "$(VPY) -m pip install -q --disable-pip-version-check -e '.[test,sm70,ir]'",
        "$(VPY) -m pip install -q --disable-pip-version-check --no-deps nvidia-cutlass==4.2.0.0",
    ]


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_make_prints_the_steps_in_order(tmp_path) -> None:
    """``make -n`` (nothing runs): the announcements come before the commands they name."""
    r = subprocess.run(["make", "-n", "demo", f"STAMP={tmp_path}/stamp", f"VENV={tmp_path}/v"],
                       cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    steps = [out.index(f"[{n}/4]") for n in range(1, 5)]
    assert steps == sorted(steps)
    assert out.index("[3/4]") < out.index("-e '.[test,sm70,ir]'") < out.index("[4/4]")
