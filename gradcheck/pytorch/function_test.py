"""A custom ``torch.autograd.Function`` tested against its own forward, as users test one by hand with
``torch.autograd.gradcheck``, but in the program's own precision (Warp kernels are float32) and aware of noise.

The first call of each Function (and input dtypes and ranks) keeps detached copies of its tensor inputs
(``keep``). Once the program's backward has run, ``test`` runs the Function again on copies of those copies:

- a dot-product test: random output weights w, a random input direction u (each input scaled by its own RMS, as
  gradcheck.rerun.finite_diff perturbs params), ``<J^T w, u>`` from the Function's backward (``torch.autograd.grad``)
  against ``<w, dF/du>`` from central differences of its forward at several steps, judged by finite_diff's ``Judge``
  (converged across steps, beyond the measured noise, not at a kink; anything less is no verdict);
- whether its backward runs Warp (gradcheck.warp_compat.torch_interop.WarpActivity): a Function whose
  backward is pure torch and disagrees is reported as a possible surrogate gradient (a straight-through estimator,
  gradient reversal: wrong on purpose), never as an error;
- no verdict for a forward that is not a function of its inputs: it draws random numbers, writes its inputs or any
  state it reaches (gradcheck.pytorch.side_effects), or gives different outputs on the same inputs.

The program never notices: its tensors are never handed to the Function, every random generator and everything the
Function reached is put back, and the Function's own prints go nowhere.
"""

from __future__ import annotations

import contextlib
import io
import math
from dataclasses import dataclass

from gradcheck.model.trace import LaunchVerdict
from gradcheck.rerun.finite_diff import Rollouts, param_scale

FUNCTION = "torch.autograd.Function"  # LaunchVerdict.kernel of a Function's test: "torch.autograd.Function Name"
SURROGATE = "surrogate"  # LaunchVerdict.status of a pure-torch Function whose backward disagrees with its forward
KEEP_BUDGET_BYTES = 64 << 20  # copies of one call's inputs
REPEAT_TOLERANCE = 1e-5  # two runs on the same inputs may differ by this (relative): CUDA atomics reorder sums


@dataclass
class FunctionCall:
    """The first call of a Function: copies of its arguments, which tensors required grad, where it was called."""

    cls: type
    arguments: list  # tensors detached and cloned; anything else as passed
    needs_grad: list  # per argument: a float tensor that required grad (a direction of the test)
    kwargs: dict
    site: str | None
    index: int

    @property
    def name(self) -> str:
        return f"{FUNCTION} {self.cls.__qualname__}"


def class_site(cls) -> str | None:
    """``file:line`` of the Function's class statement (what its findings point at), or None (a class made at run
    time from a string)."""
    import inspect

    try:
        return f"{inspect.getsourcefile(cls)}:{inspect.getsourcelines(cls)[1]}"
    except (TypeError, OSError):
        return None


def signature(cls, args: tuple) -> tuple:
    """What makes a call a new test: the class, and each tensor argument's dtype and rank."""
    import torch

    return (cls, tuple((a.dtype, a.dim()) for a in args if isinstance(a, torch.Tensor)))


def keep(cls, args: tuple, kwargs: dict, site: str | None, index: int) -> FunctionCall | str | None:
    """Copies of the call's arguments, before its forward runs (a forward may write its inputs); None when there
    is nothing to test (no float input requires grad), a reason when it cannot be tested."""
    import torch

    if not torch.is_grad_enabled():
        return None
    needs = [isinstance(a, torch.Tensor) and a.requires_grad and a.is_floating_point() for a in args]
    if not any(needs):
        return None
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    if any(t.layout != torch.strided or t.is_complex() for t in tensors):
        return "a sparse or complex input"
    if sum(t.numel() * t.element_size() for t in tensors) > KEEP_BUDGET_BYTES:
        return "its inputs are over the memory budget for copies"
    arguments = [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]
    return FunctionCall(cls, arguments, needs, dict(kwargs), site, index)


class _Rollouts(Rollouts):
    """The Judge's rollouts: the Function's weighted outputs at perturbed inputs."""

    def __init__(self, evaluate):
        self.evaluate, self.count, self.output_size = evaluate, 0, 1

    def loss(self, delta: dict) -> float:
        self.count += 1
        return self.evaluate(delta)


