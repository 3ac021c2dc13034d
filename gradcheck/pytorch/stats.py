"""A torch gradient's statistics, as gradcheck.measure.gradients reads a Warp one: the same ParamPass fields.

Norms are over the finite values, accumulated in float64; the checksum is a bit-exact fingerprint (the raw bits
weighted by position, summed in int64 on the tensor's device), so "rewritten" means a bit changed. One device
synchronisation per tensor: the few numbers come back together.
"""

from __future__ import annotations

import math

from gradcheck.model.trace import ParamPass

_WEIGHTS: dict = {}


def absent(index: int) -> ParamPass:
    """A tensor whose ``.grad`` is None after backward."""
    return ParamPass(
        has_grad=False, norm=0.0, max_abs=0.0, nonzero=0, nonfinite=0, equal_to_first=True, diff_norm=0.0,
        coef=math.nan, index=index,
    )  # fmt: skip


def _flat(tensor):
    """The values as one real vector: a sparse gradient's stored values, a complex one's real and imaginary parts."""
    import torch

    t = tensor.detach()
    if t.is_sparse:
        t = t.coalesce().values()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t.reshape(-1)


def fingerprint(tensor) -> int:
    """Bit-exact fingerprint of a tensor's values (0 for an empty one)."""
    import torch

    flat = _flat(tensor)
    if flat.numel() == 0:
        return 0
    bits = _bits(torch, flat)
    return int((bits * _weights(torch, bits.numel(), bits.device)).sum())


def _bits(torch, flat):
    size = flat.element_size()
    as_int = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}[size]
    if not flat.is_contiguous():
        flat = flat.contiguous()
    return flat.view(as_int).to(torch.int64)


def _weights(torch, n: int, device):
    key = (n, str(device))
    w = _WEIGHTS.get(key)
    if w is None:
        if len(_WEIGHTS) > 256:
            _WEIGHTS.clear()
        w = _WEIGHTS[key] = torch.arange(1, n + 1, dtype=torch.int64, device=device) * 2654435761 % 1000003 + 1
    return w


def read(grad, index: int, scale: float = 1.0) -> ParamPass:
    """The statistics of ``grad`` after backward ``index``; ``scale``: GradScaler multiplied the loss by it, so the
    gradient is scaled too (divided out), and non-finite values are GradScaler's to find (it skips that step)."""
    import torch

    flat = _flat(grad)
    if not flat.is_floating_point() or flat.numel() == 0:
        return ParamPass(True, 0.0, 0.0, 0, 0, True, 0.0, math.nan, index=index, checksum=0)
    finite = torch.isfinite(flat)
    values = torch.where(finite, flat, torch.zeros((), dtype=flat.dtype, device=flat.device)).double()
    numbers = torch.stack(
        [
            torch.linalg.vector_norm(values),
            values.abs().max(),
            torch.count_nonzero(flat).double(),
            (~finite).sum().double(),
            torch.isnan(flat).sum().double(),
        ]
    ).tolist()
    norm, max_abs, nonzero, nonfinite, nan = numbers
    if scale != 1.0:
        norm, max_abs, nonfinite, nan = norm / scale, max_abs / scale, 0, 0
    return ParamPass(
        has_grad=True,
        norm=norm,
        max_abs=max_abs,
        nonzero=int(nonzero),
        nonfinite=int(nonfinite),
        equal_to_first=True,  # a training program moves its params: pass k is not compared with pass 1
        diff_norm=0.0,
        coef=math.nan,
        nan=int(nan),
        inf=int(nonfinite - nan),
        checksum=fingerprint(flat),
        index=index,
    )


def nonzero_norm(grad) -> tuple[int, float]:
    """(nonzero values, norm over the finite ones) of a gradient: what a leftover is."""
    import torch

    flat = _flat(grad)
    if not flat.is_floating_point() or flat.numel() == 0:
        return 0, 0.0
    finite = torch.where(torch.isfinite(flat), flat, torch.zeros((), dtype=flat.dtype, device=flat.device))
    nonzero, norm = torch.stack(
        [torch.count_nonzero(flat).double(), torch.linalg.vector_norm(finite.double())]
    ).tolist()
    return int(nonzero), norm


def sums(tensors: list) -> list[list[float] | None]:
    """A cross-rank fingerprint of each tensor (pytorch.rank_compare): its sum, sum of magnitudes, sum of squares and
    two strided sub-sums (None for None, or for a tensor that is not floating point). Summed in the tensor's own
    precision (float32 for half types) without a temporary of its size (a norm, not ``x * x``; strided views):
    rounding there is far below the comparison's bound, and identical tensors give identical sums. One device
    synchronisation per device, whatever the number of tensors."""
    import torch

    found: list[list[float] | None] = [None] * len(tensors)
    by_device: dict[str, list] = {}
    for k, tensor in enumerate(tensors):
        if tensor is None:
            continue
        flat = _flat(tensor)
        if not flat.is_floating_point():
            continue
        values = flat if flat.dtype in (torch.float32, torch.float64) else flat.float()
        norm = torch.linalg.vector_norm
        parts = [values.sum(), norm(values, 1), norm(values, 2) ** 2, values[0::3].sum(), values[1::7].sum()]
        by_device.setdefault(str(flat.device), []).append((k, torch.stack(parts).double()))
    for rows in by_device.values():
        numbers = torch.stack([row for _, row in rows]).cpu().tolist()
        for (k, _), row in zip(rows, numbers, strict=True):
            found[k] = row
    return found


def eps(tensor) -> float:
    """The unit roundoff of a tensor's dtype (float32's for anything that is not floating point)."""
    import torch

    dtype = tensor.dtype if tensor.is_floating_point() else torch.float32
    return float(torch.finfo(dtype).eps)
