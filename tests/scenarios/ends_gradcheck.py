"""A scenario that tries to end gradcheck, or hands it something broken (reliability tests).

``--set action=...`` picks what, ``--set hook=...`` where (setup, params, forward, backward, after_backward,
zero) and ``--set at_pass=N`` on which pass (counted by forward calls):
- ``exit0`` / ``exit5``: ``sys.exit(0)`` / ``sys.exit(5)``; ``keyboard``: ``raise KeyboardInterrupt``;
- ``nan-loss``: the loss is NaN from that pass on (so is the gradient); ``nan-loss-only``: a NaN added to the
  loss by a term no param reaches (the gradient stays finite); ``empty-params``: params() returns {};
- ``child``: forward starts a child process that sleeps for an hour (its pid written to
  $GRADCHECK_TEST_CHILD_PID), then hangs in Python (--timeout, Ctrl-C and SIGTERM tests with a worker);
- ``sleep``: forward writes its pid to $GRADCHECK_TEST_CHILD_PID and sleeps for an hour (Ctrl-C, SIGTERM tests);
- ``fine``: nothing (the clean twin).
"""

import os
import subprocess
import sys
import time

import warp as wp


@wp.kernel
def add_bias(bias: float, loss: wp.array(dtype=float)):
    wp.atomic_add(loss, 0, bias)


@wp.kernel
def square_sum(x: wp.array(dtype=float), scale: float, loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, scale * x[i] * x[i])


def _announce(pid: int) -> None:
    """``pid`` into $GRADCHECK_TEST_CHILD_PID in one step (written beside it, then renamed over it): a test that sees
    the file sees the whole number, with no need to wait for the write to finish."""
    target = os.environ.get("GRADCHECK_TEST_CHILD_PID")
    if target:
        with open(target + ".part", "w") as f:
            f.write(str(pid))
        os.replace(target + ".part", target)


class EndsGradcheck:
    name = "ends-gradcheck"
    description = "ends the process or hands back something broken: --set action=... hook=... at_pass=N"

    def setup(self, device, fault=None, action="fine", hook="forward", at_pass="1"):
        self.action, self.hook, self.at_pass = action, hook, int(at_pass)
        self.calls = 0
        self.x = wp.array([1.0, 2.0, 3.0], dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self._maybe("setup")

    def _maybe(self, hook):
        if hook != self.hook or self.calls < self.at_pass and hook not in ("setup", "params"):
            return
        if self.action == "exit0":
            sys.exit(0)
        if self.action == "exit5":
            sys.exit(5)
        if self.action == "keyboard":
            raise KeyboardInterrupt
        if self.action == "child" and hook == "forward":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            _announce(child.pid)
            time.sleep(3600)
        if self.action == "sleep" and hook == "forward":
            _announce(os.getpid())  # the sleeper's own pid: the test knows the sleep has begun
            time.sleep(3600)

    def params(self):
        self._maybe("params")
        if self.action == "empty-params":
            return {}
        return {"x": self.x}

    def forward(self):
        self.calls += 1
        self._maybe("forward")
        self.loss.zero_()
        nan = self.action == "nan-loss" and self.calls >= self.at_pass
        wp.launch(square_sum, dim=3, inputs=[self.x, float("nan") if nan else 0.5], outputs=[self.loss])
        if self.action == "nan-loss-only" and self.calls >= self.at_pass:
            wp.launch(add_bias, dim=1, inputs=[float("nan")], outputs=[self.loss])
        return self.loss

    def backward(self, tape, loss):
        self._maybe("backward")
        tape.backward(loss)

    def after_backward(self):
        self._maybe("after_backward")

    def zero(self, tape):
        self._maybe("zero")
        tape.zero()


class Finishes(EndsGradcheck):
    """Takes the same options and ignores them: runs before a scenario that misbehaves, to show that what
    finished is still reported."""

    name = "finishes"

    def setup(self, device, fault=None, **options):
        super().setup(device, fault)


scenario = EndsGradcheck
