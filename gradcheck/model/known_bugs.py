"""Upstream Warp bugs gradcheck recognises, with the release that fixed each.

A finding that matches one of these on an affected Warp version says so by issue number: the user's code
may be right and the fix may be an upgrade (or the workaround named here). Measured on CPU with each
version (docs/warp-versions.md; ``make test-compat`` re-checks them).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KnownBug:
    issue: str
    fixed_in: str
    summary: str
    workaround: str
    since: str | None = None  # the first release that had it, when known

    def affects(self, warp_version: str | None) -> bool:
        if not warp_version or version_tuple(warp_version) >= version_tuple(self.fixed_in):
            return False
        return self.since is None or version_tuple(warp_version) >= version_tuple(self.since)

    def note(self, warp_version: str) -> str:
        return (
            f"Warp {warp_version} has {self.issue}: {self.summary} (fixed in {self.fixed_in}); "
            f"upgrade warp-lang, or {self.workaround}"
        )


GRADS_SEEDS_NOT_ZEROED = KnownBug(
    "NVIDIA/warp#407",
    "1.6.0",
    "tape.zero() skips arrays seeded with tape.backward(grads=...)",
    "zero each seeded array's .grad yourself after tape.zero()",
)
NESTED_STRUCT_NOT_ZEROED = KnownBug(
    "NVIDIA/warp#807",
    "1.8.1",
    "tape.zero() does not reset gradients of arrays inside nested structs",
    "zero those arrays' .grad yourself after tape.zero()",
)
COPY_ADJOINT_ASSIGNS = KnownBug(
    "the copy-adjoint bug (docs/warp-versions.md)",
    "1.17.0",
    "the adjoint wp.copy/wp.clone/array.assign record on the tape overwrites the source's gradient instead of adding",
    "do not read a source array both directly and through a tape-recorded copy; copy in a kernel instead",
)
TERNARY_SAME_ELEMENT = KnownBug(
    "the ternary-adjoint bug (docs/warp-versions.md)",
    "1.17.0",
    "a conditional expression whose two branches read the same array element loses the taken branch's adjoint",
    "read the element into a local variable before the conditional expression",
    since="1.16.0",
)
FUNC_ADJOINTS_FOLLOW_MODULE = KnownBug(
    "the enable_backward opt-in bug (docs/warp-versions.md)",
    "1.18.0",
    "a kernel with enable_backward=True in a module built with it off gets no adjoints for the @wp.func it calls",
    "leave the module's enable_backward on, or move the kernel and its functions to a module that has it on",
)
STRUCT_GRAD_FREED = KnownBug(
    "NVIDIA/warp#720",
    "1.7.2",
    "after requires_grad=False or a .grad replacement a struct keeps the old gradient pointer but not the buffer, which is freed",
    "re-assign the struct field after changing requires_grad",
)


@dataclass(frozen=True)
class LiveBug:
    """A construct every Warp release so far differentiates wrongly: no upgrade helps, the rewrite does. Same
    ``affects``/``note`` as KnownBug, so a finding cites either alike; ``affects`` is true on any version (also
    an unknown one: the construct is wrong whichever Warp runs it)."""

    issue: str
    summary: str
    workaround: str  # the rewrite
    measured_on: str  # the newest release it was measured wrong on

    def affects(self, warp_version: str | None) -> bool:
        return True

    def note(self, warp_version: str | None) -> str:
        return (
            f"Warp {warp_version or '(any release)'} has {self.issue}: {self.summary} (on every release so far, "
            f"measured on {self.measured_on}); {self.workaround}"
        )


RUNTIME_LOOP_CARRIED = LiveBug(
    "the dynamic-loop adjoint bug (NVIDIA/warp#729 family)",
    "a variable defined before a loop Warp does not unroll (a trip count known only at run time, more than "
    "max_unroll iterations, or a break), reassigned in it and read after it gets a wrong adjoint: zero for an "
    "accumulate-then-square",
    "loop over a constant bound of at most max_unroll (16) with a guard (for i in range(MAX_LIGHTS): if i < n: "
    "...), or force the unroll with wp.static (if wp.static(i) < n:), or accumulate into an array element "
    "(wp.atomic_add(out, tid, val))",
    "1.19.0",
)
IN_PLACE_OVERWRITE = LiveBug(
    "the in-place replay bug (backward re-runs a kernel on the values its arrays hold then)",
    "a kernel that overwrites an array element it reads, not additively (x[i] = x[i] * a[i]), is replayed on the "
    "overwritten value by the backward, so the other operands' gradients are wrong; additive updates are right",
    "write the result to a separate output array (x_out[i] = x[i] * a[i]) and read that downstream",
    "1.19.0",
)


def version_tuple(version: str) -> tuple[int, ...]:
    """'1.8.0' → (1, 8, 0); '1.10.0rc1' → (1, 10, 0): pre-release tags are ignored."""
    parts = []
    for piece in version.split(".")[:3]:
        digits = ""
        for c in piece:
            if not c.isdigit():
                break
            digits += c
        parts.append(int(digits or 0))
    return tuple(parts)
