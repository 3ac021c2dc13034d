"""Calling a scenario's hooks: what each may return, and what its failures become.

A scenario must not end gradcheck: whatever a hook raises (``sys.exit`` and a KeyboardInterrupt it raises itself
included) becomes a ScenarioError naming the hook and the pass, and the passes that finished are still reported.
The user's own Ctrl-C (``Interrupted``) goes through.
"""

from __future__ import annotations

import contextvars
from collections.abc import Mapping

from gradcheck.engine.interrupts import Interrupted, ending
from gradcheck.model.errors import ScenarioError, UsageError
from gradcheck.model.trace import Trace
from gradcheck.warp_compat import is_array, scalars_per_element

CURRENT_PASS: contextvars.ContextVar[tuple[int, int] | None] = contextvars.ContextVar("gradcheck_pass", default=None)


class PassFailed(ScenarioError):
    """A hook failed after pass 1: the error, with the Trace of the passes that finished."""

    def __init__(self, message: str, trace: Trace) -> None:
        super().__init__(message)
        self.trace = trace


def call(name: str, phase: str, fn, /, *args, **kwargs):
    """Call a scenario hook; what it raises becomes a ScenarioError naming the hook (and the pass)."""
    try:
        return fn(*args, **kwargs)
    except (ScenarioError, Interrupted):
        raise
    except Exception as exc:
        raise ScenarioError(
            f"{name}: {phase}() raised {type(exc).__name__}{_on_pass()}: {exc}; fix the scenario "
            "(--debug shows the traceback)"
        ) from exc
    except (SystemExit, KeyboardInterrupt) as exc:
        raise ScenarioError(
            f"{name}: {phase}() raised {ending(exc)}{_on_pass()}; a scenario must return or raise an exception, "
            "not end the process: fix the scenario (--debug shows the traceback)"
        ) from exc


def _on_pass() -> str:
    current = CURRENT_PASS.get()
    return f" on pass {current[0]} of {current[1]}" if current else ""


def _named_options(cause: BaseException, options: dict) -> dict:
    """The --set options ``cause``'s message names, by key or by value (``int('abc')`` names only the value): a
    ValueError that names none of them (``fault + 1`` on None) is the scenario's bug, not the user's input."""
    import re

    text = str(cause)

    def said(word: str) -> bool:
        return bool(word) and re.search(rf"(?<![\w.]){re.escape(word)}(?![\w.])", text) is not None

    return {k: v for k, v in options.items() if said(str(k)) or said(str(v))}


def setup(scenario, name: str, device: str, fault, options: dict) -> None:
    """setup() with the --set options. A ValueError or TypeError from setup() whose message names a --set option
    (its key or its value) is that option's fault, not the scenario's (``steps=abc``, ``steps=-3``): a usage error
    (exit 2) naming the option and the scenario's own message. Otherwise it is the scenario's bug (exit 3)."""
    try:
        call(name, "setup", scenario.setup, device, fault=fault, **options)
    except ScenarioError as exc:
        cause = exc.__cause__
        named = _named_options(cause, options) if isinstance(cause, (ValueError, TypeError)) else {}
        if named:
            given = " ".join(f"--set {k}={v}" for k, v in named.items())
            raise UsageError(f"{name}: setup() rejected {given}: {_one_line(cause)}") from cause
        raise


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def params_of(scenario, name: str) -> dict:
    """params() as a dict of Warp arrays, or the ScenarioError that says what it returned instead."""
    params = call(name, "params", scenario.params)
    if not isinstance(params, Mapping):
        raise ScenarioError(
            f"{name}: params() returned {type(params).__name__}; return a dict {{name: wp.array}} of the "
            "arrays whose gradients to check"
        )
    if not params:
        raise ScenarioError(
            f"{name}: params() returned an empty dict, so no gradient would be checked; return {{name: wp.array}} "
            "with the arrays (requires_grad=True) whose gradients to check"
        )
    for key, value in params.items():
        if not is_array(value):
            raise ScenarioError(
                f"{name}: params()[{key!r}] is {type(value).__name__}, not a wp.array; "
                "return only Warp arrays allocated with requires_grad=True"
            )
    return dict(params)


def check_loss(name: str, loss) -> None:
    """The default backward needs a one-element loss that requires grad: say so before Warp does."""
    if not is_array(loss):
        raise ScenarioError(
            f"{name}: forward() returned {type(loss).__name__}, not a wp.array; return the scalar loss array "
            "(or define backward(tape, output) to seed the tape yourself)"
        )
    if loss.size != 1 or scalars_per_element(loss.dtype) != 1:
        raise ScenarioError(
            f"{name}: the loss returned by forward() has shape {tuple(loss.shape)} and dtype {dtype_name(loss.dtype)}; "
            "the default backward needs a one-element scalar loss: reduce it in a kernel, "
            "or define backward(tape, output) and call tape.backward(grads=...)"
        )
    if not loss.requires_grad:
        raise ScenarioError(
            f"{name}: the loss returned by forward() has requires_grad=False; allocate it with requires_grad=True"
        )


def backward(scenario, name: str, tape, loss) -> bool:
    """Run the scenario's backward (or ``tape.backward(loss)``). Returns whether backward ran on this tape at all
    (a checkpointing scenario records and runs its own tapes instead)."""
    if not callable(getattr(scenario, "backward", None)):
        check_loss(name, loss)
        call(name, "backward", tape.backward, loss)
        return True
    calls = []
    original = tape.backward

    def noted(*args, **kwargs):
        calls.append(True)
        return original(*args, **kwargs)

    tape.backward = noted  # on this tape instance only, for the duration of the scenario's backward
    try:
        call(name, "backward", scenario.backward, tape, loss)
    finally:
        del tape.backward
    return bool(calls)


def restore(params: dict, snapshots: dict) -> None:
    """Every param back to its values after setup."""
    import warp as wp

    for key, arr in params.items():
        snap = snapshots.get(key)
        if snap is not None and snap.shape == arr.shape and snap.dtype == arr.dtype:
            wp.copy(arr, snap)


def dtype_name(dtype) -> str:
    return getattr(dtype, "__name__", None) or str(dtype)
