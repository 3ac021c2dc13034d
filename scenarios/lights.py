"""A small shading program whose kernels take ``wp.struct`` arguments: the per-launch adjoint test's struct reach.

Why: blame replays each launch on private copies of the arrays it read. Here every param sits inside a struct
argument, a launch updates an array in place, and one kernel has no backward at all, so a wrong adjoint can only be
named when blame opens structs (``Lights{dirs, intensities, num_lights}``, the nested ``Surface{normals, albedo,
material: Material{gain}}``, and an array of ``Fragment`` records carrying the radiance from one launch to the next
on the gradient path), replays in-place updates, and says why a launch has no adjoint to test.

A 16 x 16 image: gather_light sums a smooth (squared half-Lambert) term over the lights and multiplies the sum by
the albedo, as Warp's example_diffray does (``color = lambert * color``); shade tone-maps each channel with the
material gain (a ``@wp.func`` with a hand-written ``@wp.func_grad``); apply_vignette darkens the corners; color_loss
adds the squared error against a fixed target image into one loss. Params: ``lights.dirs``, ``lights.intensities``,
``surface.albedo``, ``surface.material.gain``, ``vignette`` (a plain array).

Faults, each a real wrong gradient. Measured on CPU, Warp 1.19: AD vs central FD of the loss along 3 random unit
directions of all the params, step 1e-3 of the params' norm, the loss differences taken in float64; clean: AD -0.3464
vs FD -0.3464, AD 0.3911 vs FD 0.3911, AD 0.09694 vs FD 0.09691 (rel <= 2.5e-4).
- ``runtime-loop``: the Lambert sum ``lambert = lambert + val`` runs over ``range(lights.num_lights)``, a trip count
  known only at run time (a struct field), and is used after the loop: the adjoint replays ``lambert`` as 0, so the
  albedo's gradient is exactly 0 (the lights' are right: the sum's own adjoint does not need its value): AD -0.2795
  vs FD -0.3464, AD 0.3574 vs FD 0.3911, AD 0.06511 vs FD 0.09691. The clean kernel loops over the module constant
  ``range(MAX_LIGHTS)`` with an ``if k < lights.num_lights`` guard.
- ``struct-func-grad``: the tone map's hand-written ``@wp.func_grad`` forgets the chain-rule factor ``gain`` of
  d/d radiance (gain is 2 to 3.5 here): AD -0.1377 vs FD -0.3464, AD 0.2761 vs FD 0.3911, AD -0.01761 vs FD 0.09691.
- ``in-place-scale``: the vignette multiplies the colours in place (``color[i] = color[i] * vignette[i]``); the tape
  replays the launch with the overwritten colours, so the vignette's gradient is scaled by the vignette (0.42 to 1):
  AD -0.3297 vs FD -0.3464, AD 0.3617 vs FD 0.3911, AD 0.09664 vs FD 0.09691; along a direction of the vignette
  alone AD 0.2638 vs FD 0.3307. The clean variant writes a separate output array.
- ``backward-off``: gather_light is built with ``enable_backward=False``: tape.backward skips it with a warning, and
  the gradients of the lights and the albedo are exactly 0: AD -0.02002 vs FD -0.3464, AD 0.2146 vs FD 0.3911,
  AD -0.07709 vs FD 0.09691.
"""

from __future__ import annotations

import math

import warp as wp

WIDTH = 16
PIXELS = WIDTH * WIDTH
MAX_LIGHTS = 4  # a module constant: range(MAX_LIGHTS) is a loop Warp unrolls at compile time
AMBIENT = 0.15


@wp.struct
class Lights:
    dirs: wp.array(dtype=wp.vec3)
    intensities: wp.array(dtype=float)
    num_lights: int


@wp.struct
class Material:
    gain: wp.array(dtype=float)


@wp.struct
class Surface:
    normals: wp.array(dtype=wp.vec3)
    albedo: wp.array(dtype=wp.vec3)
    material: Material


@wp.struct
class Fragment:
    radiance: wp.vec3
    facing: float


@wp.func
def half_lambert(lights: Lights, k: int, n: wp.vec3):
    """Light k's squared half-Lambert term: smooth everywhere (a max(dot, 0) would put kinks under FD)."""
    h = 0.5 * wp.dot(n, wp.normalize(lights.dirs[k])) + 0.5
    return lights.intensities[k] * h * h


