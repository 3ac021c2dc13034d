"""A one-shot gradient of two leaves, one of which the loss does not depend on (``unused``): under ``gradcheck
exec`` a missing-gradient info lists it (tests/test_typed_evidence.py, the "leaves" kind of its evidence)."""

import warp as wp
from family import N, scale_into, square_sum

used = wp.full(N, 1.0, dtype=float, requires_grad=True)
unused = wp.full(N, 2.0, dtype=float, requires_grad=True)
scaled = wp.zeros(N, dtype=float, requires_grad=True)
ignored = wp.zeros(N, dtype=float, requires_grad=True)
loss = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
with tape:
    wp.launch(scale_into, dim=N, inputs=[used, 3.0], outputs=[scaled])
    wp.launch(scale_into, dim=N, inputs=[unused, 3.0], outputs=[ignored])  # read by nothing the loss depends on
    wp.launch(square_sum, dim=N, inputs=[scaled], outputs=[loss])
tape.backward(loss)
print("gradient", used.grad.numpy())