def test(call: FunctionCall, program: dict, options, seed: int = 0) -> LaunchVerdict:
    """The verdict on ``call``'s Function; ``program``: the program's own tensors (name -> tensor), kept
    and put back with everything else the Function reaches."""
    from gradcheck.pytorch.side_effects import RandomState, Snapshot

    state = Snapshot(call.cls, call.arguments, program)
    generators = RandomState()
    sink = io.StringIO()
    try:
        with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
            verdict = _Test(call, state, generators, options, seed).run()
    finally:
        written = state.changed()
        state.restore()
        generators.restore()
    if written and verdict.status not in ("not-checked", "no-verdict"):
        verdict = _verdict(call, "no-verdict", note=f"running it again changed {_listed(written)}: not a function "
                           "of its inputs alone, so not tested")  # fmt: skip
    return verdict


class _Test:
    def __init__(self, call: FunctionCall, state, generators, options, seed: int) -> None:
        import numpy as np

        self.call, self.state, self.generators, self.options = call, state, generators, options
        self.rng = np.random.default_rng(seed)

    def run(self) -> LaunchVerdict:
        import numpy as np

        call = self.call
        inputs = self.inputs({})
        try:
            base = self.forward({}, inputs)
        except Exception as exc:  # noqa: BLE001 - the Function itself fails on copies: not the test's to judge
            return _verdict(call, "not-checked", note=f"running it again on copies raised {type(exc).__name__}")
        unclean = self.side_effects(inputs)
        if unclean:
            return _verdict(call, "no-verdict", note=unclean)
        again = self.forward({})
        if not _same(base, again):
            return _verdict(call, "no-verdict", note="two runs on the same inputs gave different outputs: its forward "
                            "is not a function of its inputs alone")  # fmt: skip
        outputs = [i for i, out in enumerate(base) if out is not None]
        if not outputs:
            return _verdict(call, "not-checked", note="no float output carries a gradient")
        weights = {i: self.rng.standard_normal(tuple(base[i].shape)) for i in outputs}
        grads, warp = self.adjoint(weights)
        if isinstance(grads, str):
            return _verdict(call, "not-checked", note=grads)
        direction = self.direction(grads)
        ad = sum(float(np.sum(grads[i] * direction[i])) for i in direction)

        def weighted(outs) -> float:
            return float(sum(np.sum(weights[i] * outs[i].double().cpu().numpy()) for i in outputs))

        from gradcheck.rerun.finite_diff import Judge

        rollouts = _Rollouts(lambda delta: weighted(self.forward(delta)))
        probe = Judge(rollouts, weighted(base), self.options).probe("function", ad, direction, 0.0)
        fields = {"rel_error": probe.rel_error, "ad": ad, "fd": probe.fd, "rollouts": rollouts.count}
        moved = self.generators.drawn() + self.state.changed()
        if moved:
            return _verdict(call, "no-verdict", note=f"its backward changed {_listed(moved)}: not tested", **fields)
        if not probe.converged:
            return _verdict(call, "no-verdict", note="its central differences did not settle", **fields)
        if probe.rel_error < self.options.warn:
            return _verdict(call, "ok", note=None if warp else "its backward runs no Warp", **fields)
        if probe.rel_error < self.options.error:
            return _verdict(call, "no-verdict", note="a disagreement below the error band", **fields)
        if warp and not _surrogate_shaped(ad, probe.fd):
            return _verdict(call, "mismatch", note="its backward (which runs Warp) disagrees with central differences "
                            "of its forward", **fields)  # fmt: skip
        if warp:
            why = "its backward runs Warp, but the disagreement is shaped as a surrogate's (a flat forward, a reversed "
            why += "gradient)"
        else:
            why = "its backward runs no Warp" + (" (could not tell: the thread is profiled)" if warp is None else "")
        return _verdict(call, SURROGATE, note=why, **fields)

    def inputs(self, delta: dict) -> list:
        """Fresh copies of the kept arguments, ``delta`` (argument index -> numpy array) added; those that
        required grad require it again."""
        import torch

        made = []
        for i, value in enumerate(self.call.arguments):
            if isinstance(value, torch.Tensor):
                value = value.clone()
                if i in delta:
                    value += torch.as_tensor(delta[i], dtype=value.dtype, device=value.device)
                value.requires_grad_(self.call.needs_grad[i])
            made.append(value)
        return made

    def forward(self, delta: dict, inputs: list | None = None) -> list:
        """The Function's float outputs that carry a gradient, detached (None for the others), at the kept inputs
        plus ``delta`` (or on ``inputs``)."""
        import torch

        with torch.enable_grad():
            result = self.call.cls.apply(*(inputs if inputs is not None else self.inputs(delta)), **self.call.kwargs)
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        chosen = []
        for out in outs:
            ok = isinstance(out, torch.Tensor) and out.is_floating_point() and out.requires_grad
            chosen.append(out.detach() if ok else None)
        return chosen

    def side_effects(self, inputs: list) -> str | None:
        """Why the first run again (on ``inputs``) is not a clean function of its inputs, or None."""
        import torch

        drawn = self.generators.drawn()
        if drawn:
            return f"its forward draws random numbers ({', '.join(drawn)}): not a function of its inputs, not tested"
        written = [i for i, (a, b) in enumerate(zip(inputs, self.call.arguments))
                   if isinstance(a, torch.Tensor) and not _unchanged(a, b)]  # fmt: skip
        if written:
            return f"its forward writes its input(s) #{', #'.join(map(str, written))} in place: not tested"
        changed = self.state.changed()
        if changed:
            return f"its forward changes {_listed(changed)}: not a function of its inputs alone, not tested"
        return None

    def adjoint(self, weights: dict):
        """(input index -> J^T w as float64 numpy, whether the backward ran Warp); or why it could not run."""
        import torch

        from gradcheck.warp_compat.torch_interop import WarpActivity

        inputs = self.inputs({})
        with torch.enable_grad():
            result = self.call.cls.apply(*inputs, **self.call.kwargs)
        outs = list(result) if isinstance(result, (tuple, list)) else [result]
        chosen = [(outs[i], torch.as_tensor(w, dtype=outs[i].dtype, device=outs[i].device)) for i, w in weights.items()]
        activity, handles = WarpActivity(), []
        node = chosen[0][0].grad_fn
        if node is not None:
            handles = [
                node.register_prehook(lambda g: activity.start()),
                node.register_hook(lambda gi, go: activity.stop()),
            ]
        wanted = [i for i, needs in enumerate(self.call.needs_grad) if needs]
        try:
            grads = torch.autograd.grad([o for o, _w in chosen], [inputs[i] for i in wanted],
                                        [w for _o, w in chosen], allow_unused=True)  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - its backward fails on copies
            return f"its backward raised {type(exc).__name__} on copies", None
        finally:
            activity.stop()
            for handle in handles:
                handle.remove()
        # a backward that writes an input's gradient through a wp.from_torch alias of its .grad and returns None for
        # it: autograd.grad never writes .grad, so what the copy's .grad holds is what the backward wrote there
        grads = [g if g is not None else inputs[i].grad for i, g in zip(wanted, grads)]
        found = {i: g.detach().double().cpu().numpy() for i, g in zip(wanted, grads) if g is not None}
        if not found:
            return "its backward returns no gradient for any input", None
        return found, (None if activity.unknown and not activity.seen else activity.seen)

    def direction(self, grads: dict) -> dict:
        """A random direction over the inputs the backward gives a gradient for, each scaled by its own RMS, of
        the size of those scales together (as unit_replay perturbs a launch's inputs)."""
        import numpy as np

        x0 = {i: self.call.arguments[i].detach().double().cpu().numpy() for i in grads}
        scale = {i: param_scale(x0[i]) for i in grads}
        raw = {i: scale[i] * self.rng.standard_normal(x0[i].shape) for i in grads}
        norm = math.sqrt(sum(float(np.sum(r * r)) for r in raw.values())) or 1.0
        size = math.sqrt(sum(s**2 for s in scale.values()))
        return {i: size * raw[i] / norm for i in grads}


