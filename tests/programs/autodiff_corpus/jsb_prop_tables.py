"""warp-jsb (PyPI ``warp-jsb`` 0.1.0, MIT, github.com/Blunistark/Nvidia-JSB): fit the C172P propeller's thrust and
power coefficient tables, two fields of the package's ``AeroModelHandles`` ``@wp.struct``, to a target flight
trajectory through the package's differentiable flight model.

Program under test: the pinned package (``.venv-thirdparty``, the Makefile's ``THIRDPARTY_PACKAGES``), unmodified:
its ``compute_full_dynamics_derivative`` (``@wp.func``: quaternion kinematics, aero angles, the generated aero model
``evaluate_aero_model`` and the propeller ``compute_prop_forces_and_induced`` sampling lookup tables through the
``AeroModelHandles`` struct instance, the piston engine, a ground-contact loop over a run-time-length array, gravity
and the rigid-body equations), its ``AircraftState``/``ControlState`` structs and its bundled C172P tables.

What is ours, and why: the package differentiates nothing itself, and its own integrator
``integrate_full_state_rk4_kernel`` updates ``states`` IN PLACE (reads ``states[tid]``, writes ``states[tid]``), so
a tape cannot differentiate it (its adjoint would replay the forward on the overwritten state). ``rk4_step`` below
is that kernel's RK4 combination, written out of place (``states_in`` -> ``states_out``) and calling the package's
``compute_full_dynamics_derivative`` four times with the ``AeroModelHandles`` struct instance as a kernel argument;
the telemetry fields (alpha, Euler angles, ...) the loss does not read are left out. The loss kernel and plain SGD
are ours too. The handles are loaded as the package's examples do (``load_aero_handles``) except that its 2-D aero
tables are flattened: the struct declares every table 1-D and Warp 1.19 refuses a 2-D array in a 1-D field (so
``sample_lut_2d`` reads them as 1-D on this Warp: a forward-value quirk of the package, not a gradient one).
State: 4 aircraft in level-ish flight at 1000 m (no ground contact: the contact array is empty, its loop runs 0
times), engine and propeller away from their clamps and Mach branches; 5 steps of 20 ms; the target comes from the
same flight with the thrust table scaled by 1.2 and the power table by 0.9.
"""

import os

import numpy as np
import warp as wp
import warp_jsb
from warp_jsb.aero_generated import AeroModelHandles
from warp_jsb.eom import AircraftState, ControlState, compute_full_dynamics_derivative
from warp_jsb.ground_reactions import ContactPoint

wp.init()
DEVICE = "cpu"
AIRCRAFT, STEPS, DT = 4, 5, 0.02
SGD_STEPS, LR = 3, 2e-6
# the flight-model constants of the package's examples (basic_flight.py); rho in slugs/ft^3 as its engine expects
S, B, C = 16.16, 10.91, 1.49
RHO, P_AMB = 0.0023769, 2116.22
R_AERO, R_PROP = wp.vec3(0.0, 0.0, 0.0), wp.vec3(-2.0, 0.0, 0.0)
AERO_TABLES = (
    "aero_coefficient_CDDf",
    "aero_coefficient_CDwbh",
    "aero_coefficient_CYb",
    "aero_coefficient_CYp",
    "aero_coefficient_CYr",
    "aero_coefficient_CLwbh",
    "aero_coefficient_CLDf",
    "aero_coefficient_Clb",
    "aero_coefficient_Clr",
    "aero_coefficient_Cmdf",
    "aero_coefficient_Cnb",
)


