"""The ``cute_nvgpu`` textual IR on xDSL: dialects, verification, lowering to PTX.

Only :mod:`nvatom.ir.xdsl_adapter` imports xDSL.  See docs/ir.md.
"""
