"""One unit of the per-launch adjoint test: one launch (or a few, for a split adjoint) replayed on private copies.

The dot-product test: random output weights w, a direction u of the unit's inputs (the program's own tangent when
there is one), and <w, dF/du> by the noise-aware central differences of gradcheck.probes.finite_diff against
<J^T w, u> from the unit's adjoints run as the tape's backward would run them (inputs as the launches read them,
outputs as they left them). And the accumulation test: with the input gradients prefilled at random, the adjoint
must add to them. Only inputs that depend on the params and outputs the loss depends on take part.
"""

from __future__ import annotations

import math

from gradcheck.model.options import FDOptions
from gradcheck.model.trace import LaunchVerdict
from gradcheck.probes.finite_diff import Rollouts, param_scale
from gradcheck.probes.launch_record import Launch, is_plain_array


def _label(unit: list[Launch]) -> tuple[int, str, str | None]:
    first = unit[0]
    return first.index, first.kernel.key, first.where


def _not_checked(unit, why: str) -> LaunchVerdict:
    index, key, where = _label(unit)
    return LaunchVerdict(index, key, where, "not-checked", note=why)


class _UnitRollouts(Rollouts):
    """The judge's rollouts for one unit: the weighted outputs of the unit replayed at perturbed inputs."""

    def __init__(self, evaluate):
        self.evaluate, self.count, self.output_size = evaluate, 0, 1

    def loss(self, delta: dict) -> float:
        self.count += 1
        return self.evaluate(delta)


def _tangent(unit: list[Launch], keys: list[int], tangents) -> dict | None:
    """The program's own tangent of the unit's inputs (each as the first launch of the unit read it), or None
    when there is none or it is zero."""
    import numpy as np

    if not tangents:
        return None
    found = {}
    for key in keys:
        for launch in unit:
            if key in launch.pre and key in tangents.get(launch.index, {}):
                found[key] = tangents[launch.index][key]
                break
        else:
            found[key] = None
    if any(v is None for v in found.values()) or not any(np.any(v != 0) for v in found.values()):
        return None
    return found


def test_unit(unit: list[Launch], options: FDOptions, rng, read_after, path, tangents=None) -> LaunchVerdict:
    """The verdict on one unit (see the module docstring)."""
    refused = _refused(unit)
    if refused:
        return _not_checked(unit, refused)
    replay = _Replay(unit)
    chosen = replay.choose(read_after, path)
    if isinstance(chosen, str):
        return _not_checked(unit, chosen)
    finals, perturbable = chosen
    return replay.judge(finals, perturbable, options, rng, tangents)


def _refused(unit: list[Launch]) -> str | None:
    """Why the unit cannot be replayed, or None."""
    from gradcheck.probes.warp_compat import backward_disabled, is_struct_instance

    for launch in unit:
        if not launch.pre and any(is_plain_array(v) for v in launch.inputs + launch.outputs):
            return "over the memory budget for copies of forward values"
        if any(is_struct_instance(v) for v in launch.inputs + launch.outputs):
            return "takes a struct argument (not replayed yet)"
        if backward_disabled(launch.kernel):
            return "built with enable_backward=False"
    return None


