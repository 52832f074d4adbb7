"""The code that runs on the TPU hosts: the bundled trainer, its launcher, and the slice
context a user's own command reads (``from raytpu.workloads import slice_context``)."""

from raytpu.workloads.context import SliceContext as SliceContext
from raytpu.workloads.context import slice_context as slice_context

__all__ = ["SliceContext", "slice_context"]
