"""Hosting a program exactly as ``python script.py ARGS`` or ``python -m module ARGS`` runs it.

``gradcheck exec`` must be invisible to the program, like ``coverage run`` or ``python -m pdb``: loud only about
findings. A program that behaves differently under the tool is a program the tool cannot audit, so everything
python's own top level does around a program is redone here, in python's order:

- before: a fresh ``__main__`` module (``__file__`` made absolute as python makes it, ``__spec__``, ``__loader__``,
  ``__builtins__`` the module, ``__annotations__``), ``sys.argv`` and ``sys.orig_argv`` as python sets them,
  ``sys.path[0]`` *replacing* gradcheck's own entry (the console script's folder) with the script's real folder or,
  for ``-m``, the current directory, and python's own ``sys.excepthook`` (Typer installs one);
- after: an uncaught exception printed through ``sys.excepthook`` from the program's first frame (for ``-m``, from
  runpy's ``<frozen runpy>`` frames, which python shows too), a ``sys.exit`` message printed, and then, for the
  process's top level, non-daemon threads joined and atexit handlers run. Only after that does gradcheck finish
  its audit and write its report, so the report follows everything the program printed.

Signal handlers stay the program's: SIGINT keeps Python's ``default_int_handler`` (a KeyboardInterrupt that escapes
the program is the user's Ctrl-C); only SIGTERM is taken while the program runs, and only when nobody handles it,
so ``timeout`` still gets a report. A process the program forks that returns through here ends with the status
python would give it, after python's own ending, and never reports.

``keep_std_streams`` swaps sys.stdout/sys.stderr for TextIOWrappers over the same buffers that remember the end of
what the program wrote (where the report starts; the program's last error line), named so their repr is python's.
"""

from __future__ import annotations

import builtins
import io
import os
import signal
import sys
import threading
import time
import types
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgramRun:
    """How the program ran. ``status``: the exit status python would have given it (0: it finished)."""

    target: str
    module: bool
    status: int
    error: str | None  # its last error line: the exception, the sys.exit message, or its last line on stderr
    traceback: str | None  # the uncaught exception's traceback as printed, program frames only
    seconds: float
    interrupted: object = None  # an Interrupted when Ctrl-C (any KeyboardInterrupt it let out) or SIGTERM stopped it
    stopped: bool = False  # gradcheck stopped it before a backward through a dangling pointer


def run_program(target: str, args: list[str], module: bool = False, *, top_level: bool = False) -> ProgramRun:
    """Run ``target`` (a script, a directory or zip with ``__main__.py``, or with ``module`` a module name) as
    ``__main__`` with ``args``. ``top_level``: this process is the program's (``gradcheck exec``): python's ending
    (threads joined, atexit handlers) runs here, before the report, and ``__main__`` stays the program's."""
    return Host(target, args, module, top_level=top_level).run()


@dataclass
class _Ending:
    status: int = 0
    error: str | None = None
    traceback: str | None = None
    interrupted: object = None
    stopped: bool = False