class _Replay:
    """The unit's launches run again on private buffers: forward (perturbed or not), then adjoint."""

    def __init__(self, unit: list[Launch]):
        import warp as wp

        self.unit = unit
        self.arrays: dict[int, object] = {}
        for launch in unit:
            for v in launch.inputs + launch.outputs:
                if is_plain_array(v):
                    self.arrays.setdefault(id(v), v)
        self.outputs = set().union(*(launch.writes for launch in unit))
        self.first_pre: dict = {}
        for launch in unit:
            for key, copy in launch.pre.items():
                self.first_pre.setdefault(key, copy)
        self.post: dict[int, dict] = {}  # launch index → its arrays as it left them (the base run)
        self.buffers = {key: wp.clone(self.first_pre[key], requires_grad=False) for key in self.arrays}
        self.base = {key: wp.clone(v, requires_grad=False) for key, v in self.forward(keep=True).items()}
        # as the tape's backward sees them: only arrays that require grad have adjoints (kernels test for them:
        # Featherstone's solve adjoint returns early without one), so only those are perturbed and weighed
        self.grads = {key for key, a in self.arrays.items() if getattr(a, "requires_grad", False)}

    def forward(self, perturb: dict | None = None, keep: bool = False) -> dict:
        """Run the unit from the values its first launch read (``perturb``: key → added to an input)."""
        import numpy as np
        import warp as wp

        perturb = perturb or {}
        work = self.buffers
        for key in self.arrays:
            wp.copy(work[key], self.first_pre[key])
        produced: set[int] = set()  # arrays an earlier launch of the unit wrote: those flow on
        for position, launch in enumerate(self.unit):
            # everything else as this launch found it in the forward (launches outside the unit may have run in
            # between), with the perturbation of the unit's inputs applied again
            for key, copy in launch.pre.items():
                if key in produced or (position == 0 and key not in perturb):
                    continue
                if key in perturb:
                    values = copy.numpy().astype(np.float64) + perturb[key]
                    work[key].assign(values.astype(copy.numpy().dtype))
                else:
                    wp.copy(work[key], copy)
            _launch(launch, work)
            produced |= launch.writes
            if keep:
                self.post[launch.index] = {key: wp.clone(work[key], requires_grad=False) for key in launch.writes}
        return work

    def choose(self, read_after, path) -> tuple[list, list] | str:
        """(outputs to weigh, inputs to perturb) on the gradient path, or why there are none."""
        from gradcheck.probes.warp_compat import is_float_array

        arrays, unit = self.arrays, self.unit
        # bytes, not values: writing -0.0 over 0.0 is a write (Newton's eval_rigid_tau stores -f into its input
        # body_f_ext), and Warp's adjoint treats a written input's gradient as an output's
        written = {key for key in arrays if _raw(self.base[key]) != _raw(self.first_pre[key])} | self.outputs
        read = [id(v) for launch in unit for v in launch.inputs if is_plain_array(v)]
        depends, feeds = path
        grads = self.grads
        if any(k in read and k not in self.outputs and k in grads and (k in depends or k in feeds) for k in written):
            return "updates an input array in place (Warp's adjoint does not support that)"
        last = unit[-1].index
        finals = [k for k in written if read_after(k, last) and is_float_array(arrays[k]) and k in grads and k in feeds]
        perturbable = [
            k
            for k in dict.fromkeys(read)
            if k not in written and k in grads and k in depends and is_float_array(arrays[k])
        ]
        if not finals or not perturbable:
            return "no float input to perturb or float output to weigh"
        return finals, perturbable

    def adjoint(self, weights: dict, perturbable: list, prefill: dict) -> dict:
        """The unit's adjoints run backward as the tape runs them: output weights in, input gradients out
        (``prefill``: what the input gradients hold before)."""
        import numpy as np
        import warp as wp

        first_pre = self.first_pre
        adj = {key: wp.zeros_like(first_pre[key], requires_grad=False) for key in self.arrays if key in self.grads}
        for key, values in {**weights, **prefill}.items():
            adj[key].assign(values.astype(first_pre[key].numpy().dtype))
        for launch in reversed(self.unit):
            # as the tape's backward replays it: inputs as the launch read them, outputs as it left them
            own = self.replayed[launch.index]
            for key, copy in {**launch.pre, **self.post[launch.index]}.items():
                wp.copy(own[key], copy)
            wp.launch(
                launch.kernel,
                launch.dim,
                inputs=[own.get(id(v), v) if is_plain_array(v) else v for v in launch.inputs],
                outputs=[own.get(id(v), v) if is_plain_array(v) else v for v in launch.outputs],
                adj_inputs=[adj.get(id(v)) if is_plain_array(v) else _zero_like(v) for v in launch.inputs],
                adj_outputs=[adj.get(id(v)) if is_plain_array(v) else _zero_like(v) for v in launch.outputs],
                adjoint=True,
                device=launch.options["device"],
                **_launch_options(launch),
            )
        return {key: adj[key].numpy().astype(np.float64) for key in perturbable}

    def judge(self, finals: list, perturbable: list, options: FDOptions, rng, tangents) -> LaunchVerdict:
        import numpy as np
        import warp as wp

        from gradcheck.probes.finite_diff import F32_EPS, Judge

        base, unit = self.base, self.unit
        weights = {key: rng.standard_normal(base[key].numpy().shape) for key in finals}
        direction = self._direction(perturbable, rng, tangents)
        self.replayed = {
            launch.index: {
                k: wp.clone(c, requires_grad=False) for k, c in {**launch.pre, **self.post[launch.index]}.items()
            }
            for launch in unit
        }

        def weighted(work: dict) -> float:
            return float(sum(np.sum(weights[k] * work[k].numpy().astype(np.float64)) for k in finals))

        magnitude = float(sum(np.sum(np.abs(weights[k] * base[k].numpy().astype(np.float64))) for k in finals))
        clean = self.adjoint(weights, perturbable, {})
        prefill = {key: rng.standard_normal(direction[key].shape) for key in perturbable}
        filled = self.adjoint(weights, perturbable, prefill)
        ad = sum(float(np.sum(clean[k] * direction[k])) for k in perturbable)
        rollouts = _UnitRollouts(lambda delta: weighted(self.forward(delta)))
        judge = Judge(rollouts, weighted(base), options, sigma=F32_EPS * max(magnitude, 1e-30))
        probe = judge.probe("unit", ad, direction, 0.0)
        index, key, where = _label(unit)
        fields = (probe.rel_error, ad, probe.fd, rollouts.count)
        if _overwrites(clean, prefill, filled, perturbable):
            note = "its adjoint overwrites the input gradients instead of adding to them"
            return LaunchVerdict(index, key, where, "assigns", *fields, note=note)
        if not probe.converged:
            return LaunchVerdict(index, key, where, "no-verdict", *fields)
        return LaunchVerdict(index, key, where, "mismatch" if probe.rel_error >= options.warn else "ok", *fields)

    def _direction(self, perturbable: list, rng, tangents) -> dict:
        """The program's tangent of the inputs when it reaches them, else a random one scaled per array; of the
        size of the inputs' scales together."""
        import numpy as np

        x0 = {key: self.first_pre[key].numpy().astype(np.float64) for key in perturbable}
        scale = {key: param_scale(x0[key]) for key in perturbable}
        raw = _tangent(self.unit, perturbable, tangents)
        if raw is None:
            raw = {key: scale[key] * rng.standard_normal(x0[key].shape) for key in perturbable}
        norm = math.sqrt(sum(float(np.sum(r * r)) for r in raw.values())) or 1.0
        size = math.sqrt(sum(scale[key] ** 2 for key in perturbable))
        return {key: size * raw[key] / norm for key in perturbable}


