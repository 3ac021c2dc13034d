"""Test scenarios for isolation (`gradcheck ci`, `gradcheck run --timeout`): one hangs in setup, one
spins forever inside a Warp kernel on its second pass, one kills its own process."""

import os
import signal
import time

import warp as wp


class Hangs:
    name = "hangs"

    def setup(self, device, fault=None):
        time.sleep(3600)

    def params(self):
        return {}

    def forward(self):
        return wp.zeros(1)


@wp.kernel
def spin(x: wp.array(dtype=float), counter: wp.array(dtype=float)):
    # never ends: x stays >= 0; the store keeps the C++ compiler from deleting the loop
    while x[0] >= 0.0:
        counter[0] = counter[0] + 1.0


@wp.kernel
def square_sum(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


class SpinsInKernel:
    """A hang in native code: no Python signal handler or exception can stop it, only killing the process."""

    name = "spins-in-kernel"

    def setup(self, device, fault=None):
        self.device = device
        self.calls = 0
        self.x = wp.ones(3, dtype=float, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)
        self.counter = wp.zeros(1, dtype=float, device=device)

    def params(self):
        return {"x": self.x}

    def forward(self):
        self.calls += 1
        if self.calls == 2:
            wp.launch(spin, dim=1, inputs=[self.x, self.counter], device=self.device)
        self.loss.zero_()
        wp.launch(square_sum, dim=3, inputs=[self.x], outputs=[self.loss], device=self.device)
        return self.loss


class Segfaults:
    name = "segfaults"

    def setup(self, device, fault=None):
        os.kill(os.getpid(), signal.SIGSEGV)

    def params(self):
        return {}

    def forward(self):
        return wp.zeros(1)


scenario = Hangs
