"""Which arrays carry state from one forward() to the next: the roots of a loss that changes at fixed params.

Programs keep state between calls: an accumulator never cleared, a clock never reset, a start state
overwritten by the last run. Then the loss differs at the same params, finite differences compare two
different functions, and gradients differ from pass to pass for reasons that have nothing to do with
``tape.zero()``. Naming the loss is not enough: the user needs the array that carries the state.

Two forwards run at the same params, each under a tape that fingerprints every array argument after
each launch (and every array the scenario holds before the forward starts). Launches are matched across
the two runs by position, so arrays created inside forward() match too. An array whose contents at the
start of forward differ between the two runs is a root when its own start value is what changed the run:

- its first launch reads it (it is in ``inputs``, or passed in ``outputs`` and the launch's result
  depends on its old contents), or
- its first launch only writes it, the other arguments of that launch were identical in both runs, and
  the result differs anyway (an accumulator: ``wp.atomic_add`` into an array that is never cleared).

Arrays that differ only because a root fed them (later states of a rollout) are not named.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gradcheck.model.trace import CarriedArray


@dataclass
class _Run:
    """One recorded forward: per launch, the fingerprint of each array argument after it ran."""

    start: dict[int, int] = field(default_factory=dict)  # id(array) → fingerprint before forward
    launches: list = field(default_factory=list)  # [(kernel key, [(id, fingerprint after, "r" | "w")])]
    loss: float | None = None

    def before(self, launch: int, key: int) -> int | None:
        """The array's contents as launch ``launch`` found them (None: first seen there, made inside forward)."""
        for index in range(launch - 1, -1, -1):
            for other, fp, _kind in self.launches[index][1]:
                if other == key:
                    return fp
        return self.start.get(key)


def carried_state(scenario, restore, held: dict, name_of) -> tuple[tuple[CarriedArray, ...], tuple[float, float]]:
    """``restore()`` puts the params back; ``held``: id → array of everything the scenario holds (params
    excluded); ``name_of(array)`` names one. Returns the roots and the two losses."""
    runs = [_record(scenario, restore, held) for _ in range(2)]
    first, second = runs
    roots: dict[int, CarriedArray] = {}
    first_use: dict[int, int] = {}  # id → index of the first launch that passed it
    for index, (_kernel, args) in enumerate(first.launches):
        for key, _fp, _kind in args:
            first_use.setdefault(key, index)
    if len(first.launches) == len(second.launches):
        for index, ((kernel, args1), (_, args2)) in enumerate(zip(first.launches, second.launches)):
            if len(args1) != len(args2):
                continue
            differs = any(a[1] != b[1] for a, b in zip(args1, args2))  # this launch's results differ
            for position, ((key, _after, kind), (key2, _, _)) in enumerate(zip(args1, args2)):
                if key in roots or key not in held or key != key2 or first.start[key] == second.start[key]:
                    continue
                if first_use[key] != index:
                    continue  # not this array's first launch
                how = _how(first, second, index, position, kind, args1, args2, differs)
                if how is not None:
                    roots[key] = CarriedArray(name_of(held[key]), how, kernel)
    return tuple(roots.values()), (first.loss, second.loss)


def _how(first: _Run, second: _Run, index: int, position: int, kind: str, args1, args2, differs: bool) -> str | None:
    """Why the array is a root at its first launch, or None when its start value did not matter there."""
    if not differs:
        return None  # the launch produced the same results in both runs: its start value did not matter
    if kind == "r":
        return "read before this forward writes it"
    others_same = all(
        first.before(index, k1) == second.before(index, k2)
        for p, ((k1, _, _), (k2, _, _)) in enumerate(zip(args1, args2))
        if p != position
    )
    return "accumulated into without being cleared" if others_same else None


def _record(scenario, restore, held: dict) -> _Run:
    import numpy as np

    from gradcheck.measure.fingerprints import fingerprint
    from gradcheck.tape.launch_access import launch_access
    from gradcheck.warp_compat import recording_tape

    run = _Run()
    restore()
    run.start = {key: fingerprint(array) for key, array in held.items()}

    def on_launch(index: int, kernel, inputs, outputs) -> None:
        # "r": an input its code may load (its start value can matter as a value); "w": an output, or an input
        # the code only stores or accumulates into (gradcheck.tape.launch_access)
        args = [
            (id(array), fingerprint(array), "r" if use.role.reads and not use.role.output else "w")
            for use in launch_access(kernel, inputs, outputs).arguments
            for array in use.arrays
        ]
        run.launches.append((kernel.key, args))

    tape = recording_tape(on_launch)
    with tape:
        out = scenario.forward()
    values = np.asarray(out.numpy(), dtype=np.float64).reshape(-1) if out is not None else ()
    run.loss = float(values[0]) if len(values) else None
    restore()
    return run
