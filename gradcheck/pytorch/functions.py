"""The custom ``torch.autograd.Function``s of a PyTorch program, each tested once against its own forward.

A Function whose backward runs Warp (a tape backward, adjoint launches) is where a wrong gradient hides in a
torch<->Warp program: a kernel adjoint launched with the wrong arguments, a tape gradient returned scaled, inputs
and outputs swapped. torch's autograd trusts whatever the backward returns. So the first call of each Function
subclass (and input dtypes and ranks: gradcheck.pytorch.function_test.signature) keeps copies of its inputs,
and once the program's backward is over (at the end of the next torch backward, or at the program's end) the
Function is run again on copies and its backward tested against central differences of its forward
(gradcheck.pytorch.function_test). The verdicts are the torch trace's ``launch_checks``, judged by
adjoint-mismatch: a Warp-backed Function that disagrees is an error; a pure-torch one at most an info (a
surrogate gradient is wrong on purpose); one that draws random numbers or writes state is no verdict.

Only the program's own Functions are tested (not torch's: checkpointing, its internals), only while the program
differentiates (grad enabled, a float input that requires grad), only in the audited thread, never inside
gradcheck's own work or a torch backward.
"""

from __future__ import annotations

import time

from gradcheck.model.trace import BlameResult

MAX_FUNCTIONS = 32  # distinct Functions (and input types) tested in one run
WHY = "custom autograd.Function test"


class FunctionTests:
    def __init__(self, watch) -> None:
        self.watch = watch
        self.enabled = True  # off with the default adjoint test (exec --no-adjoint-test)
        self._seen: set = set()
        self._pending: list = []  # FunctionCalls kept, waiting for the program's backward to be over
        self.verdicts: list = []
        self.seconds = 0.0

    def on_apply(self, cls, args: tuple, kwargs: dict, run):
        """``cls.apply(*args, **kwargs)`` (``run`` calls it): its first call of a kind keeps copies of its inputs."""
        if not self.enabled or self.watch.busy or self.watch.bridge.in_backward or len(self._seen) >= MAX_FUNCTIONS:
            return run()
        if (cls.__module__ or "").startswith("torch") or not self.audited_thread() or _transformed():
            return run()
        from gradcheck.pytorch.function_test import signature

        key = signature(cls, args)
        if key in self._seen:
            return run()
        call = None
        with self.watch._guard("custom Function: keeping its inputs"):
            call = self._keep(key, cls, args, kwargs)
        return run() if call is None else self._run_first(call, run)

    def audited_thread(self) -> bool:
        """The thread the watch audits (the first to call backward; the main thread before any did): asked without
        making this thread the audited one."""
        import threading

        audited = self.watch._thread
        ident = threading.get_ident()
        return ident == audited if audited is not None else threading.current_thread() is threading.main_thread()

    def _keep(self, key, cls, args, kwargs):
        from gradcheck.model.sites import caller_site
        from gradcheck.pytorch.function_test import FunctionCall, class_site, keep

        site = class_site(cls) or caller_site()
        kept = keep(cls, args, kwargs, site, len(self._seen))
        if kept is None:
            return None  # nothing to differentiate in this call: a later one may be
        self._seen.add(key)
        if isinstance(kept, FunctionCall):
            return kept
        from gradcheck.model.trace import LaunchVerdict
        from gradcheck.pytorch.function_test import FUNCTION

        self.verdicts.append(LaunchVerdict(len(self._seen) - 1, f"{FUNCTION} {cls.__qualname__}", site,
                                           "not-checked", note=kept))  # fmt: skip
        return None

    def _run_first(self, call, run):
        result = run()
        self._pending.append(call)
        return result

    @property
    def pending(self) -> bool:
        return bool(self._pending)

    def settle(self) -> None:
        """The program's backward is over: the Functions kept so far are tested, on copies, with gradcheck's hooks
        (torch's and Warp's) standing aside."""
        import contextlib

        from gradcheck.model.options import FDOptions
        from gradcheck.pytorch.function_test import test

        pending, self._pending = self._pending, []
        started = time.perf_counter()
        for call in pending:
            with contextlib.ExitStack() as stack:
                if self.watch.warp is not None:
                    stack.enter_context(self.watch.warp.ignoring())
                stack.enter_context(self.watch._guard(f"custom Function test: {call.cls.__qualname__}"))
                self.verdicts.append(test(call, self.watch.tensors(), FDOptions(), seed=call.index))
        self.seconds += time.perf_counter() - started

    def result(self) -> BlameResult | None:
        if not self.verdicts:
            return None
        ordered = tuple(sorted(self.verdicts, key=lambda v: v.index))
        return BlameResult(verdicts=ordered, why=WHY, seconds=self.seconds)


def _transformed() -> bool:
    """torch.compile is tracing (its graph must not see gradcheck's bookkeeping), or a functorch transform (vmap,
    grad) runs: its tensors are wrappers that must not escape it."""
    import torch

    compiler = getattr(torch, "compiler", None)
    if compiler is not None and getattr(compiler, "is_compiling", lambda: False)():
        return True
    active = getattr(torch._C, "_are_functorch_transforms_active", None)
    return bool(active is not None and active())
