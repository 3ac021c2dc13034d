"""Independent finite-difference check of a corpus program's gradient, outside gradcheck.

``python fd_check.py PROGRAM`` builds the program exactly as its driver does (the driver's ``build()``), records one
forward on a ``wp.Tape`` and runs ``tape.backward(loss)`` as the program does, then, along 3 random directions
``d`` over all its params (entries of RMS 1, so a step h moves each param by about h), compares the tape's directional derivative ``g.d`` with central differences
``(L(p + h d) - L(p - h d)) / 2h``, evaluated in float64 from the program's float32 losses at steps 1e-1 ... 1e-4.
float32 rounding of a loss L puts noise of about ``eps32 |L| / h`` on each difference, so a direction AGREES when
some step whose difference stands above 30 ``eps32 |L| / h`` (the noise floor) is within 2% of the tape (or
within that floor), DISAGREES
when steps stand above the floor and none agrees, and gives NO VERDICT when all are below it. Nothing here imports
gradcheck. Exit 0 when every direction agrees, 1 when one disagrees, 2 otherwise; one line per direction.
"""

from __future__ import annotations

import importlib
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
STEPS = (1e-1, 3e-2, 1e-2, 3e-3, 1e-3, 3e-4, 1e-4)
EPS32 = float(np.finfo(np.float32).eps)


def _program(name: str):
    """(params, loss(), run_forward_backward()) of the corpus program ``name``."""
    import warp as wp

    module = importlib.import_module(name)
    if name.startswith("wnn_"):
        model, loss_fn = module.build()
        params = model.parameters()

        def loss():
            return float(loss_fn().numpy()[0])

        def backward():
            tape = wp.Tape()
            with tape:
                out = loss_fn()
            tape.backward(out)
            grads = [p.grad.numpy().astype(np.float64).copy() for p in params]
            tape.zero()
            return grads

        return params, loss, backward
    if name == "acc_hub_perturbation":
        solver = module.build()
        params = [solver.delta_omega]

        def loss():
            solver.forward()
            return float(solver.loss.numpy()[0])

        def backward():
            tape = wp.Tape()
            with tape:
                solver.forward()
            tape.backward(solver.loss)
            grads = [solver.delta_omega.grad.numpy().astype(np.float64).copy()]
            tape.zero()
            return grads

        return params, loss, backward
    if name.startswith("jsb_"):  # warp-jsb: params are fields of the AeroModelHandles struct the kernel takes
        _handles, params, forward = module.build()

        def loss():
            return float(forward().numpy()[0])

        def backward():
            tape = wp.Tape()
            with tape:
                out = forward()
            tape.backward(out)
            grads = [p.grad.numpy().astype(np.float64).copy() for p in params]
            tape.zero()
            return grads

        return params, loss, backward
    if name.startswith("wsph_"):  # warpSPHCore: torch leaves, the Warp tape runs inside torch's backward
        import torch

        params, loss_fn = module.build()

        def loss():
            with torch.no_grad():
                return float(loss_fn().item())

        def backward():
            for p in params:
                p.grad = None
            loss_fn().backward()
            return [p.grad.numpy().astype(np.float64).copy() for p in params]

        return [p.detach() for p in params], loss, backward  # detached CPU tensors: .numpy() views share storage
    raise SystemExit(f"fd_check: no adapter for program {name!r}")


def main(name: str) -> int:
    params, loss, backward = _program(name)
    grads = backward()
    base = [p.numpy().copy() for p in params]
    views = [p.numpy() for p in params]  # CPU arrays: zero-copy views, written in place
    rng = np.random.default_rng(0)
    l0 = loss()
    verdicts = []
    for k in range(3):
        dirs = [rng.normal(size=b.shape) for b in base]
        norm = np.sqrt(sum(float((d * d).sum()) for d in dirs))
        count = sum(b.size for b in base)
        dirs = [d * np.sqrt(count) / norm for d in dirs]  # entries of RMS 1: a step h moves each param by ~h
        ad = sum(float((g * d).sum()) for g, d in zip(grads, dirs))
        rows = []
        agree = settled = False
        for h in STEPS:
            values = []
            for sign in (1.0, -1.0):
                for v, b, d in zip(views, base, dirs):
                    v[...] = (b.astype(np.float64) + sign * h * d).astype(b.dtype)
                values.append(loss())
            for v, b in zip(views, base):
                v[...] = b
            fd = (values[0] - values[1]) / (2.0 * h)
            err = abs(fd - ad)
            noise = 30.0 * EPS32 * abs(l0) / h
            above_noise = abs(fd) > noise
            agree |= above_noise and err <= max(0.02 * max(abs(ad), abs(fd)), noise)
            settled |= above_noise
            rows.append(f"h={h:g}: {fd:.6g}")
        verdict = "AGREE" if agree else "DISAGREE" if settled else "NO VERDICT (below float32 noise)"
        verdicts.append(verdict)
        print(f"{name} direction {k}: tape {ad:.6g}; central differences " + ", ".join(rows) + f" -> {verdict}")
    return 0 if all(v == "AGREE" for v in verdicts) else 1 if "DISAGREE" in verdicts else 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
