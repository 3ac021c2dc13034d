"""The name walk (gradcheck.tape.naming.walk) over what programs really hold: numbers in containers are passed over."""

from __future__ import annotations

import warp as wp

from gradcheck.tape import naming


class Holder:
    """A program's object (types.SimpleNamespace is the standard library's: not walked)."""

    def __init__(self, **attributes) -> None:
        self.__dict__.update(attributes)


def test_a_long_loss_history_does_not_spend_the_walks_node_budget():
    """A training script's globals hold a loss history longer than the walk's node budget; the array held in a
    later root (the loop's locals) is still named, and the history's numbers get no path."""
    weights = wp.zeros(4, dtype=float, requires_grad=True, device="cpu")
    history = {"loss": [0.5] * (naming.MAX_NODES + 10), "step": list(range(1000)), "tag": ("a", "b")}
    names = naming.walk(Holder(history=history), Holder(weights=weights))
    assert names.name(weights) == "weights"
    assert names.name(weights.grad) == "weights.grad"


def test_arrays_among_numbers_keep_their_index():
    """Passing numbers over does not renumber what follows them: the path is the program's index."""
    weights = wp.zeros(2, dtype=float, device="cpu")
    names = naming.walk(Holder(mixed=[1.0, "x", None, weights], table={"lr": 0.1, "w": weights}))
    assert names.name(weights) == "mixed[3]"
