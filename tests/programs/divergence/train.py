"""A training loop on the quadratic bowl (quadratic.py), as a user writes one: ``python train.py --mode MODE``.

Modes (the step is ``--step`` / K, K the bowl's largest curvature ``--curvature``):
- ``descent``: plain gradient descent; ``--step 2.5`` diverges (past 2/K), ``--step 0.5`` converges; with
  ``--safe-until N`` the first N updates take the converging step (a divergence that starts late);
- ``warmup``: ``--step`` for the first ``--warmup`` updates, then 0.5 (the loss grows, then falls for good);
- ``backtrack``: an Armijo-style line search from a step of 3/K, halved while the loss grows (it recovers);
- ``ascent``: gradient ascent (x += step g): the program maximises the bowl, its loss is meant to grow;
- ``penalty``: minimises sum (x - 2)^2 with a clipped step; on iteration ``--jump`` only, a penalty multiplies the
  loss by ``--penalty`` (Newton's drone MPC meeting its collision penalty once);
- ``stiffening``: minimises w sum (x - 2)^2 with the weight tripled every iteration (a penalty continuation) and a
  fixed step stable throughout: the loss, the gradient and the steps grow while x walks to 2, never past it;
- ``moving-target``: minimises sum (x - t)^2 with a step that lands on t exactly, t doubling every iteration: the
  loss and the gradient grow, the gradient never turns back;
- ``host``: ``descent`` with the update made on the host (``x.assign(x.numpy() - lr * x.grad.numpy())``), no
  update launch.
"""

import argparse

import numpy as np
import warp as wp
from quadratic import SHAPE, N, bowl, step, weighted_distance

parser = argparse.ArgumentParser()
parser.add_argument(
    "--mode",
    default="descent",
    choices=["descent", "warmup", "backtrack", "ascent", "penalty", "stiffening", "moving-target", "host"],
)
parser.add_argument("--iterations", type=int, default=12)
parser.add_argument("--step", type=float, default=2.5)
parser.add_argument("--curvature", type=float, default=1e4)
parser.add_argument("--warmup", type=int, default=7)
parser.add_argument("--penalty", type=float, default=1e7)
parser.add_argument("--jump", type=int, default=6)
parser.add_argument("--safe-until", type=int, default=0)  # descent: a converging step (0.5/K) before this iteration
options = parser.parse_args()

K = options.curvature
DISTANCE = ("penalty", "stiffening", "moving-target")  # the modes that minimise a weighted distance to a target
x = wp.array(np.zeros(N) if options.mode in DISTANCE else np.ones(N), dtype=float, requires_grad=True)
k = wp.array([K * c for c in SHAPE], dtype=float)
target = wp.array([2.0] * N, dtype=float)
loss = wp.zeros(1, dtype=float, requires_grad=True)


def evaluate(weight: float = 1.0):
    """One recorded forward and its backward: the loss, and the tape to zero after the update."""
    loss.zero_()
    tape = wp.Tape()
    with tape:
        if options.mode in DISTANCE:
            wp.launch(weighted_distance, dim=N, inputs=[x, target, weight], outputs=[loss])
        else:
            wp.launch(bowl, dim=N, inputs=[x, k], outputs=[loss])
    tape.backward(loss)
    return tape, float(loss.numpy()[0])


losses = []
if options.mode == "backtrack":
    for _iteration in range(options.iterations):
        tape, accepted = evaluate()
        saved = wp.clone(x.grad)
        lr = 3.0 / K
        wp.launch(step, dim=N, inputs=[x, x.grad, lr])  # the trial step
        tape.zero()
        for _halving in range(8):
            tape, trial = evaluate()
            if trial < accepted:
                break
            wp.launch(step, dim=N, inputs=[x, saved, -lr])  # back to the accepted point
            lr *= 0.5
            wp.launch(step, dim=N, inputs=[x, saved, lr])
            tape.zero()
        tape.zero()
        losses.append(accepted)
else:
    for iteration in range(options.iterations):
        weight = options.penalty if options.mode == "penalty" and iteration == options.jump else 1.0
        if options.mode == "stiffening":
            weight = 3.0**iteration
        elif options.mode == "moving-target":
            target.fill_(2.0**iteration)
        tape, value = evaluate(weight)
        losses.append(value)
        if options.mode == "stiffening":
            lr = 1e-6  # stable while lr * 2 * weight < 2: every weight here (3^11 at most)
        elif options.mode == "moving-target":
            lr = 0.5  # x - 0.5 * 2 (x - t) = t: the step lands on the target
        elif options.mode == "penalty":
            norm = float(np.linalg.norm(x.grad.numpy()))
            lr = 0.1 * min(1.0, 10.0 / max(norm, 1e-30))  # a clipped step
        elif options.mode == "ascent":
            lr = -options.step / K
        elif (options.mode == "warmup" and iteration >= options.warmup) or iteration < options.safe_until:
            lr = 0.5 / K
        else:
            lr = options.step / K
        if options.mode == "host":
            x.assign(x.numpy() - lr * x.grad.numpy())
        else:
            wp.launch(step, dim=N, inputs=[x, x.grad, lr])
        tape.zero()
print("losses", " ".join(f"{v:.3g}" for v in losses))
