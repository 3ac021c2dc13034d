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
        if self.values_finite is False or self.seeds_finite is False:
            return False
        return True if self.values_finite and self.seeds_finite else None
