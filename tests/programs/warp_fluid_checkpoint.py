"""Warp's ``examples/optim/example_fluid_checkpoint.py``, wrapped as a scenario, shrunk to a 32x32 grid.

A 2D smoke simulation (semi-Lagrangian advection, a damped-Jacobi pressure projection) whose loss is the
distance of the final density to the NVIDIA logo; the params are the initial velocity fields. The example
computes its gradient with its own checkpointed backward: forward() saves each segment's start state and
backward() re-runs every segment on a fresh tape, last segment first, carrying the adjoints back.

Shrinking: the example's grid size is the module constant ``N_GRID = wp.constant(512)``, read by its kernels
when Warp builds them, so this wrapper loads a private copy of the module and sets ``N_GRID``, ``DH`` and
``FLUID_COLUMN_WIDTH`` before anything is launched. Nothing else is changed. ``segments=2`` (the default
here) runs two checkpoint segments, as the example does at full size. ``trained=k`` runs k iterations of the
example's own training loop (forward, checkpointed backward, Adam step, ``tape.zero()``) first: the initial
velocities are zero, which puts every semi-Lagrangian back-trace exactly on a grid node, where the bilinear
interpolation has a kink and the loss has no derivative; one Adam step moves them off it.

Truth, established independently (tests/test_programs.py): see the test's docstring.
"""

import importlib.util

import warp as wp

GRID = 32


def _example_module():
    import warp.examples.optim.example_fluid_checkpoint as stock

    spec = importlib.util.spec_from_file_location("gradcheck_program_fluid_checkpoint_module", stock.__file__)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.N_GRID = GRID
    module.DH = 1.0 / GRID
    module.FLUID_COLUMN_WIDTH = GRID / 10.0
    return module


class FluidCheckpoint:
    name = "warp-fluid-checkpoint"
    description = "Warp's fluid checkpointing example on a 32x32 grid (initial velocities, checkpointed backward)"

    def setup(self, device, fault=None, steps=8, segments=2, pressure_iterations=10, trained=0):
        module = _example_module()
        with wp.ScopedDevice(device):
            self.example = module.Example(
                sim_steps=int(steps),
                pressure_iterations=int(pressure_iterations),
                segment_size=-(-int(steps) // int(segments)),
            )
            for _ in range(int(trained)):  # the example's own training iteration (its __main__ loop), on CPU
                example = self.example
                example.forward()
                example.backward()
                example.optimizer.step([example.vx_arrays[0].grad.flatten(), example.vy_arrays[0].grad.flatten()])
                example.tape.zero()

    def params(self):
        return {"vx_arrays[0]": self.example.vx_arrays[0], "vy_arrays[0]": self.example.vy_arrays[0]}

    def forward(self):
        self.example.forward()
        return self.example.loss

    def backward(self, tape, loss):
        self.example.backward()  # the example's checkpointed backward, on its own tapes

    def zero(self, tape):
        self.example.tape.zero()
        tape.zero()


scenario = FluidCheckpoint
