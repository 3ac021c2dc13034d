"""The cleared-gradient corpus as a plain training loop: ``python train.py --variant VARIANT``.

The fit and its variants are in cleared_model.py; as_scenario.py is the same as a gradcheck scenario.
"""

import argparse

import warp as wp
from cleared_model import VARIANTS, Fit

parser = argparse.ArgumentParser()
parser.add_argument("--variant", default="clean", choices=sorted(VARIANTS))
parser.add_argument("--iterations", type=int, default=4)
parser.add_argument("--device", default=None)
options = parser.parse_args()

p = Fit(options.device)
losses = []
for _iteration in range(options.iterations):
    tape = wp.Tape()
    with tape:
        loss = p.forward()
    tape.backward(loss)
    p.update(options.variant, tape.zero)
    losses.append(float(loss.numpy()[0]))
print("losses", [round(v, 4) for v in losses])
