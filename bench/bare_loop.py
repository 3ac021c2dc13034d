"""The bare loop a user writes over the public scenario contract, without gradcheck (bench/differential.py).

    python bench/bare_loop.py SPEC --passes N [--device cpu] [--set KEY=VALUE ...]

setup() (with the --set options, as `gradcheck run --set` passes them), then per pass: a new tape, forward(), the scenario's backward (or tape.backward(loss)), every param's
gradient copied to the host, after_backward(), the scenario's zero (or tape.zero()). No restore of the params.
"""

from __future__ import annotations

import argparse

import warp as wp
from read_limit import parse_settings

from gradcheck.scenario import loader
from gradcheck.scenario.resolve import resolve


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec")
    parser.add_argument("--passes", type=int, default=10)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--set", dest="settings", action="append", metavar="KEY=VALUE", default=[])
    options = parser.parse_args()
    ref = resolve(options.spec)
    scenario = loader.load(ref)
    with wp.ScopedDevice(options.device):
        scenario.setup(options.device, **parse_settings(options.settings))
        params = scenario.params()
        for _ in range(options.passes):
            tape = wp.Tape()
            with tape:
                loss = scenario.forward()
            if callable(getattr(scenario, "backward", None)):
                scenario.backward(tape, loss)
            else:
                tape.backward(loss)
            for array in params.values():
                array.grad.numpy().copy()
            if callable(getattr(scenario, "after_backward", None)):
                scenario.after_backward()
            if callable(getattr(scenario, "zero", None)):
                scenario.zero(tape)
            else:
                tape.zero()
        wp.synchronize_device(options.device)


if __name__ == "__main__":
    main()
