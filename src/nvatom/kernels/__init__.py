"""Kernels built only from nvatom's atoms and layouts (for now: the mma.sync demo)."""
