"""Every operation of the three dialects, registered with xDSL: those of :mod:`nvatom.ir.dialect`
and those of the ``ops_*`` modules, which subclass its operations (the driver's context is
built from :data:`DIALECTS`; importing the ``ops_*`` modules from ``dialect`` would close an
import cycle)."""

from __future__ import annotations

from nvatom.ir import dialect as DL
from nvatom.ir import ops_copy, ops_pipeline, ops_sync, ops_tma
from nvatom.ir import xdsl_adapter as X

__all__ = ["ALL_OPS", "DIALECTS", "EXTRA_OPS"]

#: the operations of ir/ops_tma.py, ir/ops_copy.py and ir/ops_sync.py, by dialect
EXTRA_OPS = {"cute": [*ops_sync.SYNC_CUTE_OPS, *X.irdl_ops(*ops_copy.CUTE_OPS)],
             "cute_nvgpu": [*X.irdl_ops(*ops_tma.OPS, *ops_copy.OPS), *ops_sync.SYNC_NVGPU_OPS]}
ALL_OPS = [*DL.ALL_OPS, *(op for ops in EXTRA_OPS.values() for op in ops), *ops_pipeline.OPS]
#: the three dialects of ir/dialect.py with the ops_* modules' operations, and the ``cutlass``
#: dialect of ir/ops_pipeline.py (pipelines and tile schedulers)
DIALECTS = [*((name, [*ops, *EXTRA_OPS.get(name, [])], types) for name, ops, types in DL.DIALECTS),
            ("cutlass", ops_pipeline.OPS, ops_pipeline.TYPES)]
