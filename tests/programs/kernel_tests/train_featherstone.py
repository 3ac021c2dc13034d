"""Train cartpole's controls with plain SGD through Newton's Featherstone (a training script, no gradcheck API)."""
import warp as wp
from gradcheck.scenarios.cartpole import CartPole

@wp.kernel
def sgd(x: wp.array(dtype=float), g: wp.array(dtype=float), lr: float):
    i = wp.tid()
    x[i] = x[i] - lr * g[i]

s = CartPole()
import sys
s.setup("cpu", steps=sys.argv[1] if len(sys.argv) > 1 else "30", scratch=sys.argv[2] if len(sys.argv) > 2 else "per-step")
params = s.params()
for it in range(4):
    tape = wp.Tape()
    with tape:
        loss = s.forward()
    tape.backward(loss)
    for name, p in params.items():
        wp.launch(sgd, dim=p.size, inputs=[p.flatten() if p.ndim > 1 else p, p.grad.flatten() if p.ndim > 1 else p.grad, 1e-3])
    print("loss", float(loss.numpy()[0]))
    tape.zero()
