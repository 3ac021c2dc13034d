"""Test scenarios for `gradcheck ci` isolation: one hangs in setup, one kills its own process."""

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


class Segfaults:
    name = "segfaults"

    def setup(self, device, fault=None):
        os.kill(os.getpid(), signal.SIGSEGV)

    def params(self):
        return {}

    def forward(self):
        return wp.zeros(1)


scenario = Hangs