class Host:
    """One program, run once as python's top level would run it (see the module docstring)."""

    def __init__(self, target: str, args: list[str], module: bool = False, top_level: bool = False):
        self.target, self.args, self.module, self.top_level = target, list(args), module, top_level
        self.pid = os.getpid()  # only this process reports; a forked child ends as python would end it
        self._code = None  # the script's code object: its traceback starts at its frame

    def run(self) -> ProgramRun:
        """Set up, run, end as python does; ``sys`` is put back afterwards (for gradcheck's own work, and for an
        in-process caller). In a forked child this never returns."""
        from gradcheck.engine.interrupts import watch

        started = time.perf_counter()
        saved = _Saved()
        ending = _Ending()
        try:
            with watch(signals=(signal.SIGTERM,)):
                exc = self._execute()
                child = os.getpid() != self.pid
                ending = self._end(exc, child)
                try:
                    if self.top_level:
                        finish_like_python()
                except KeyboardInterrupt as late:  # Ctrl-C or SIGTERM while threads were joined
                    ending.interrupted = _as_interrupted(late)
                if child:
                    _exit_child(ending)
        finally:
            saved.restore(main=not self.top_level)
        seconds = time.perf_counter() - started
        return ProgramRun(self.target, self.module, ending.status, ending.error, ending.traceback, seconds,
                          ending.interrupted, ending.stopped)  # fmt: skip

    def _execute(self) -> BaseException | None:
        """Run the program as python's top level would; the exception that ended it (None: it returned)."""
        import runpy

        main = _fresh_main()
        sys.modules["__main__"] = main
        sys.excepthook = sys.__excepthook__
        path0 = program_path0(self.target, self.module)
        if path0 is not None:
            sys.path[:1] = [path0]
        launcher = sys.orig_argv[:1] if hasattr(sys, "orig_argv") else []
        sys.orig_argv = [*launcher, *(["-m"] if self.module else []), self.target, *self.args]
        sys.argv = ["-m" if self.module else self.target, *self.args]  # runpy puts the module's path in for -m
        try:
            if self.module:
                runpy._run_module_as_main(self.target, alter_argv=True)
            elif _importable(self.target):  # python DIR / python APP.zip: their __main__ module
                runpy._run_module_as_main("__main__", alter_argv=False)
            else:
                filename = python_abspath(self.target)
                main.__dict__.update(__file__=filename, __cached__=None, __loader__=_source_loader(filename))
                with io.open_code(filename) as handle:
                    self._code = compile(handle.read(), filename, "exec", dont_inherit=True)
                exec(self._code, main.__dict__)
        except BaseException as exc:  # noqa: BLE001 - how the program ended is handled as python would, not raised
            return exc
        return None

    def _end(self, exc: BaseException | None, child: bool) -> _Ending:
        """What python's top level does with how the program ended: the status, and what it prints."""
        from gradcheck.observe import DanglingAdjointStop

        if exc is None:
            return _Ending()
        if isinstance(exc, SystemExit):
            status, message = exit_status(exc.code)
            if message is not None:
                _print_to_stderr(message + "\n")
            return _Ending(status, message if message is not None else (_last_error_line() if status else None))
        if isinstance(exc, KeyboardInterrupt) and not child:  # the user's Ctrl-C: reported, exit 130
            interrupted = _as_interrupted(exc)
            return _Ending(128 + interrupted.signum, interrupted=interrupted)
        if isinstance(exc, DanglingAdjointStop):  # gradcheck stopped it, like a sanitizer: its own line says so
            return _Ending(1, str(exc), stopped=True)
        printed = print_uncaught(exc, self._starts_program)
        interrupted = _as_interrupted(exc) if isinstance(exc, KeyboardInterrupt) else None  # a child's: python dies
        return _Ending(1, f"{type(exc).__name__}: {exc}", printed, interrupted)

    def _starts_program(self, code) -> bool:
        """The frame python's own traceback starts at: the script's, or runpy's for -m (python shows those)."""
        import runpy

        return code is self._code if self._code is not None else code is runpy._run_module_as_main.__code__


# -- before: what python sets up --------------------------------------------------------------------------


def _fresh_main() -> types.ModuleType:
    """A ``__main__`` as python's startup makes it (pylifecycle's add_main_module)."""
    from importlib.machinery import BuiltinImporter

    main = types.ModuleType("__main__")
    main.__dict__.update(__annotations__={}, __builtins__=builtins, __loader__=BuiltinImporter)
    return main


def _source_loader(filename: str):
    from importlib.machinery import SourceFileLoader

    return SourceFileLoader("__main__", filename)


def python_abspath(path: str) -> str:
    """A path made absolute as python makes its script's ``__file__``: the working directory, a separator, the
    path as typed (``./train.py`` gives ``/cwd/./train.py``: no normalisation, unlike os.path.abspath)."""
    return path if os.path.isabs(path) else os.getcwd() + os.sep + path


def _importable(target: str) -> bool:
    """A directory or zip file python runs through its ``__main__`` module."""
    import zipfile

    return os.path.isdir(target) or zipfile.is_zipfile(target)


def program_path0(target: str, module: bool) -> str | None:
    """What python puts first on ``sys.path`` for this program: the script's folder with links resolved, the
    directory or zip itself, or for ``-m`` the current directory; None under ``-P``/PYTHONSAFEPATH (nothing)."""
    if getattr(sys.flags, "safe_path", False):
        return None
    if module:
        return os.getcwd()
    if _importable(target):
        return python_abspath(target)
    return os.path.dirname(os.path.realpath(python_abspath(target)))


def after_import(name: str, callback):
    """Call ``callback()`` once module ``name`` is imported: now if it is, else right after the program's own
    import of it has run (a finder first on ``sys.meta_path`` wraps the real loader once). gradcheck must not
    import Warp for the program: Warp's configuration is the program's to set before its import, and a program
    that never imports Warp must run without it. A failing callback never reaches the program: it is kept in the
    returned hook's ``failed``; ``remove()`` takes the hook away if it never fired."""
    hook = _AfterImport(name, callback)
    if name in sys.modules:
        hook.fire()
    else:
        sys.meta_path.insert(0, hook)
    return hook