@wp.func
def fragment(radiance: wp.vec3, n: wp.vec3):
    f = Fragment()
    f.radiance = radiance
    f.facing = 0.5 + 0.5 * n[2]
    return f


@wp.kernel
def gather_light(lights: Lights, surface: Surface, fragments: wp.array(dtype=Fragment)):
    i = wp.tid()
    n = surface.normals[i]
    lambert = float(0.0)  # noqa: UP018 - a Warp variable: a bare 0.0 is a constant a dynamic loop cannot mutate
    for k in range(MAX_LIGHTS):  # a compile-time trip count; the guard reads the run-time one
        if k < lights.num_lights:
            lambert = lambert + half_lambert(lights, k, n)
    fragments[i] = fragment(lambert * surface.albedo[i], n)


@wp.kernel
def gather_light_runtime(lights: Lights, surface: Surface, fragments: wp.array(dtype=Fragment)):
    i = wp.tid()
    n = surface.normals[i]
    lambert = float(0.0)  # noqa: UP018 - a Warp variable: a bare 0.0 is a constant a dynamic loop cannot mutate
    for k in range(lights.num_lights):  # trip count known only at run time: a dynamic loop
        val = half_lambert(lights, k, n)
        lambert = lambert + val
    fragments[i] = fragment(lambert * surface.albedo[i], n)  # lambert used after the loop, as in example_diffray


@wp.kernel(enable_backward=False)
def gather_light_forward_only(lights: Lights, surface: Surface, fragments: wp.array(dtype=Fragment)):
    i = wp.tid()
    n = surface.normals[i]
    lambert = float(0.0)  # noqa: UP018 - a Warp variable: a bare 0.0 is a constant a dynamic loop cannot mutate
    for k in range(MAX_LIGHTS):
        if k < lights.num_lights:
            lambert = lambert + half_lambert(lights, k, n)
    fragments[i] = fragment(lambert * surface.albedo[i], n)


@wp.func
def reinhard(radiance: float, gain: float):
    """Reinhard tone map of the exposed radiance: s / (1 + s), s = gain * radiance."""
    s = gain * radiance
    return s / (1.0 + s)


@wp.func_grad(reinhard)
def adj_reinhard(radiance: float, gain: float, adj_ret: float):
    s = gain * radiance
    slope = adj_ret / ((1.0 + s) * (1.0 + s))
    wp.adjoint[radiance] += gain * slope
    wp.adjoint[gain] += radiance * slope


@wp.func
def reinhard_forgetful(radiance: float, gain: float):
    s = gain * radiance
    return s / (1.0 + s)


@wp.func_grad(reinhard_forgetful)
def adj_reinhard_forgetful(radiance: float, gain: float, adj_ret: float):
    s = gain * radiance
    slope = adj_ret / ((1.0 + s) * (1.0 + s))
    wp.adjoint[radiance] += slope  # the fault: the chain-rule factor gain (ds/dradiance) is forgotten
    wp.adjoint[gain] += radiance * slope