def _unchanged(now, kept) -> bool:
    import torch

    return torch.equal(now.detach(), kept) or bool(torch.isnan(kept).any() and torch.equal(now.isnan(), kept.isnan()))


def _surrogate_shaped(ad: float, fd: float) -> bool:
    """A disagreement a surrogate gradient has on purpose, whatever computes it: the forward is flat where the
    backward is not (a straight-through estimator of a rounding, a sign), or the backward is the derivative
    reversed (gradient reversal). The same shapes the kernel test gives hand-written Warp adjoints the benefit of."""
    return abs(fd) <= 1e-3 * abs(ad) or abs(ad + fd) <= 0.05 * abs(fd)


def _same(a: list, b: list) -> bool:
    """Two runs' outputs agree within REPEAT_TOLERANCE of each output's largest value."""
    for x, y in zip(a, b):
        if x is None or y is None:
            if (x is None) != (y is None):
                return False
            continue
        if x.shape != y.shape:
            return False
        if x.numel() and float((x - y).abs().max()) > REPEAT_TOLERANCE * max(float(x.abs().max()), 1e-30):
            return False
    return True


def _listed(names: list[str]) -> str:
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _verdict(call: FunctionCall, status: str, note: str | None = None, **fields) -> LaunchVerdict:
    return LaunchVerdict(call.index, call.name, call.site, status, note=note, **fields)
