"""A kernel's own syntax tree (``kernel.adj.tree``, Warp's parse of the kernel's source), for questions about what
its code does with an argument (gradcheck.observe.differencing)."""

from __future__ import annotations


def kernel_function(kernel):
    """The kernel's ``ast.FunctionDef``; None when Warp kept none (a generic or native kernel)."""
    from gradcheck.warp_compat.kernel_access import _function_def

    tree = getattr(getattr(kernel, "adj", None), "tree", None)
    return _function_def(tree) if tree is not None else None
