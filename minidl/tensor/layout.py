"""md.layout: PyTorch's name for how a tensor's elements are stored. minidl has one layout,
``md.strided`` (a dense array with a stride per dim, what every minidl tensor is), so
``t.layout`` is always ``md.strided`` and the factories accept ``layout=md.strided`` (or None)
for scripts that pass it. A sparse or other layout is refused as md.sparse_coo is
(minidl/_unsupported.py): NotImplementedError naming what was asked for.
"""


from .memory_format import NamedConstant


class layout(NamedConstant):   # noqa: N801  (PyTorch's name)
    __slots__ = ()


strided = layout("strided")


def check(value, op="this function"):
    """Accept ``value`` if it is None or md.strided. Another layout (a foreign one, such as
    torch.sparse_coo) raises NotImplementedError as minidl's sparse refusal does; anything that is
    not a layout at all raises TypeError, as PyTorch's argument parser does."""
    if value is None or value is strided:
        return strided
    if type(value).__name__ == "layout":
        raise NotImplementedError(f"{op}: layout={value!r} is not implemented: minidl deliberately does not "
                                  f"support sparse tensors (only layout=minidl.strided, dense tensors)")
    raise TypeError(f"{op}: layout must be a minidl.layout (minidl.strided), got {type(value).__name__}")
