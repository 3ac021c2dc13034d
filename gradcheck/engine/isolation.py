"""``--timeout``: scenarios run in a worker process that the parent can stop.

Why a process, not a thread or SIGALRM: a hang is usually inside native code (a Warp kernel that never
returns, a CUDA synchronize, a solver spinning in C), where neither a Python exception nor a signal
handler ever gets control. Only killing the process stops it. One worker runs the scenarios in order,
so Warp is imported and kernels are loaded once; after a hang or a crash (segfault, ``os._exit``) the
worker is replaced and the scenarios after it still run and are still reported.

The worker is started with ``spawn``: forking a process that has initialised Warp or CUDA is unsafe.
"""

from __future__ import annotations

import os
import signal
import time

from gradcheck.model.errors import ScenarioError, UsageError

STARTUP_LIMIT_S = 300.0  # importing Warp in a fresh process; generous for a cold cache on a slow CI runner


class Isolated:
    """Runs scenarios one by one in a worker process; a context manager that stops the worker at the end.

    ``run_one`` has scenario_run.run_one's signature and returns the same ScenarioResult, or an error result
    when the scenario outlived ``timeout`` seconds or took its process down."""

    def __init__(self, timeout: float, fresh_process: bool = False) -> None:
        self.timeout = timeout
        self.fresh_process = fresh_process  # a new worker for every scenario (gradcheck ci), not only after a failure
        self.versions: dict[str, str] = {}  # the workers' warp/newton versions, for the report's environment
        self._worker: _Worker | None = None

    def __enter__(self) -> Isolated:
        return self

    def __exit__(self, *exc) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def abort(self) -> None:
        """Ctrl-C or SIGTERM: kill the worker and everything it started, now."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None

    def check(self, requests) -> None:
        """scenario_run.preflight in a worker (loading a scenario runs its module's code, which may hang or crash):
        its usage error is raised here. A worker that dies or outlives ``timeout`` checks nothing: each scenario's
        own run then reports what is wrong with it. For ``fresh_process`` the worker goes; else it runs them."""
        if not requests:
            return
        if self._worker is None:
            self._worker = _Worker()
        message = self._worker.check(list(requests), self.timeout)
        if message is None:
            self._worker.stop()
        elif self.fresh_process:
            self._worker.close()
        if message is None or self.fresh_process:
            self._worker = None
        if message and message[0] == "usage":
            raise UsageError(message[1])

    def run_one(self, spec: str, options, device: str, progress=None):
        if self._worker is None:
            self._worker = _Worker()
        result, healthy = self._worker.run(spec, options, device, progress, self.timeout)
        self.versions |= self._worker.versions
        if not healthy:
            self._worker.stop()
            self._worker = None
        elif self.fresh_process:
            self._worker.close()
            self._worker = None
        return result


class _Worker:
    def __init__(self) -> None:
        import multiprocessing

        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=_serve, args=(child,), name="gradcheck-worker", daemon=True)
        self.process.start()
        child.close()
        self.ready = False
        self.versions: dict[str, str] = {}
        self.last_pass: tuple[str, int, int] | None = None  # the latest progress message of the running scenario

    def _start(self, timeout: float) -> str | None:
        """None once the worker is ready, else why it is not."""
        if not self.ready:
            message = self._receive(time.monotonic() + max(timeout, STARTUP_LIMIT_S), None)
            if message is None or message[0] != "ready":
                return "did not start in time" if message is None else self._death()
            self.ready = True
        return None

    def check(self, requests: list, timeout: float):
        """("checked", None) or ("usage", message) from the worker's preflight; None when it did not answer."""
        if self._start(timeout) is not None:
            return None
        self.connection.send(("check", requests))
        message = self._receive(time.monotonic() + timeout, None)
        return message if message is not None and message[0] in ("checked", "usage") else None

    def run(self, spec: str, options, device: str, progress, timeout: float):
        """(ScenarioResult, worker still usable)."""
        why = self._start(timeout)
        if why is not None:
            return _failure(spec, options, device, f"{spec}: the worker process {why}", 0.0), False
        started = time.monotonic()
        self.connection.send(("run", spec, options, device))
        self.last_pass = None
        message = self._receive(started + timeout, progress)
        seconds = time.monotonic() - started
        if message is None:
            where = _where(self.last_pass)
            text = (
                f"{spec}: timed out after {timeout:g} s (--timeout) {where}; the worker process was stopped. "
                "Run it alone with a larger --timeout, or look for a kernel or loop that never finishes"
            )
            return _failure(spec, options, device, text, seconds), False
        if message[0] == "died":
            text = f"{spec}: the worker process {self._death()} while running it; nothing was reported for it"
            return _failure(spec, options, device, text, seconds), False
        self.versions = message[2]
        return message[1], True

    def _receive(self, deadline: float, progress):
        """The next "ready"/"result" message, ("died",) when the worker is gone, None at the deadline."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            if not self.connection.poll(min(remaining, 0.5)):
                if not self.process.is_alive() and not self.connection.poll(0):
                    return ("died",)
                continue
            try:
                message = self.connection.recv()
            except (EOFError, OSError):
                return ("died",)
            if message[0] == "progress":
                self.last_pass = message[1:]
                if progress is not None:
                    progress(*message[1:])
                continue
            return message

    def _death(self) -> str:
        self.process.join(5)
        code = self.process.exitcode
        if code is None:
            return "stopped answering"
        if code < 0:
            try:
                return f"was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"was killed by signal {-code}"
        return f"exited with status {code}"

    def stop(self) -> None:
        """Kill it and its process group: a hung worker will not read a polite request, and a child process a
        scenario started (holding the caller's pipes open) must not outlive it."""
        _kill_group(self.process)
        self.process.join(10)
        self.connection.close()

    def close(self) -> None:
        try:
            self.connection.send(None)
        except (OSError, BrokenPipeError):
            pass
        self.process.join(10)
        _kill_group(self.process)  # what its scenarios started and left running
        self.process.join(10)
        self.connection.close()


def _kill_group(process) -> None:
    """SIGKILL the worker's process group (its own, see _serve): the worker and whatever its scenarios spawned."""
    pid = process.pid
    if pid is None:
        return
    try:
        os.killpg(pid, signal.SIGKILL)  # no such group (it had not set it up yet): the worker alone
    except (AttributeError, OSError):  # AttributeError: no process groups on this platform
        if process.is_alive():
            process.kill()


def _serve(connection) -> None:
    """The worker: import Warp once, then answer each ("check", requests) and ("run", spec, options, device) it is
    sent."""
    # its own process group: the parent ends the whole group on timeout, Ctrl-C and SIGTERM; the terminal's
    # Ctrl-C reaches the parent only, which reports what finished before stopping the worker
    try:
        os.setpgid(0, 0)
    except (AttributeError, OSError):
        pass
    os.dup2(2, 1)  # whatever scenarios print goes to stderr; results travel over the pipe
    import sys

    from gradcheck.engine.scenario_run import preflight, run_one
    from gradcheck.warp_compat import load_warp

    load_warp()  # import and initialise Warp before the first timed scenario
    connection.send(("ready",))
    while True:
        job = connection.recv()
        if job is None:
            return
        if job[0] == "check":
            try:
                preflight(job[1])
            except UsageError as exc:
                connection.send(("usage", str(exc)))
            else:
                connection.send(("checked", None))
            continue
        _, spec, options, device = job

        def report(name: str, index: int, passes: int) -> None:
            connection.send(("progress", name, index, passes))

        result = run_one(spec, options, device, report)
        versions = {m: getattr(sys.modules[m], "__version__", "?") for m in ("warp", "newton") if m in sys.modules}
        connection.send(("result", result, versions))


def _where(last_pass: tuple[str, int, int] | None) -> str:
    """Which phase a hung scenario was in, from the last progress message (sent after each pass)."""
    if last_pass is None:
        return "before its first pass finished (setup, compile or pass 1)"
    _, done, passes = last_pass
    if done < passes:
        return f"during pass {done + 1} of {passes}"
    return f"after its {passes} passes (finite-difference, blame or reentrancy probe)"


def _failure(spec: str, options, device: str, message: str, seconds: float):
    from gradcheck.engine.scenario_run import failed_result

    return failed_result(spec, spec, options, device, ScenarioError(message), seconds)