class _AfterImport:
    """A meta-path finder that only answers for ``name``, with the spec the other finders give and its loader
    wrapped, so the callback runs right after the module's own code (Python has no post-import hook)."""

    def __init__(self, name: str, callback) -> None:
        self.name, self.callback = name, callback
        self.failed: BaseException | None = None
        self._searching = False

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._searching:
            return None
        import importlib.util

        self._searching = True
        try:
            spec = importlib.util.find_spec(fullname)  # what the other finders say (this one stands aside)
        finally:
            self._searching = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        spec.loader = _ThenCall(spec.loader, self)
        return spec

    def fire(self) -> None:
        self.remove()
        try:
            self.callback()
        except Exception as exc:  # noqa: BLE001 - gradcheck's failure to start must not become the program's
            self.failed = exc


class _ThenCall:
    """The real loader, then the callback; the module keeps the real loader as its ``__loader__``."""

    def __init__(self, loader, hook: _AfterImport) -> None:
        self.loader, self.hook = loader, hook

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__spec__.loader = module.__loader__ = self.loader
        self.loader.exec_module(module)
        self.hook.fire()

    def __getattr__(self, name):
        return getattr(self.loader, name)


class _Saved:
    """What hosting changes in ``sys``, put back after the program (``__main__`` too, except at the top level)."""

    def __init__(self) -> None:
        self.argv, self.path, self.path_list = sys.argv, sys.path[:], sys.path
        self.orig_argv = getattr(sys, "orig_argv", None)
        self.main, self.excepthook = sys.modules.get("__main__"), sys.excepthook

    def restore(self, main: bool) -> None:
        sys.argv, sys.excepthook = self.argv, self.excepthook
        if self.orig_argv is not None:
            sys.orig_argv = self.orig_argv
        self.path_list[:] = self.path
        sys.path = self.path_list
        if main and self.main is not None:
            sys.modules["__main__"] = self.main


# -- after: what python's top level does when the program ends --------------------------------------------


def exit_status(code) -> tuple[int, str | None]:
    """Python's handling of ``SystemExit(code)``: (the process's exit status, the message it prints or None).
    None is 0; an int (a bool too) is its low byte, as the OS sees it; anything else is printed and is 1."""
    if code is None:
        return 0, None
    if isinstance(code, int):
        value = int(code)
        return (value if -(2**63) <= value < 2**63 else -1) & 0xFF, None
    return 1, str(code)


def print_uncaught(exc: BaseException, starts_program) -> str:
    """Print ``exc`` as python prints an uncaught exception: ``sys.last_*`` set, then ``sys.excepthook`` (the
    program's own if it set one) with gradcheck's frames trimmed, so it starts where python's would. Returns the
    traceback text (for ``--debug``)."""
    import traceback

    trimmed = _hide_frames(exc.__traceback__, starts_program)
    exc.__traceback__ = trimmed
    _strip_chain(exc)
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, trimmed
    if sys.version_info >= (3, 12):
        sys.last_exc = exc
    text = "".join(traceback.format_exception(type(exc), exc, trimmed))
    hook = getattr(sys, "excepthook", None)
    if hook is None:
        _print_to_stderr("sys.excepthook is missing\n")
        hook = sys.__excepthook__
    try:
        hook(type(exc), exc, trimmed)
    except BaseException as failure:  # noqa: BLE001 - python reports a broken excepthook, then the original
        _print_to_stderr("Error in sys.excepthook:\n" + "".join(traceback.format_exception(failure)))
        _print_to_stderr("\nOriginal exception was:\n" + text)
    return text