@wp.kernel
def shade(surface: Surface, fragments: wp.array(dtype=Fragment), color: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    f = fragments[i]
    g = surface.material.gain[i]
    tone = wp.vec3(reinhard(f.radiance[0], g), reinhard(f.radiance[1], g), reinhard(f.radiance[2], g))
    color[i] = tone + AMBIENT * f.facing * wp.vec3(0.8, 0.9, 1.0)


@wp.kernel
def shade_forgetful(surface: Surface, fragments: wp.array(dtype=Fragment), color: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    f = fragments[i]
    g = surface.material.gain[i]
    r = f.radiance
    tone = wp.vec3(reinhard_forgetful(r[0], g), reinhard_forgetful(r[1], g), reinhard_forgetful(r[2], g))
    color[i] = tone + AMBIENT * f.facing * wp.vec3(0.8, 0.9, 1.0)


@wp.kernel
def apply_vignette(color: wp.array(dtype=wp.vec3), vignette: wp.array(dtype=float), framed: wp.array(dtype=wp.vec3)):
    i = wp.tid()
    framed[i] = color[i] * vignette[i]


@wp.kernel
def apply_vignette_in_place(color: wp.array(dtype=wp.vec3), vignette: wp.array(dtype=float)):
    i = wp.tid()
    color[i] = color[i] * vignette[i]  # non-additive in place: the tape replays it on the product


@wp.kernel
def color_loss(framed: wp.array(dtype=wp.vec3), target: wp.array(dtype=wp.vec3), loss: wp.array(dtype=float)):
    i = wp.tid()
    d = framed[i] - target[i]
    wp.atomic_add(loss, 0, wp.dot(d, d) * (100.0 / float(PIXELS)))


def _pixels():
    for row in range(WIDTH):
        for col in range(WIDTH):
            yield row, col, -0.8 + 1.6 * col / (WIDTH - 1), -0.8 + 1.6 * row / (WIDTH - 1)


class ShadedLights:
    name = "lights"
    description = "Shading with lights and a nested surface in wp.struct arguments (pure Warp)"
    faults = {
        "runtime-loop": "the Lambert sum loops over range(lights.num_lights), a trip count known only at run time",
        "struct-func-grad": "the tone map's hand-written @wp.func_grad forgets the chain-rule factor gain",
        "in-place-scale": "the vignette scales the colours in place: the tape replays it with the overwritten colours",
        "backward-off": "gather_light is built with enable_backward=False: the lights' gradients are exactly 0",
    }

    def setup(self, device, fault=None):
        self.fault = fault
        normals, albedo, gain, vignette, target = [], [], [], [], []
        for row, col, u, v in _pixels():
            norm = math.sqrt(u * u + v * v + 1.0)
            normals.append((u / norm, v / norm, 1.0 / norm))  # a dome facing the camera
            albedo.append((0.55 + 0.3 * u, 0.6 - 0.2 * v, 0.5 + 0.1 * u * v))
            gain.append(2.0 + 1.5 * (row * WIDTH + col) / PIXELS)  # exposure: far from 1
            vignette.append(1.0 - 0.45 * (u * u + v * v))  # 1 at the centre, 0.42 in the corners
            target.append((0.5 + 0.1 * math.sin(3.0 * u), 0.5, 0.45 + 0.1 * math.cos(2.0 * v)))
        self.lights = Lights()
        self.lights.dirs = wp.array(
            [(0.3, 0.5, 1.0), (-0.6, 0.2, 0.8), (0.1, -0.7, 0.6), (0.0, 0.0, 1.0)],
            dtype=wp.vec3,
            device=device,
            requires_grad=True,
        )
        self.lights.intensities = wp.array([0.9, 0.6, 0.4, 0.5], dtype=float, device=device, requires_grad=True)
        self.lights.num_lights = 3  # the fourth slot is unused
        material = Material()
        material.gain = wp.array(gain, dtype=float, device=device, requires_grad=True)
        self.surface = Surface()
        self.surface.normals = wp.array(normals, dtype=wp.vec3, device=device)
        self.surface.albedo = wp.array(albedo, dtype=wp.vec3, device=device, requires_grad=True)
        self.surface.material = material  # copied by value: the material is complete before this line
        self.vignette = wp.array(vignette, dtype=float, device=device, requires_grad=True)
        self.target = wp.array(target, dtype=wp.vec3, device=device)
        self.fragments = wp.zeros(PIXELS, dtype=Fragment, device=device, requires_grad=True)
        self.color = wp.zeros(PIXELS, dtype=wp.vec3, device=device, requires_grad=True)
        self.framed = wp.zeros(PIXELS, dtype=wp.vec3, device=device, requires_grad=True)
        self.loss = wp.zeros(1, dtype=float, device=device, requires_grad=True)

    def params(self):
        return {
            "lights.dirs": self.lights.dirs,
            "lights.intensities": self.lights.intensities,
            "surface.albedo": self.surface.albedo,
            "surface.material.gain": self.surface.material.gain,
            "vignette": self.vignette,
        }

    def forward(self):
        self.loss.zero_()
        gather = {"runtime-loop": gather_light_runtime, "backward-off": gather_light_forward_only}.get(
            self.fault, gather_light
        )
        wp.launch(gather, dim=PIXELS, inputs=[self.lights, self.surface], outputs=[self.fragments])
        tone = shade_forgetful if self.fault == "struct-func-grad" else shade
        wp.launch(tone, dim=PIXELS, inputs=[self.surface, self.fragments], outputs=[self.color])
        if self.fault == "in-place-scale":
            wp.launch(apply_vignette_in_place, dim=PIXELS, inputs=[self.color, self.vignette])
            framed = self.color
        else:
            wp.launch(apply_vignette, dim=PIXELS, inputs=[self.color, self.vignette], outputs=[self.framed])
            framed = self.framed
        wp.launch(color_loss, dim=PIXELS, inputs=[framed, self.target], outputs=[self.loss])
        return self.loss


scenario = ShadedLights
