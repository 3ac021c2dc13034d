"""stateful-forward: the same params gave a different loss on different passes.

The runner restores every param before each pass, so forward() sees the same inputs every time; a loss
that still changes means forward() reads state it left behind on an earlier call. Then finite
differences compare two different functions and gradients change from pass to pass for reasons that
have nothing to do with the adjoint or ``tape.zero()``: this check names the arrays carrying the state
(gradcheck.rerun.carried_state), and accumulation says it follows from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.model.evidence import Record
from gradcheck.model.findings import Finding, Severity
from gradcheck.model.trace import Trace

NAME = "stateful-forward"
SUMMARY = "the same params must give the same loss on every call of forward()"
# what exec cannot give it (JUnit lists it as skipped with this reason, never as a pass)
UNDER_EXEC = "needs gradcheck run: it calls forward() again with the same params, and a program runs once"

EXPLAIN = """
What it means: gradcheck restored every param before each pass, yet the loss changed between passes: forward()
reads state an earlier call left behind. Finite differences then compare different functions, and gradients
differ from pass to pass without any adjoint or tape.zero() being wrong. The finding names the arrays that
carry the state and how: read before this forward writes them, or accumulated into without being cleared.

Common causes: an accumulator never cleared (wp.atomic_add into a loss or a buffer without .zero_() first);
a clock or step counter never reset (sim_time, a frame index array); a start state overwritten by the last
run (the rollout continues from where the previous call stopped); controls[i + 1] read before this pass
writes it.

Fix: reset what forward() starts from at its beginning, or hand it to gradcheck as a param so it is restored.

    def forward(self):
        self.loss.zero_()                          # accumulators start from zero
        self.clock.zero_()                         # and clocks from the start time
        wp.copy(self.states[0], self.initial_state)  # and the rollout from its initial state
        ...
"""


@dataclass(frozen=True, eq=False)
class StatefulForwardEvidence(Record):
    """The loss of every pass at the same params, and the arrays found carrying state from one to the next."""

    losses: tuple[float | None, ...]
    carried: tuple[dict, ...]


def check(trace: Trace, options=None) -> tuple[Finding, ...]:
    if not trace.stateful_forward:
        return ()
    losses = [p.loss for p in trace.passes]
    moved = "changed between passes" if not trace.loss_repeats else "moved only within CUDA's float-atomics noise"
    carried = trace.carried_state or ()
    shown = ", ".join(f"{c.subject} ({c.how}, first used by {c.kernel})" for c in carried)
    where = (
        f"the state is carried by {shown}"
        if carried
        else "the arrays carrying it were not found among those the scenario holds"
    )
    subject = carried[0].subject if carried else "forward()"
    return (
        Finding(
            check=NAME,
            severity=Severity.ERROR,
            subject=subject,
            message=(
                f"the loss {moved} at the same params ({_losses(losses)}): forward() is not a "
                f"function of the params; {where}"
            ),
            hint=(
                "reset what forward() starts from at its beginning (zero accumulators, reset clocks, copy the initial "
                "state), or return that array from params() so gradcheck restores it"
            ),
            evidence=StatefulForwardEvidence(
                losses=losses,
                carried=[{"array": c.subject, "how": c.how, "kernel": c.kernel} for c in carried],
            ),
        ),
    )


def _losses(losses) -> str:
    shown = [f"{x:.9g}" for x in losses[:4]]
    return ", then ".join(shown) + (" …" if len(losses) > 4 else "")