_GRADCHECK = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def _hide_frames(tb, starts_program=None):
    """``tb`` from the frame ``starts_program`` accepts (all of it when None), without gradcheck's own frames in
    between: the observer's hooks around Warp's functions (a launch Warp rejects raises through them; the wp.copy
    hook's frame carries a file name inside Warp's package, see COPY_HOOK_FILE) and the stream wrappers (a print
    passes through one) are not there under python."""
    from gradcheck.warp_compat.hooks import COPY_HOOK_FILE  # here: the hooks are the observer's, not hosting's

    if starts_program is not None:
        start = tb
        while start is not None and not starts_program(start.tb_frame.f_code):
            start = start.tb_next
        tb = start
    entries = []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(_GRADCHECK) and not filename.endswith(COPY_HOOK_FILE):
            entries.append(tb)
        tb = tb.tb_next
    rebuilt = None
    for entry in reversed(entries):
        rebuilt = types.TracebackType(rebuilt, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return rebuilt


def _strip_chain(exc: BaseException) -> None:
    seen = {id(exc)}
    linked = [exc.__cause__, exc.__context__]
    while linked:
        inner = linked.pop()
        if inner is None or id(inner) in seen:
            continue
        seen.add(id(inner))
        inner.__traceback__ = _hide_frames(inner.__traceback__)
        linked += [inner.__cause__, inner.__context__]


def finish_like_python() -> None:
    """What python does once ``__main__`` has ended, before it exits: wait for the non-daemon threads (after the
    threading module's own exit hooks, which stop idle executor workers), then run the atexit handlers, once."""
    import atexit

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        shutdown()
    atexit._run_exitfuncs()


def _exit_child(ending: _Ending) -> None:
    """A forked child returning through gradcheck ends as python would end it: its streams flushed, its status;
    nothing of gradcheck's (no audit finish, no report)."""
    flush_program_streams()
    if ending.interrupted is not None and getattr(ending.interrupted, "signum", None) == signal.SIGINT:
        signal.signal(signal.SIGINT, signal.SIG_DFL)  # python dies of the signal after an uncaught Ctrl-C
        os.kill(os.getpid(), signal.SIGINT)
    os._exit(ending.status)


def _as_interrupted(exc: BaseException):
    from gradcheck.engine.interrupts import Interrupted

    return exc if isinstance(exc, Interrupted) else Interrupted(signal.SIGINT)


def _print_to_stderr(text: str) -> None:
    """Where python prints at its top level: the program's sys.stderr, or the C stream when it has none."""
    stream = sys.stderr
    try:
        if stream is not None:
            stream.write(text)
            stream.flush()
            return
    except Exception:  # noqa: BLE001 - a closed or broken stream: python falls back to the C stream too
        pass
    try:
        os.write(2, text.encode(errors="backslashreplace"))
    except OSError:
        pass


def flush_program_streams() -> None:
    """Everything the program wrote and its streams still hold: Python's stdout and stderr (the current ones and
    the ones it started with) and C's stdio buffers (a Warp kernel's printf, native code)."""
    streams = {id(s): s for s in (sys.stdout, sys.__stdout__, sys.stderr, sys.__stderr__) if s is not None}
    for stream in streams.values():
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - closed, detached or broken by the program: nothing left to flush
            pass
    try:
        import ctypes

        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001 - no C library to ask (not Linux/macOS)
        pass


# -- the program's std streams, remembered -----------------------------------------------------------------

_TAIL = 512


class _TrackedText(io.TextIOWrapper):
    """sys.stdout or sys.stderr as python made it (same buffer, encoding, errors and buffering), remembering the
    end of what the program wrote: whether the report must start on a new line, the program's last error line."""

    tail = ""

    def write(self, text):
        written = super().write(text)
        if text:
            self.tail = (self.tail + text)[-_TAIL:] if len(text) < _TAIL else text[-_TAIL:]
        return written


# its repr (Python's "Exception ignored in: <_io.TextIOWrapper name='<stdout>' ...>") reads as python's own
_TrackedText.__name__, _TrackedText.__qualname__, _TrackedText.__module__ = "_io.TextIOWrapper", "TextIOWrapper", "_io"


def keep_std_streams(stdout: bool = True, stderr: bool = True) -> dict[str, _TrackedText]:
    """Swap python's own sys.stdout/sys.stderr (also their ``__stdout__``/``__stderr__``) for tracked ones over the
    same buffers; a stream something else already replaced is left alone. Returns {"stdout"/"stderr": stream}."""
    kept = {}
    for name, wanted in (("stdout", stdout), ("stderr", stderr)):
        stream = getattr(sys, name)
        if not wanted or type(stream) is not io.TextIOWrapper or stream is not getattr(sys, f"__{name}__"):
            continue
        try:
            stream.flush()
            tracked = _TrackedText(
                stream.buffer,
                encoding=stream.encoding,
                errors=stream.errors,
                newline="\n",
                line_buffering=stream.line_buffering,
                write_through=stream.write_through,
            )
            tracked.mode = getattr(stream, "mode", "w")
            stream.detach()
        except (OSError, ValueError, AttributeError):
            continue
        setattr(sys, name, tracked)
        setattr(sys, f"__{name}__", tracked)
        kept[name] = tracked
    return kept


def tail_of(name: str) -> str | None:
    """The end of what the program wrote to sys.<name> (as python made it); None when it is not tracked."""
    stream = getattr(sys, f"__{name}__", None)
    return stream.tail if isinstance(stream, _TrackedText) else None


def _last_error_line() -> str | None:
    lines = [line.strip() for line in (tail_of("stderr") or "").splitlines() if line.strip()]
    return lines[-1][:300] if lines else None
