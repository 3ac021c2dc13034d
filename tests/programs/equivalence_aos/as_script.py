"""The array-of-structs corpus as a plain training loop: ``python as_script.py --mistake MISTAKE``.

The same computation and mistake as ``as_scenario.py`` (see aos_model.py), written as an engineer writes a training
script: a tape per iteration, the SGD step, a logged gradient norm, the zero step (or not).
"""

import argparse

import numpy as np
import warp as wp
from aos_model import MISTAKES, Problem

parser = argparse.ArgumentParser()
parser.add_argument("--mistake", default="clean", choices=sorted(MISTAKES))
parser.add_argument("--iterations", type=int, default=4)
parser.add_argument("--device", default=None)
options = parser.parse_args()

p = Problem(options.device)
norms = []
for _iteration in range(options.iterations):
    tape = wp.Tape()
    with tape:
        loss = p.forward()
    tape.backward(loss)
    p.step()
    grads = p.ps.grad.numpy()
    norms.append(float(np.sqrt(sum(float(g["a"]) ** 2 + float(g["b"]) ** 2 for g in grads))))
    if options.mistake != "accumulation":  # the accumulation mistake clears nothing
        tape.zero()
print("loss", float(loss.numpy()[0]), "gradient norms", [round(n, 4) for n in norms])
