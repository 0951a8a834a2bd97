"""``import nvatom`` stays light: the GEMM, the runtime, the PTX builder and numpy
load only when ``nvatom.gemm`` is first used.  Checked in fresh interpreters."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
HEAVY = ("nvatom.gemm", "nvatom.runtime", "nvatom.ptx", "nvatom.kernels", "numpy")


def _loaded(statement: str) -> list[str]:
    code = f"{statement}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    env = dict(os.environ, PYTHONPATH=str(SRC) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(res.stdout.splitlines()[-1])


@pytest.mark.parametrize("statement", ["import nvatom", "import nvatom.layout"])
def test_import_loads_no_gemm_runtime_ptx_or_numpy(statement: str) -> None:
    mods = _loaded(statement)
    heavy = [m for m in mods if any(m == h or m.startswith(h + ".") for h in HEAVY)]
    assert heavy == [], f"{statement} loaded {heavy}"


def test_gemm_is_one_callable_module_however_reached() -> None:
    """``nvatom.gemm``, ``from nvatom import gemm`` and ``import nvatom.gemm as g`` are the same
    object, the module, whatever came first (it was the function through the package and the
    module through ``import ... as``, so tests patched a function's attributes by mistake);
    calling it runs ``gemm``."""
    code = ("import nvatom, sys\n"
            "assert 'nvatom.gemm' not in sys.modules\n"
            "f = nvatom.gemm\n"
            "assert f is sys.modules['nvatom.gemm'] and callable(f), f\n"
            "from nvatom import gemm\n"
            "assert gemm is f\n"
            "import nvatom.gemm as g\n"
            "assert g is f and g.gemm.__name__ == 'gemm'\n"
            "try:\n"
            "    f(1, 2)\n"
            "except Exception as e:\n"
            "    assert type(e).__name__ == 'TensorArgumentError', repr(e)\n"
            "else:\n"
            "    raise AssertionError('no error')")
    mods = _loaded(code)
    assert "nvatom.gemm" in mods


def test_gemm_module_imported_first_is_callable() -> None:
    """``import nvatom.gemm`` (or ``from nvatom.gemm import ...``) before ``nvatom.gemm`` is
    looked up leaves the module on the package; calling it runs the function."""
    code = ("import nvatom.gemm\n"
            "import nvatom, sys\n"
            "mod = sys.modules['nvatom.gemm']\n"
            "assert callable(nvatom.gemm)\n"
            "try:\n"
            "    nvatom.gemm(1, 2)\n"
            "except Exception as e:\n"
            "    assert type(e).__name__ == 'TensorArgumentError', repr(e)\n"
            "else:\n"
            "    raise AssertionError('no error')")
    _loaded(code)
