"""kernel_patterns: the constructs Warp differentiates wrongly on every release, named with the rewrite.

Each construct is first shown wrong on the Warp installed (real kernels on the CPU: the tape's gradient against
central differences of the same kernel in float64, or against the analytic one), its rewrite shown right, and
then found (or, for the right variants, not found) in the kernel's source.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import warp as wp
from conftest import by_check, line_of, run_scenario

from gradcheck.model import known_bugs
from gradcheck.source import kernel_patterns
from gradcheck.source.kernel_patterns import Suspect, suspects

SMALL = 4  # at most max_unroll (16): Warp unrolls range(SMALL)
LONG = 32  # above it: range(LONG) is a dynamic loop like range(n)
THREE = wp.constant(3)
X0 = np.array([0.3, 0.5, 0.7, 0.4])
W = [1.0, 2.0, 0.5, 1.5] + [0.1] * (LONG - 4)


@wp.kernel
def acc_runtime(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for i in range(n):
        acc = acc + w[i] * x[tid]
    y[tid] = acc * acc


@wp.kernel
def acc_guarded(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for i in range(SMALL):
        if i < n:
            acc = acc + w[i] * x[tid]
    y[tid] = acc * acc


@wp.kernel
def acc_guarded_long(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for i in range(LONG):
        if i < n:
            acc = acc + w[i] * x[tid]
    y[tid] = acc * acc


@wp.kernel
def acc_static_bound(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for i in range(wp.static(LONG)):  # replaced by 32 when the kernel is declared: no unroll
        if i < n:
            acc = acc + w[i] * x[tid]
    y[tid] = acc * acc


@wp.kernel
def acc_static_index(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for i in range(LONG):
        if wp.static(i) < n:
            acc = acc + w[i] * x[tid]
    y[tid] = acc * acc


@wp.kernel
def acc_into_array(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    for i in range(n):
        wp.atomic_add(y, tid, w[i] * x[tid])


@wp.kernel
def product_runtime(x: wp.array(dtype=float), k: float, n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    acc = wp.float32(1.0)
    for _i in range(n):
        acc = acc * (1.0 + k * x[tid])
    y[tid] = acc


@wp.func
def summed_square(v: float, n: int):
    acc = wp.float32(0.0)
    for _i in range(n):
        acc += v
    return acc * acc


@wp.kernel
def acc_in_func(x: wp.array(dtype=float), w: wp.array(dtype=float), n: int, y: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = summed_square(x[tid], n)


@wp.kernel
def scale_in_place(x: wp.array(dtype=float), a: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] * a[i]


@wp.kernel
def scale_through_local(x: wp.array(dtype=float), a: wp.array(dtype=float)):
    i = wp.tid()
    xi = x[i]
    x[i] = xi * a[i]


@wp.kernel
def add_in_place(x: wp.array(dtype=float), a: wp.array(dtype=float)):
    i = wp.tid()
    x[i] = x[i] + 2.0 * a[i] * a[i]


@wp.kernel
def sum_of_squares(x: wp.array(dtype=float), loss: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(loss, 0, x[i] * x[i])


def tape_and_fd(kernel, extra, eps=1e-3):
    """d sum(y) / dx from the tape, and from central differences of the same kernel (in float64)."""

    def forward(x0):
        x = wp.array(x0, dtype=float, requires_grad=True)
        y = wp.zeros(len(x0), dtype=float, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=len(x0), inputs=[x, *extra], outputs=[y])
        tape.backward(grads={y: wp.ones(len(x0), dtype=float)})
        return y.numpy().astype(np.float64).sum(), x.grad.numpy().astype(np.float64)

    ad = forward(X0)[1]
    fd = np.array([(forward(X0 + eps * e)[0] - forward(X0 - eps * e)[0]) / (2 * eps) for e in np.eye(len(X0))])
    return ad, fd


def fake(func):
    """A kernel-like object for source-only checks (never compiled: Warp would build it with the module)."""
    return SimpleNamespace(func=func, options={}, module=None, key=func.__name__)


# --- on the Warp installed: the construct is wrong, the rewrite is right, and the pattern says which is which ---


@pytest.mark.parametrize(
    ("kernel", "wrong"),
    [
        (acc_runtime, True),  # accumulate over range(n), square after: zero gradient
        (acc_guarded_long, True),  # a constant bound above max_unroll is a dynamic loop too
        (acc_static_bound, True),  # so is wp.static(LONG): wp.static of a constant is the constant
        (acc_in_func, True),  # the same in a @wp.func the kernel calls
        (acc_guarded, False),  # the rewrite: a constant bound (<= max_unroll) with a guard
        (acc_static_index, False),  # the rewrite: wp.static of the index forces the unroll of a long loop
        (acc_into_array, False),  # the rewrite: accumulate into an array element
    ],
)
def test_a_value_carried_through_a_dynamic_loop_gets_a_wrong_adjoint(kernel, wrong):
    w = wp.array(W, dtype=float)
    ad, fd = tape_and_fd(kernel, [w, 3])
    assert np.all(np.abs(fd) > 1.0)
    if wrong:
        assert not np.allclose(ad, fd, rtol=1e-2), (ad, fd)
        (suspect,) = suspects(kernel)
        assert suspect.bug == "RUNTIME_LOOP_CARRIED" and "`acc`" in suspect.what
        assert "wp.atomic_add(out, tid, val)" in suspect.rewrite and "max_unroll (16)" in suspect.rewrite
    else:
        np.testing.assert_allclose(ad, fd, rtol=1e-2)
        assert suspects(kernel) == ()


def test_a_running_product_over_a_dynamic_loop_is_wrong_not_only_zero():
    ad, fd = tape_and_fd(product_runtime, [0.7, 3])
    assert np.all(np.abs(ad - fd) > 0.1 * np.abs(fd)), (ad, fd)  # 1.19: AD 3.90/5.81/8.50/4.77, FD 3.07/3.83/4.66/3.44
    (suspect,) = suspects(product_runtime)
    assert suspect.where.endswith(f":{line_of(product_runtime.func, 'for _i in range(n)')}")
    assert (
        suspect.what == "`acc` is updated in `for _i in range(n)` (trip count known only at run time) and read after it"
    )


def in_place_grad(kernel, a0):
    """a.grad for loss = sum(x_after^2), x_after written by ``kernel`` in place."""
    x = wp.array(X0, dtype=float, requires_grad=True)
    a = wp.array(a0, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=len(X0), inputs=[x, a])
        wp.launch(sum_of_squares, dim=len(X0), inputs=[x, loss])
    tape.backward(loss)
    return a.grad.numpy().astype(np.float64)


def test_a_non_additive_in_place_update_is_replayed_on_the_overwritten_value():
    a0 = np.array([1.5, 2.0, 0.5, 3.0])
    right = 2 * (X0 * a0) * X0  # d/da sum (x a)^2
    for kernel in (scale_in_place, scale_through_local):
        got = in_place_grad(kernel, a0)
        np.testing.assert_allclose(got, 2 * (X0 * a0) ** 2, rtol=1e-5)  # x_new where x_old belongs
        assert not np.allclose(got, right, rtol=1e-2)
        (suspect,) = suspects(kernel)
        assert suspect.bug == "IN_PLACE_OVERWRITE" and suspect.where.endswith(f":{line_of(kernel.func, 'x[i] = x')}")
        assert "element of x it reads" in suspect.what
        assert suspect.rewrite.startswith("write the result to a separate output array (x_out[i] = ")
    assert suspects(scale_in_place)[0].rewrite == (
        "write the result to a separate output array (x_out[i] = x[i] * a[i]) and read that downstream"
    )
    # additive: derivative 1 in x[i], the rest never reads x: right, and not named
    np.testing.assert_allclose(in_place_grad(add_in_place, a0), 2 * (X0 + 2 * a0**2) * 4 * a0, rtol=1e-5)
    assert suspects(add_in_place) == ()


# --- the patterns on real kernels of Warp and of gradcheck's scenarios -----------------------------------------


def test_warps_own_diffray_example_accumulates_lambert_over_a_dynamic_loop():
    try:
        from warp.examples.optim import example_diffray
    except ImportError as e:  # it imports pxr (usd-core) at module level
        pytest.skip(f"example_diffray does not import: {e}")
    kernel = example_diffray.draw_kernel
    (suspect,) = suspects(kernel)
    assert suspect.bug == "RUNTIME_LOOP_CARRIED"
    assert suspect.where.endswith(f"example_diffray.py:{line_of(kernel.func, 'for i in range(lights.num_lights)')}")
    assert "`lambert`" in suspect.what and "range(lights.num_lights)" in suspect.what


def test_spring_chains_runtime_loop_is_named_and_the_clean_energy_is_not():
    from gradcheck.scenarios import spring_chain

    kernel = spring_chain.chain_energy_substeps
    (suspect,) = suspects(kernel)
    assert suspect.bug == "RUNTIME_LOOP_CARRIED" and "`d` is updated in `for _s in range(substeps)`" in suspect.what
    assert suspect.where.endswith(f"spring_chain.py:{line_of(kernel.func, 'for _s in range(substeps)')}")
    assert suspects(spring_chain.chain_energy) == ()
    assert suspects(spring_chain.chain_energy_custom) == ()


def test_the_finding_cites_the_line_and_the_rewrite_on_every_warp():
    from gradcheck.scenarios import spring_chain

    result, _ = run_scenario("spring-chain", fault="runtime-loop", passes=2)
    (wrong,) = by_check(result.findings, "adjoint-mismatch")
    line = line_of(spring_chain.chain_energy_substeps.func, "for _s in range(substeps)")
    assert f"spring_chain.py:{line}: `d` is updated" in wrong.message
    # the upstream bug in the message, the rewrite once, as the fix
    assert "NVIDIA/warp#729" in wrong.message and "wp.atomic_add(out, tid, val)" in wrong.hint
    assert f"spring_chain.py:{line}" in wrong.hint


# --- source-only cases (plain functions: never compiled) -------------------------------------------------------


def constant_bounds(x, y, n):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for i in range(SMALL):
        acc = acc + x[i]
    for i in range(3):
        acc = acc + x[i]
    for i in range(1, THREE):
        acc = acc + x[i]
    for i in range(wp.static(SMALL)):
        acc = acc + x[i]
    m = 2
    for i in range(m):
        acc = acc + x[i]
    y[tid] = acc * acc


def harmless_dynamic_loops(x, y, out, n):
    tid = wp.tid()
    scale = x[tid]
    last = wp.float32(0.0)
    for i in range(n):
        out[i] = scale * x[i]  # an array written, a variable only read
        wp.atomic_add(y, tid, scale * x[i])
        t = x[i] * 2.0  # defined in the loop, not before it
        y[i] = t + last
        last = t  # carried between iterations, but never read after the loop
    y[tid] = scale * scale


def dynamic_bounds(x, y, n, lights):
    tid = wp.tid()
    a = wp.float32(0.0)
    for i in range(x.shape[0]):
        a += x[i]
    b = wp.float32(1.0)
    for _i in range(lights.num_lights):
        b *= x[tid]
    c = wp.vec2(0.0, 0.0)
    m = n + 1
    for _i in range(m):
        c[0] = c[0] + x[tid]  # a component of a local vector
    d = wp.float32(0.0)
    for _i in range(2 * SMALL):  # Warp does not fold arithmetic: dynamic
        d = x[tid]  # a plain reassignment is carried too (measured: zero gradient)
    e = wp.float32(0.0)
    j = wp.int32(0)
    while j < n:
        e = e + x[j]
        j = j + 1
    for i in range(SMALL):
        if i >= n:
            break  # a break makes Warp emit the constant loop as a dynamic one
        e = e + x[i]
    f = wp.float32(0.0)
    for i in range(wp.static(LONG)):  # wp.static of a constant is just the constant: above max_unroll
        f = f + x[i]
    y[tid] = a * b * c[0] * d * e * f


def nested(x, y, n, m):
    tid = wp.tid()
    acc = wp.float32(0.0)
    for _i in range(n):
        for _j in range(m):
            acc = acc + x[tid]
    y[tid] = acc * acc
    for _i in range(SMALL):
        inner = wp.float32(0.0)
        for _k in range(m):
            inner = inner + x[tid]
        y[tid] = inner * inner


def test_constant_bounds_are_unrolled_and_not_named():
    assert suspects(fake(constant_bounds)) == ()


def test_a_dynamic_loop_that_carries_no_value_out_is_not_named():
    assert suspects(fake(harmless_dynamic_loops)) == ()


def test_every_kind_of_run_time_bound_is_named_with_its_line_and_variable():
    found = suspects(fake(dynamic_bounds))
    assert [s.bug for s in found] == ["RUNTIME_LOOP_CARRIED"] * 7
    at = {int(s.where.rsplit(":", 1)[1]): s.what for s in found}
    for header, name, why in [
        ("for i in range(x.shape[0])", "a", "trip count known only at run time"),
        ("for _i in range(lights.num_lights)", "b", "trip count known only at run time"),
        ("for _i in range(m)", "c", "trip count known only at run time"),
        ("for _i in range(2 * SMALL)", "d", "trip count known only at run time"),
        ("while j < n", "e", "a while loop"),
        ("for i in range(SMALL)", "e", "a break: not unrolled"),
        ("for i in range(wp.static(LONG))", "f", "32 iterations, above max_unroll 16: not unrolled"),
    ]:
        what = at[line_of(dynamic_bounds, header + ":")]
        assert what == f"`{name}` is updated in `{header}` ({why}) and read after it"


def test_a_constant_bound_above_max_unroll_follows_the_modules_option():
    long_loop = fake(acc_guarded_long.func)
    assert "32 iterations, above max_unroll 16" in suspects(long_loop)[0].what
    long_loop.options = {"max_unroll": 64}
    assert suspects(long_loop) == ()


def test_nested_dynamic_loops_name_a_variable_once_at_the_outermost():
    found = suspects(fake(nested))
    assert [(int(s.where.rsplit(":", 1)[1]), s.what.split(" is ")[0]) for s in found] == [
        (line_of(nested, "for _i in range(n)"), "`acc`"),
        (line_of(nested, "for _k in range(m)"), "`inner`"),  # the constant loop around it is unrolled
    ]


def _ping(v, n):
    return pong(v, n)


def _pong(v, n):
    w = v
    for _ in range(n):
        w = w * w
    return ping(w, n) + w


ping = SimpleNamespace(func=_ping, is_builtin=lambda: False)  # Function-like: what a @wp.func resolves to
pong = SimpleNamespace(func=_pong, is_builtin=lambda: False)


def calls_ping(x, y, n):
    tid = wp.tid()
    y[tid] = ping(x[tid], n) + wp.length(wp.vec2(x[tid], 0.0))


def test_called_functions_are_followed_once_each():
    (suspect,) = suspects(fake(calls_ping))
    assert suspect.what == (
        "in @wp.func pong (called from _ping): `w` is updated in `for _ in range(n)` "
        "(trip count known only at run time) and read after it"
    )
    assert suspect.where.endswith(f"test_kernel_patterns.py:{line_of(_pong, 'for _ in range(n)')}")
    (in_func,) = suspects(acc_in_func)
    assert in_func.what.startswith("in @wp.func summed_square (called from acc_in_func): `acc` is updated")


def in_place_variants(x, a, v, s, out, k):
    i = wp.tid()
    x[i] = x[i] + a[i]  # additive
    x[i] = a[i] * 2.0 + x[i]  # additive
    x[i] = x[i] - k * a[i] + 1.0  # additive
    x[i] += a[i]  # additive
    wp.atomic_add(x, i, a[i])  # additive
    out[i] = x[i] * a[i]  # another array
    x[i] = out[i] * a[i]  # does not read x[i]
    v[i] = v[i] * a[i]  # 1
    v[i] = wp.normalize(v[i])  # 2
    v[i] = v[i] + v[i - 1]  # 3: the rest reads v
    v[i] = a[i] - v[i]  # 4: minus itself
    v[i] *= a[i]  # 5
    s.q[i] = s.q[i] * 0.5  # 6: an array in a struct argument
    vi = v[i]
    v[i] = 2.0 * vi  # 7: through a local
    c = wp.vec3(0.0)
    c[0] = c[0] * 2.0  # a local vector's component, not an array


def test_non_additive_in_place_updates_are_named_additive_ones_are_not():
    found = suspects(fake(in_place_variants))
    assert {s.bug for s in found} == {"IN_PLACE_OVERWRITE"}
    lines = [int(s.where.rsplit(":", 1)[1]) for s in found]
    assert lines == [line_of(in_place_variants, f"# {n}") for n in range(1, 8)]
    assert found[4].rewrite.startswith("write the result to a separate output array (v_out[i] = v[i] * a[i])")
    assert "element of s.q it reads" in found[5].what


# --- API, robustness, cache ------------------------------------------------------------------------------------


def test_kernels_without_source_have_no_suspects():
    namespace: dict = {}
    exec("def generated(x):\n    for i in range(x):\n        x = x * x\n    return x\n", namespace)  # noqa: S102
    for kernel in (fake(namespace["generated"]), SimpleNamespace(func=len), SimpleNamespace(func=None), object()):
        assert suspects(kernel) == ()


def test_source_is_parsed_once_per_function():
    kernel_patterns._from_source.cache_clear()
    suspects(acc_runtime)
    hits = kernel_patterns._from_source.cache_info().hits
    suspects(acc_runtime)
    assert kernel_patterns._from_source.cache_info().hits == hits + 1


def test_suspect_keeps_its_positional_api_and_adds_the_rewrite():
    old = Suspect("TERNARY_SAME_ELEMENT", "k.py:3", "both branches read x[k]")
    assert (old.bug, old.where, old.what, old.rewrite) == (
        "TERNARY_SAME_ELEMENT",
        "k.py:3",
        "both branches read x[k]",
        "",
    )
    assert Suspect("a", None, "b", "c").rewrite == "c"


@pytest.mark.parametrize("name", ["RUNTIME_LOOP_CARRIED", "IN_PLACE_OVERWRITE"])
def test_live_bugs_affect_every_warp_and_say_so(name):
    bug = getattr(known_bugs, name)
    for version in ("1.19.0", "0.9.0", "1.10.0rc1", "99.0.0", "", None):
        assert bug.affects(version)
    note = bug.note("1.19.0")
    assert note.startswith(f"Warp 1.19.0 has {bug.issue}: ") and note.endswith(bug.workaround)
    assert "on every release so far" in note and "upgrade" not in note
    assert bug.note(None).startswith("Warp (any release) has ")
    # the version-bound bugs are as they were
    assert known_bugs.TERNARY_SAME_ELEMENT.affects("1.16.0") and not known_bugs.TERNARY_SAME_ELEMENT.affects("1.19.0")
    assert not known_bugs.TERNARY_SAME_ELEMENT.affects(None)


# --- a launch blame could not settle, whose kernel holds the construct -----------------------------------------


def _unsettled_trace(warp_version: str, bug: str = "RUNTIME_LOOP_CARRIED", gradient_wrong: bool = True):
    """A trace whose per-launch test left one launch without a verdict (its own finite differences scattered, as a
    hard-edged renderer's do) and found its kernel holding a construct: the check's input, as blame leaves it."""
    from gradcheck.model.trace import BlameResult, LaunchVerdict, Trace

    suspect = (bug, "/p/render.py:40", "`lambert` is updated in `for k in range(lights.num_lights)`", "use range(4)")
    verdict = LaunchVerdict(0, "draw", "/p/render.py:90", "no-verdict", 0.0, 1.0, -2.0, 12, suspects=(suspect,))
    blame = BlameResult((verdict, LaunchVerdict(1, "loss", "/p/render.py:95", "ok")), "--blame at backward 1")
    # what the checks read of the finite differences: whether they found the program's gradient wrong
    fd = SimpleNamespace(disagrees=gradient_wrong, warn=1e-2, error=1e-1)
    return Trace("program", None, "cpu", launch_checks=blame, warp_version=warp_version, fd=fd)


def test_an_unsettled_launch_with_a_live_construct_is_named_as_a_suspect_not_an_error():
    from gradcheck.checks import adjoint_mismatch
    from gradcheck.model.findings import Severity

    (named,) = adjoint_mismatch.check(_unsettled_trace("1.19.0"))
    assert named.severity == Severity.INFO and named.subject == "launch #0 draw (render.py:90)"
    assert "render.py:40" in named.message and "a suspect, not a measured error" in named.message
    assert named.hint == "at render.py:40: use range(4)"


def test_an_unsettled_launch_is_silent_where_its_construct_is_right():
    """A construct only an old release got wrong (fixed in 1.17.0) is no suspect on 1.19."""
    from gradcheck.checks import adjoint_mismatch

    assert adjoint_mismatch.check(_unsettled_trace("1.19.0", bug="TERNARY_SAME_ELEMENT")) == ()


def test_an_unsettled_launch_is_no_suspect_while_the_programs_gradient_is_right():
    """Correct kernels hold such loops too (Newton's Featherstone): a suspect needs the gradient measured wrong."""
    from gradcheck.checks import adjoint_mismatch

    assert adjoint_mismatch.check(_unsettled_trace("1.19.0", gradient_wrong=False)) == ()


def test_fd_mismatch_names_the_unsettled_suspect_as_its_likely_cause():
    from gradcheck.checks import fd_mismatch
    from gradcheck.model.findings import Finding, Severity

    finding = Finding(check="fd-mismatch", severity=Severity.ERROR, subject="x[0]", message="off", hint="", evidence={})
    explained = fd_mismatch._explained(finding, _unsettled_trace("1.19.0"))
    assert "likely cause: launch #0 draw (render.py:90) could not be judged alone" in explained.message
    assert "render.py:40" in explained.message and explained.hint == "rewrite it: use range(4)"
