"""The vanishing corpus as a training loop: ``python train.py [--mistake drag-units] [--iterations N]``.

The fit of vanishing_model.py trained by SGD, one tape per iteration, tape.zero() after each step.
"""

import argparse

import warp as wp
from vanishing_model import MISTAKES, Fit

parser = argparse.ArgumentParser()
parser.add_argument("--mistake", default="clean", choices=["clean", *MISTAKES])
parser.add_argument("--iterations", type=int, default=5)
options = parser.parse_args()

p = Fit(None, options.mistake)
for _iteration in range(options.iterations):
    tape = wp.Tape()
    with tape:
        loss = p.forward()
    tape.backward(loss)
    p.step()
    tape.zero()
print("loss", float(loss.numpy()[0]), "drag", float(p.drag.numpy()[0]), "weight", float(p.layer.weight.numpy()[0]))