@wp.kernel
def rk4_step(
    states_in: wp.array(dtype=AircraftState),
    states_out: wp.array(dtype=AircraftState),
    controls: wp.array(dtype=ControlState),
    handles: AeroModelHandles,
    contacts: wp.array(dtype=ContactPoint),
    dt: wp.float32,
    S: wp.float32,
    b: wp.float32,
    c: wp.float32,
    rho: wp.float32,
    p_amb: wp.float32,
    r_aero: wp.vec3,
    r_prop: wp.vec3,
):
    """integrate_full_state_rk4_kernel's RK4 step, out of place."""
    tid = wp.tid()
    s = states_in[tid]
    ctrl = controls[tid]
    k1 = compute_full_dynamics_derivative(s, ctrl, handles, S, b, c, rho, contacts, p_amb, r_aero, r_prop)
    s2 = s
    s2.pos = s.pos + k1.d_pos * (dt * 0.5)
    s2.quat = wp.normalize(s.quat + k1.d_quat * (dt * 0.5))
    s2.vel_body = s.vel_body + k1.d_vel * (dt * 0.5)
    s2.omega_body = s.omega_body + k1.d_omega * (dt * 0.5)
    k2 = compute_full_dynamics_derivative(s2, ctrl, handles, S, b, c, rho, contacts, p_amb, r_aero, r_prop)
    s3 = s
    s3.pos = s.pos + k2.d_pos * (dt * 0.5)
    s3.quat = wp.normalize(s.quat + k2.d_quat * (dt * 0.5))
    s3.vel_body = s.vel_body + k2.d_vel * (dt * 0.5)
    s3.omega_body = s.omega_body + k2.d_omega * (dt * 0.5)
    k3 = compute_full_dynamics_derivative(s3, ctrl, handles, S, b, c, rho, contacts, p_amb, r_aero, r_prop)
    s4 = s
    s4.pos = s.pos + k3.d_pos * dt
    s4.quat = wp.normalize(s.quat + k3.d_quat * dt)
    s4.vel_body = s.vel_body + k3.d_vel * dt
    s4.omega_body = s.omega_body + k3.d_omega * dt
    k4 = compute_full_dynamics_derivative(s4, ctrl, handles, S, b, c, rho, contacts, p_amb, r_aero, r_prop)
    out = s
    out.pos = s.pos + (k1.d_pos + k2.d_pos * 2.0 + k3.d_pos * 2.0 + k4.d_pos) * (dt / 6.0)
    out.quat = wp.normalize(s.quat + (k1.d_quat + k2.d_quat * 2.0 + k3.d_quat * 2.0 + k4.d_quat) * (dt / 6.0))
    out.vel_body = s.vel_body + (k1.d_vel + k2.d_vel * 2.0 + k3.d_vel * 2.0 + k4.d_vel) * (dt / 6.0)
    out.omega_body = s.omega_body + (k1.d_omega + k2.d_omega * 2.0 + k3.d_omega * 2.0 + k4.d_omega) * (dt / 6.0)
    out.rpm = wp.max(0.1, s.rpm + (k1.d_rpm + k2.d_rpm * 2.0 + k3.d_rpm * 2.0 + k4.d_rpm) * (dt / 6.0))
    states_out[tid] = out


@wp.kernel
def trajectory_misfit(
    states: wp.array(dtype=AircraftState),
    target_pos: wp.array(dtype=wp.vec3),
    target_vel: wp.array(dtype=wp.vec3),
    target_rpm: wp.array(dtype=wp.float32),
    loss: wp.array(dtype=wp.float32),
):
    """Squared misfit of position (m), body velocity (m/s) and rpm (per 100 rpm) against the target, summed."""
    tid = wp.tid()
    s = states[tid]
    dp = s.pos - target_pos[tid]
    dv = s.vel_body - target_vel[tid]
    dr = (s.rpm - target_rpm[tid]) * 0.01
    wp.atomic_add(loss, 0, wp.dot(dp, dp) + wp.dot(dv, dv) + dr * dr)


def load_aero_handles(scale_thrust=1.0, scale_power=1.0):
    """The package examples' loader; 2-D tables flattened (the struct's fields are 1-D)."""
    assets = warp_jsb.get_c172p_assets_path()
    handles = AeroModelHandles()
    for name in (*AERO_TABLES, "C_THRUST", "C_POWER"):
        data = np.load(os.path.join(assets, f"{name}.npy")).astype(np.float32).ravel()
        meta = np.load(os.path.join(assets, f"{name}_meta.npy")).astype(np.float32)
        prefix = "prop_" if name.startswith("C_") else ""
        scale = scale_thrust if name == "C_THRUST" else scale_power if name == "C_POWER" else 1.0
        fitted = name.startswith("C_")
        setattr(handles, f"{prefix}{name}_table", wp.array(data * scale, device=DEVICE, requires_grad=fitted))
        setattr(handles, f"{prefix}{name}_meta", wp.array(meta, device=DEVICE))
    return handles


