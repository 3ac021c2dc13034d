"""What a backward seeded with ``tape.backward(grads={y: seed})`` started from (a PassRecord field).

Its own module so that the Trace's file stays one screenful of fields: plain frozen data, no Warp objects.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SeededBackward:
    """A backward seeded with ``tape.backward(grads={output: seed})``: no scalar loss, so the forward is judged by the
    seeded outputs' values (read right before backward) and the seeds themselves. Both finite: a NaN/Inf in a
    gradient comes from backward alone, as under a finite loss."""

    outputs: tuple[str, ...]  # the seeded outputs, as the program names them
    values_finite: bool | None  # every seeded output's values finite (None: not readable here)
    seeds_finite: bool | None  # every seed finite (None: not readable here)

    @property
    def finite(self) -> bool | None:
        """True: the forward is known finite; False: it is known not to be; None: unknown."""
        return known_all(self.values_finite, self.seeds_finite)


def known_all(*facts: bool | None) -> bool | None:
    """All of ``facts`` in three values: False when one is False, None when one is unknown, else True."""
    if any(f is False for f in facts):
        return False
    return None if any(f is None for f in facts) else True


def root_words(outputs) -> str:
    """What the gradients flow back from, as findings say it: the seeded outputs a ``grads=`` backward names, or
    the loss when there are none."""
    names = list(dict.fromkeys(outputs))
    if not names:
        return "the loss"
    return f"the seeded output {names[0]}" if len(names) == 1 else f"the seeded outputs ({', '.join(names[:3])})"
