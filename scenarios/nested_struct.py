"""Nested ``wp.struct`` model plus an array of structs: the struct-adjoint scenario.

``model: Model{geo: Geometry{scale, thickness}, material: Material{stiffness, damping,
response: Response{curve}}, weights}`` (three struct levels) and ``parts: wp.array(dtype=Part)``
whose records hold arrays. Two kernels read them and add to one scalar loss.

Why: Warp copies array descriptors into a struct's ctypes mirror when a field is assigned and
never refreshes them, copies nested structs by value, and arrays of structs keep no reference to
the arrays their records point at. Each fault reproduces one measured consequence (docs/warp-versions.md,
docs/scenarios.md); the clean variant keeps every mirror in sync.
"""

from __future__ import annotations

import gc

import warp as wp

N = 8
PARTS = 3


@wp.struct
class Geometry:
    scale: wp.array(dtype=float)
    thickness: wp.array(dtype=float)


@wp.struct
class Response:
    curve: wp.array(dtype=float)


@wp.struct
class Material:
    stiffness: wp.array(dtype=float)
    damping: wp.array(dtype=float)
    response: Response


@wp.struct
class Model:
    geo: Geometry
    material: Material
    weights: wp.array(dtype=wp.vec3)


@wp.struct
class Part:
    offset: wp.array(dtype=wp.vec3)
    mass: wp.array(dtype=float)
    weight: float


@wp.kernel
def model_energy(model: Model, loss: wp.array(dtype=float)):
    i = wp.tid()
    size = model.geo.scale[i] * model.geo.thickness[i]
    spring = model.material.stiffness[i] * size * size
    friction = model.material.damping[i] * model.material.response.curve[i]
    w = model.weights[i]
    wp.atomic_add(loss, 0, spring + friction + 0.5 * wp.dot(w, w))


@wp.kernel
def parts_energy(parts: wp.array(dtype=Part), loss: wp.array(dtype=float)):
    i = wp.tid()
    p = parts[i]
    o = p.offset[0]
    wp.atomic_add(loss, 0, p.weight * p.mass[0] * wp.dot(o, o))


def _ramp(device, start, step, requires_grad=True):
    return wp.array([start + step * i for i in range(N)], dtype=float, device=device, requires_grad=requires_grad)


class NestedStruct:
    name = "nested-struct"
    description = "Nested wp.struct model (3 levels) plus an array of structs; struct mirror faults"
    faults = {
        "requires-grad-off": "model.geo.scale.requires_grad = False after assembly: gradient flows into a hidden orphan buffer",
        "grad-replaced": "model.geo.thickness.grad replaced after assembly: the new buffer stays zero",
        "late-requires-grad": "material.damping gets requires_grad = True after assembly: the mirror's grad is null, gradient lost",
        "aos-freed": "array-of-structs records point at gradient buffers that were released (use-after-free)",
        "nested-copy": "geo.thickness re-assigned after model.geo = geo: the model keeps the old array",
        "tape-zero-only": "relies on tape.zero() for nested struct gradients: Warp < 1.8.1 leaves them (warp#807)",
    }

    def setup(self, device, fault=None):
        self.fault = fault
        self.geo = Geometry()
        self.geo.scale = _ramp(device, 1.0, 0.1)
        self.geo.thickness = _ramp(device, 0.5, 0.05)
        self.material = Material()
        self.material.stiffness = _ramp(device, 2.0, 0.25)
        self.material.damping = _ramp(device, 0.1, 0.01, requires_grad=fault != "late-requires-grad")
        self.material.response = Response()
        self.material.response.curve = _ramp(device, 1.0, -0.05)
        self.model = Model()
        self.model.geo = self.geo  # copied by value: later edits to self.geo do not reach self.model
        self.model.material = self.material
        self.model.weights = wp.array(
            [(0.1 * i, 1.0, -0.2 * i) for i in range(N)], dtype=wp.vec3, device=device, requires_grad=True
        )

        self.part_arrays = [
            {
                "offset": wp.array([(1.0 + i, 0.5, -0.25 * i)], dtype=wp.vec3, device=device, requires_grad=True),
                "mass": wp.array([2.0 + i], dtype=float, device=device, requires_grad=True),
            }
            for i in range(PARTS)
        ]
        self.part_records = []
        for i, arrays in enumerate(self.part_arrays):
            part = Part()
            part.offset = arrays["offset"]
            part.mass = arrays["mass"]
            part.weight = 1.0 + 0.5 * i
            self.part_records.append(part)
        self.parts = wp.array(self.part_records, dtype=Part, device=device)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

        if fault == "requires-grad-off":
            gc.collect()  # (so the allocator's free lists hold nothing older than the buffer freed next)
            self.geo.scale.requires_grad = False  # the seed's exact move (model.geo.scale is the same array)
            # then the loop goes on allocating. Warp >= 1.7.2 keeps the old gradient alive for the struct
            # (an orphan buffer); before it (warp#720) the buffer is freed right here and the next allocation
            # of its size gets its address, so backward would write the gradient into this log
            self.loss_log = wp.zeros(N, dtype=float, device=device)
        elif fault == "grad-replaced":
            self.geo.thickness.grad = wp.zeros_like(self.geo.thickness)
        elif fault == "late-requires-grad":
            self.material.damping.requires_grad = True
        elif fault == "aos-freed":
            # the records keep raw pointers only; once the Part instances are gone, dropping the
            # gradient buffers frees the memory the records still point at
            self.part_records = []
            for arrays in self.part_arrays:
                arrays["mass"].requires_grad = False
            gc.collect()
        elif fault == "nested-copy":
            self.geo.thickness = _ramp(device, 0.5, 0.05)  # model.geo still holds the old thickness

    def params(self):
        params = {
            "geo.scale": self.geo.scale,
            "geo.thickness": self.geo.thickness,
            "material.stiffness": self.material.stiffness,
            "material.damping": self.material.damping,
            "material.response.curve": self.material.response.curve,
            "model.weights": self.model.weights,
        }
        for i, arrays in enumerate(self.part_arrays):
            params[f"part_arrays[{i}]['offset']"] = arrays["offset"]
        return params

    def forward(self):
        self.loss.zero_()
        wp.launch(model_energy, dim=N, inputs=[self.model], outputs=[self.loss])
        wp.launch(parts_energy, dim=PARTS, inputs=[self.parts], outputs=[self.loss])
        return self.loss

    def zero(self, tape):
        tape.zero()
        # gradients behind an array of structs are invisible to tape.zero(): clear them by hand
        by_hand = [array for arrays in self.part_arrays for array in arrays.values()]
        if self.fault != "tape-zero-only":
            # and so are those of arrays in nested structs (model.geo.*, model.material.*) before Warp 1.8.1
            # (NVIDIA/warp#807): a loop that must run on those versions clears them too
            geo, material = self.geo, self.material
            by_hand += [geo.scale, geo.thickness, material.stiffness, material.damping, material.response.curve]
        for array in by_hand:
            if array.grad is not None:
                array.grad.zero_()


scenario = NestedStruct