def initial_states():
    states = []
    for i in range(AIRCRAFT):
        s = AircraftState()
        s.pos = wp.vec3(0.0, 30.0 * i, -1000.0)
        s.quat = wp.quat_identity()
        s.vel_body = wp.vec3(48.0 + 2.0 * i, 0.5 * i - 0.7, 2.0 + 0.3 * i)
        s.omega_body = wp.vec3(0.01 * i, 0.02, -0.01)
        s.mass = 1880.0 / 2.20462
        s.inertia = wp.mat33(1285.0, 0.0, 0.0, 0.0, 1825.0, 0.0, 0.0, 0.0, 2667.0)
        s.inertia_inv = wp.mat33(1.0 / 1285.0, 0.0, 0.0, 0.0, 1.0 / 1825.0, 0.0, 0.0, 0.0, 1.0 / 2667.0)
        s.fuel_mass = 100.0
        s.rpm = 2300.0 + 50.0 * i
        states.append(s)
    return wp.array(states, dtype=AircraftState, device=DEVICE, requires_grad=True)


def controls():
    rows = []
    for i in range(AIRCRAFT):
        c = ControlState()
        c.elevator, c.aileron, c.rudder = -0.02 + 0.01 * i, 0.01 * i, -0.005
        c.throttle, c.mixture = 0.6 + 0.05 * i, 1.0
        rows.append(c)
    return wp.array(rows, dtype=ControlState, device=DEVICE)


def fly(handles, ctrl, contacts):
    """STEPS RK4 steps from the initial states, each into a fresh array; the final states."""
    states = initial_states()
    for _ in range(STEPS):
        nxt = wp.empty(AIRCRAFT, dtype=AircraftState, device=DEVICE, requires_grad=True)
        wp.launch(
            rk4_step,
            dim=AIRCRAFT,
            inputs=[states, nxt, ctrl, handles, contacts, DT, S, B, C, RHO, P_AMB, R_AERO, R_PROP],
            device=DEVICE,
        )
        states = nxt
    return states


def build():
    """(handles, [thrust table, power table], loss()): the fitted struct fields and the trajectory misfit (one
    forward: STEPS rk4_step launches and the misfit; record it on a tape to differentiate)."""
    ctrl = controls()
    contacts = wp.zeros(0, dtype=ContactPoint, device=DEVICE)
    final = fly(load_aero_handles(1.2, 0.9), ctrl, contacts).numpy()
    target_pos = wp.array(final["pos"], dtype=wp.vec3, device=DEVICE)
    target_vel = wp.array(final["vel_body"], dtype=wp.vec3, device=DEVICE)
    target_rpm = wp.array(final["rpm"], dtype=wp.float32, device=DEVICE)
    handles = load_aero_handles()
    params = [handles.prop_C_THRUST_table, handles.prop_C_POWER_table]
    loss = wp.zeros(1, dtype=wp.float32, device=DEVICE, requires_grad=True)

    def forward():
        loss.zero_()
        states = fly(handles, ctrl, contacts)
        wp.launch(
            trajectory_misfit, dim=AIRCRAFT, inputs=[states, target_pos, target_vel, target_rpm, loss], device=DEVICE
        )
        return loss

    return handles, params, forward


@wp.kernel
def sgd_update(param: wp.array(dtype=wp.float32), grad: wp.array(dtype=wp.float32), lr: wp.float32):
    i = wp.tid()
    param[i] = param[i] - lr * grad[i]


if __name__ == "__main__":
    handles, params, forward = build()
    for it in range(SGD_STEPS):
        tape = wp.Tape()
        with tape:
            loss = forward()
        tape.backward(loss)
        print(f"iter {it}: loss {loss.numpy()[0]:.6g}")
        for p in params:
            wp.launch(sgd_update, dim=p.shape[0], inputs=[p, p.grad, LR], device=DEVICE)
        tape.zero()
    thrust, power = (p.numpy().astype(np.float64) for p in params)
    print(f"C_THRUST: sum {thrust.sum():.6g}; C_POWER: sum {power.sum():.6g}")
