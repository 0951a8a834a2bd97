"""Hardware tables read by more than one room: the shared-memory swizzle modes and canonical
tiles (:mod:`.swizzles`) and the tcgen05.mma shape table (:mod:`.umma_shapes`).

They sit below ``nvatom.atoms`` and ``nvatom.descriptors`` (both read them) and import only
the layout algebra and ``errors``; docs/ARCHITECTURE.md has the room table.
"""
