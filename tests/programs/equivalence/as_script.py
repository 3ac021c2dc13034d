"""The equivalence corpus as a plain training loop: ``python as_script.py --mistake MISTAKE``.

The same computation and mistakes as ``as_scenario.py`` (see model.py), written as an engineer writes a training
script: a tape per iteration or one reused, the SGD step, a logged gradient norm, the zero step (or not).
"""

import argparse

import numpy as np
import warp as wp
from model import MISTAKES, Problem

parser = argparse.ArgumentParser()
parser.add_argument("--mistake", default="clean", choices=sorted(MISTAKES))
parser.add_argument("--iterations", type=int, default=4)
parser.add_argument("--device", default=None)
options = parser.parse_args()
mistake = options.mistake

p = Problem(options.device)
if mistake == "stale-struct":
    p.break_struct()
if mistake == "nan":
    p.land_on_target()
norms = []
for _iteration in range(options.iterations):
    tape = wp.Tape()
    p.before_tape(mistake)
    with tape:
        loss = p.forward(mistake)
    if mistake == "changed-before-backward":
        p.load_batch(1)  # the next batch loaded one line too early
    tape.backward(loss)
    p.step(mistake)
    norms.append(float(np.linalg.norm(p.x.grad.numpy())))  # the logged gradient norm
    if mistake == "incomplete-zeroing":
        p.x.grad.zero_()  # the param's gradient only
    elif mistake != "accumulation":  # the accumulation mistake clears nothing
        tape.zero()
print("loss", float(loss.numpy()[0]), "gradient norms", [round(n, 4) for n in norms])
