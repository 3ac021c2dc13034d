"""A float64 offset trained to its optimum: ``python converge.py [--iterations N]`` (see vanishing_model.py).

Its gradient falls from 2 to 2e-10 as the loss reaches its floor of 0.01: at the end it is far below float32's
resolution against the loss, yet the offset trained. Correct code.
"""

import argparse

import warp as wp
from vanishing_model import Offset

parser = argparse.ArgumentParser()
parser.add_argument("--iterations", type=int, default=6)
options = parser.parse_args()

o = Offset()
for _iteration in range(options.iterations):
    tape = wp.Tape()
    with tape:
        loss = o.forward()
    tape.backward(loss)
    print("loss", float(loss.numpy()[0]), "gradient", float(o.offset.grad.numpy()[0]))
    o.step()
    tape.zero()