def _overwrites(clean: dict, prefill: dict, filled: dict, keys: list) -> bool:
    """The adjoint must add to what the input gradients held: filled == prefill + clean."""
    import numpy as np

    worst = 0.0
    for k in keys:
        expected = prefill[k] + clean[k]
        tolerance = 1e-4 * (np.abs(prefill[k]) + np.abs(clean[k])) + 1e-6
        worst = max(worst, float(np.max(np.abs(filled[k] - expected) / tolerance)) if expected.size else 0.0)
    return worst > 1.0 and any(np.any(clean[k] != 0) for k in keys)


def _launch(launch: Launch, work: dict) -> None:
    import warp as wp

    wp.launch(
        launch.kernel,
        launch.dim,
        inputs=[work.get(id(v), v) if is_plain_array(v) else v for v in launch.inputs],
        outputs=[work.get(id(v), v) if is_plain_array(v) else v for v in launch.outputs],
        device=launch.options["device"],
        **_launch_options(launch),
    )


def _launch_options(launch: Launch) -> dict:
    """The launch's own device, max_blocks and block_dim (block_dim only where this Warp has it), untaped."""
    from gradcheck.probes.warp_compat import launch_accepts

    options = {"max_blocks": launch.options["max_blocks"], "record_tape": False}
    if launch.options.get("block_dim") and launch_accepts("block_dim"):
        options["block_dim"] = launch.options["block_dim"]
    return options


def _raw(array) -> int:
    import zlib

    import numpy as np

    values = np.ascontiguousarray(array.numpy())
    return zlib.crc32(values.view(np.uint8).reshape(-1)) if values.size else 0


def _zero_like(value):
    """The adjoint of a non-array argument: zero of its type, or None for what has none."""
    try:
        return type(value)(0) if not isinstance(value, bool) else False
    except Exception:  # noqa: BLE001 - vectors, structs: Warp accepts None for an unused adjoint
        return None
