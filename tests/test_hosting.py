"""`gradcheck exec` hosts a program exactly as `python` runs it: a battery of small programs, each run once as
`python PROGRAM ARGS` and once as `gradcheck exec --format json --output REPORT PROGRAM ARGS`, in the same folder
(rebuilt in between, so absolute paths are the same), with the same environment and stdin.

What must be equal, case by case (``_compare``):

- stdout, byte for byte (the report goes to --output; cases without --output check that stdout is the program's
  output, then at most one newline gradcheck adds when the program left its last line open, then exactly one report
  that parses to the end);
- stderr, except for what gradcheck may add: at the end, lines starting with ``gradcheck: error: `` (none when the
  program exited 0, else one naming its status), preceded by one newline when the program's stderr did not end
  with one. Nothing else: no banner, no traceback of gradcheck's, no warning;
- the exit status, mapped: python 0 is exec 0 (a clean program), python N > 0 is exec 3 with "status N" in the
  report, death by SIGINT (a KeyboardInterrupt let out) is 130, by SIGTERM 143;
- every file the program writes;
- and the report exists and parses, naming the program.

Deliberate differences are cases too, stating the difference (KeyboardInterrupt: gradcheck prints no traceback for
what it takes as the user's Ctrl-C; SIGTERM: gradcheck's handler gives a report). Cases run in parallel threads
(each a pair of subprocesses with a timeout) when the module starts, then each test compares its own pair.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from conftest import default_sigint

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="fds, signals and fork as on Linux")

GRADCHECK = Path(sys.executable).with_name("gradcheck")
LAUNCH = [str(GRADCHECK)] if GRADCHECK.exists() else [sys.executable, "-m", "gradcheck"]
TIMEOUT = 120
GC_LINE = b"gradcheck: error: "

# -- the programs -------------------------------------------------------------------------------------------

SHOW_MAIN = """
import os, sys, __main__
print("argv", sys.argv)
print("orig_argv", sys.orig_argv)
print("path", sys.path)
print("file", __file__, os.path.isabs(__file__))
print("name", __name__, "package", repr(__package__))
print("spec", getattr(__spec__, "name", None), getattr(__spec__, "origin", None))
print("loader", type(__loader__).__name__, getattr(__loader__, "name", None))
print("cached", __main__.__dict__.get("__cached__", "absent"))
print("builtins", type(__builtins__).__name__, __builtins__ is __import__("builtins"))
print("keys", sorted(k for k in vars(__main__) if k.startswith("__")))
print("main is me", sys.modules["__main__"] is __main__, __main__.__dict__ is globals())
"""

WARP_LOOP = """
import os, time
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # no banner, no module-load lines (wp.config.quiet before 1.19)
wp.set_device("cpu")  # a forked child cannot use the parent's CUDA context: on a GPU machine too, the CPU

@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(y, 0, x[i] * x[i])

x = wp.array([1.0, 2.0, 3.0], dtype=float, requires_grad=True)
y = wp.zeros(1, dtype=float, requires_grad=True)
tape = wp.Tape()
started, steps = time.monotonic(), 0
while time.monotonic() - started < 1.6 or steps < 3:
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    tape.backward(y)
    tape.zero()
    y.zero_()
    steps += 1
print("steps done", steps > 2, flush=True)
os._exit(0)
"""


WARP_FORK = """
import os, sys
import warp as wp

wp.config.log_level = wp.LOG_WARNING  # no banner, no module-load lines (wp.config.quiet before 1.19)

@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(y, 0, x[i] * x[i])

x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)

def step():
    y = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=2, inputs=[x], outputs=[y])
    tape.backward(y)
    grad = x.grad.numpy().tolist()
    tape.zero()
    return grad

print("parent", step(), flush=True)
pid = os.fork()
if pid == 0:
    print("child", step(), step(), flush=True)
    sys.exit(0)
_, status = os.waitpid(pid, 0)
print("child status", os.waitstatus_to_exitcode(status))
print("parent", step())
"""


@dataclass(frozen=True)
class Case:
    name: str
    files: dict[str, str]  # path under the program's folder → source
    run: tuple[str, ...]  # what follows `python`
    expect: bytes = b""  # python's stdout must contain it: the case runs what it says it runs
    stdin: bytes = b""
    env: dict = field(default_factory=dict)  # a value None removes the variable
    gc_args: tuple[str, ...] = ()  # gradcheck options before the program (default: --output REPORT)
    report: str = "file"  # "file" (--output REPORT), "stdout" (the report after the program's output), "none"
    stdout: str = "pipe"  # "pipe", "file" (a regular file), "closed" (fd 1 closed at start), "broken" (reader gone)
    merge: bool = False  # stderr into stdout's pipe (2>&1)
    exec_rc: int | None = None  # exec's exit code when it is not the mapping of python's
    runs: bool = True  # False: gradcheck refuses before the program runs
    known: str | None = None  # a known difference outside hosting: the case is a strict xfail until it is fixed


def _case(name: str, source: str, *args: str, **kw) -> Case:
    return Case(name, {"prog.py": source}, ("prog.py", *args), **kw)


def _exits(code: str, name: str | None = None) -> Case:
    source = f"import sys\nprint('before exit')\nsys.exit({code})\n"
    return _case(f"sys-exit-{name or code}", source, expect=b"before exit")


MODULES = {
    "mod.py": SHOW_MAIN,
    "pkg/__init__.py": "",
    "pkg/helper.py": "VALUE = 'helped'\n",
    "pkg/__main__.py": SHOW_MAIN + "from . import helper\nprint('relative', helper.VALUE)\n",
    "pkg/sub.py": SHOW_MAIN + "from .helper import VALUE\nprint('relative', VALUE)\n",
}

CASES = [
    _case(
        "argv-and-programs-own-flags",
        SHOW_MAIN,
        "a",
        "b c",
        "--output",
        "x.json",
        "--format",
        "y",
        "-m",
        "z",
        expect=b"'--output', 'x.json', '--format', 'y', '-m', 'z'",
    ),
    Case("argv0-as-typed", {"prog.py": SHOW_MAIN}, ("./prog.py", "1"), expect=b"argv ['./prog.py', '1']"),
    Case("sys-path0-script-folder", {"sub/prog.py": SHOW_MAIN}, ("sub/prog.py",), expect=b"/sub'"),
    Case(
        "sys-path0-through-a-link",
        {"real/prog.py": SHOW_MAIN, "links/link.py": "@link:../real/prog.py"},
        ("links/link.py",),
        expect=b"/real'",
    ),
    Case("module-in-cwd", MODULES, ("-m", "mod", "x"), expect=b"spec mod "),
    Case("package-main-relative-import", MODULES, ("-m", "pkg", "y"), expect=b"relative helped"),
    Case("submodule-of-package", MODULES, ("-m", "pkg.sub"), expect=b"name __main__ package 'pkg'"),
    Case("folder-with-main", {"app/__main__.py": SHOW_MAIN}, ("app", "z"), expect=b"argv ['app', 'z']"),
    Case("zip-with-main", {"app.zip": "@zip:" + SHOW_MAIN}, ("app.zip", "z"), expect=b"argv ['app.zip', 'z']"),
    Case("no-such-module", {}, ("-m", "no_such_module_here"), report="file"),
    Case(
        "module-raises",
        {"mod.py": "print('mod ran')\ndef f():\n    raise LookupError('in a module')\nf()\n"},
        ("-m", "mod"),
        expect=b"mod ran",
    ),
    _case(
        "absolute-file-after-chdir",
        "import os\nos.chdir('/')\nprint(__file__, os.path.exists(__file__))\n",
        expect=b"prog.py True",
    ),
    Case(
        "main-guard-and-imported-name",
        {
            "prog.py": "import helper\nif __name__ == '__main__':\n    print('main', helper.NAME)\n",
            "helper.py": "NAME = __name__\n",
        },
        ("prog.py",),
        expect=b"main helper",
    ),
    _case(
        "stdin",
        "import sys\ndata = sys.stdin.read()\nprint(data.upper(), end='')\n",
        stdin=b"hello\nworld\n",
        expect=b"HELLO\nWORLD\n",
    ),
    _case(
        "environment",
        "import json, os\nprint(json.dumps(dict(os.environ), sort_keys=True))\n",
        env={"HOSTING_MARK": "1"},
        expect=b'"HOSTING_MARK": "1"',
    ),
    _case("cwd", "import os\nprint(os.getcwd())\n", expect=b"/work"),
    _case(
        "uncaught-exception-traceback",
        "import sys\nprint('out')\ndef inner():\n    raise ValueError('boom')\ndef outer():\n    inner()\nouter()\n",
        expect=b"out",
    ),
    _case("chained-exception", "try:\n    1 / 0\nexcept ZeroDivisionError as e:\n    raise KeyError('k') from e\n"),
    _case("syntax-error", "print('never')\ndef (:\n"),
    _case(
        "custom-excepthook",
        "import sys\ndef hook(t, v, tb):\n    print('custom hook:', t.__name__, v, file=sys.stderr)\n"
        "sys.excepthook = hook\nraise RuntimeError('mine')\n",
    ),
    *[_exits(code) for code in ("0", "1", "3", "True", "False", "None", "256")],
    _exits("'a message'", "message"),
    _case(
        "system-exit-from-nested-function",
        "def deep(n):\n    if n == 0:\n        raise SystemExit(4)\n    deep(n - 1)\ndeep(5)\n",
    ),
    _case("keyboard-interrupt-raised", "print('working', flush=True)\nraise KeyboardInterrupt\n", expect=b"working"),
    _case(
        "signal-handlers",
        "import signal\nfor s in sorted(signal.valid_signals()):\n"
        "    if s != signal.SIGTERM and s not in (signal.SIGKILL, signal.SIGSTOP):\n"
        "        print(int(s), signal.getsignal(s))\n",
        expect=b"2 <built-in function default_int_handler>",
    ),
    _case(
        "own-sigint-handler",
        "import os, signal\nsignal.signal(signal.SIGINT, lambda s, f: print('handled', s))\n"
        "os.kill(os.getpid(), signal.SIGINT)\nprint('went on')\n",
        expect=b"handled 2\nwent on",
    ),
    _case(
        "sigterm-to-itself",
        "import os, signal\nprint('ran', flush=True)\nos.kill(os.getpid(), signal.SIGTERM)\n"
        "import time\ntime.sleep(5)\n",
        expect=b"ran",
    ),
    _case(
        "atexit-runs-once",
        "import atexit, sys\natexit.register(lambda: print('atexit ran'))\n"
        "atexit.register(lambda: print('atexit err', file=sys.stderr))\nprint('main')\n",
        expect=b"main\natexit ran\n",
    ),
    _case(
        "atexit-output-before-the-report",
        "import atexit\natexit.register(lambda: print('atexit ran'))\n",
        report="stdout",
        expect=b"atexit ran\n",
    ),
    _case("print-without-newline", "print('partial', end='')\n", report="stdout", expect=b"partial"),
    _case("no-newline-to-a-file", "print('partial', end='')\n", report="stdout", stdout="file", expect=b"partial"),
    _case(
        "native-write-to-a-file",
        "import os\nos.write(1, b'native')\n",
        report="stdout",
        stdout="file",
        expect=b"native",
    ),
    _case(
        "replaced-stdout",
        "import io, sys\nsys.stdout = io.StringIO()\nprint('hidden')\nsys.__stdout__.write('shown\\n')\n",
        report="stdout",
        expect=b"shown\n",
    ),
    _case(
        "closed-sys-stdout",
        "import sys\nprint('before close')\nsys.stdout.close()\n",
        report="stdout",
        expect=b"before close\n",
    ),
    _case(
        "closed-fd-1",
        "import os\nprint('before close', flush=True)\nos.close(1)\n",
        report="stdout",
        expect=b"before close\n",
    ),
    _case(
        "stdout-closed-at-start",
        "open('ran', 'w').write('yes')\nprint('lost')\n",
        stdout="closed",
        report="none",
        gc_args=(),
        exec_rc=2,
        runs=False,
    ),
    _case("stdout-closed-at-start-with-output", "open('ran', 'w').write('yes')\nprint('lost')\n", stdout="closed"),
    _case(
        "reader-gone-epipe",
        "import sys\nsys.stdin.readline()\nfor i in range(200000):\n    print(i)\n",
        stdout="broken",
        report="none",
        gc_args=(),
        exec_rc=2,
    ),
    _case(
        "os-fork-child-returns",
        "import os, sys\nprint('parent before', flush=True)\npid = os.fork()\nif pid == 0:\n"
        "    print('child', flush=True)\n    sys.exit(5)\n_, status = os.waitpid(pid, 0)\n"
        "print('child status', os.waitstatus_to_exitcode(status))\n",
        report="stdout",
        expect=b"child status 5",
    ),
    _case(
        "os-fork-child-ends-normally",
        "import os\npid = os.fork()\nif pid == 0:\n    open('child-ran', 'w').write('1')\nelse:\n"
        "    _, status = os.waitpid(pid, 0)\n    print('child status', os.waitstatus_to_exitcode(status))\n",
        report="stdout",
        expect=b"child status 0",
    ),
    _case(
        "multiprocessing-spawn-pool",
        "import multiprocessing as mp\ndef square(x):\n    return x * x\nif __name__ == '__main__':\n"
        "    with mp.get_context('spawn').Pool(2) as pool:\n        print(pool.map(square, range(6)))\n",
        expect=b"[0, 1, 4, 9, 16, 25]",
    ),
    _case(
        "multiprocessing-fork",
        "import multiprocessing as mp, sys\ndef work(q):\n    q.put(sys.argv[1:])\n    sys.exit(7)\n"
        "if __name__ == '__main__':\n    ctx = mp.get_context('fork')\n    q = ctx.Queue()\n"
        "    p = ctx.Process(target=work, args=(q,))\n    p.start()\n    print(q.get())\n    p.join()\n"
        "    print('exitcode', p.exitcode)\n",
        "arg",
        report="stdout",
        expect=b"['arg']\nexitcode 7",
    ),
    _case(  # the thread prints once main's last line has run (an event, not a head start in time)
        "non-daemon-thread-outlives-main",
        "import threading\nmain_done = threading.Event()\n"
        "def late():\n    main_done.wait(60)\n    print('thread done')\n"
        "threading.Thread(target=late).start()\nprint('main done')\nmain_done.set()\n",
        expect=b"main done\nthread done\n",
    ),
    _case(
        "executor-never-shut-down",
        "from concurrent.futures import ThreadPoolExecutor\npool = ThreadPoolExecutor(2)\n"
        "print(pool.submit(pow, 2, 10).result())\n",
        expect=b"1024",
    ),
    _case("warnings", "import warnings\nwarnings.warn('careful')\nwarnings.warn('old', DeprecationWarning)\n"),
    _case("logging", "import logging\nlogging.basicConfig(level=logging.INFO)\nlogging.info('logged')\n"),
    _case(
        "pickle-a-function-of-main",
        "import pickle, sys\ndef f():\n    return 42\nprint(pickle.loads(pickle.dumps(f))(), "
        "sys.modules['__main__'].f is f)\n",
        expect=b"42 True",
    ),
    _case("unicode", "import sys\nprint('héllo ✓ 日本 🚀')\nprint('ü', file=sys.stderr)\n", expect="✓ 日本".encode()),
    _case("large-output", "import sys\nfor _ in range(1024):\n    sys.stdout.write('x' * 1023 + '\\n')\n"),
    _case(
        "stderr-interleaving-buffered",
        "import sys\nprint('out 1')\nprint('err 1', file=sys.stderr)\nprint('out 2')\nsys.stderr.write('err 2\\n')\n",
        merge=True,
        env={"PYTHONUNBUFFERED": None},
        expect=b"out 1",
    ),
    _case(
        "stderr-interleaving-unbuffered",
        "import sys\nprint('out 1')\nprint('err 1', file=sys.stderr)\nprint('out 2')\nsys.stderr.write('err 2\\n')\n",
        merge=True,
        env={"PYTHONUNBUFFERED": "1"},
        expect=b"out 1\nerr 1\nout 2\nerr 2",
    ),
    _case("stderr-line-left-open", "import sys\nsys.stderr.write('no newline')\nsys.exit(1)\n"),
    _case("never-imports-warp", "print('plain program')\n", expect=b"plain program\n"),
    _case(
        "warp-and-numpy-not-imported-for-it",
        "import sys\nprint('warp' in sys.modules, 'numpy' in sys.modules)\nimport warp\nprint(warp.__loader__.name)\n",
        expect=b"False False\nwarp\n",
    ),
    _case(
        "forgets-wp-init",
        "import warp as wp\nprint('before warp', flush=True)\na = wp.array([1.0, 2.0], dtype=float)\n"
        "print(a.numpy().tolist())\n",
        expect=b"[1.0, 2.0]",
    ),
    _case(
        "quiet-warp-before-init",
        "import warp as wp\nwp.config.log_level = wp.LOG_WARNING\nwp.init()\nprint('quiet', wp.is_cpu_available())\n",
        expect=b"quiet True",
    ),
    _case(
        "exit-inside-a-tape",
        "import sys\nimport warp as wp\nwp.config.log_level = wp.LOG_WARNING\nx = wp.zeros(3, requires_grad=True)\n"
        "with wp.Tape():\n    print('recording', flush=True)\n    sys.exit(2)\n",
        expect=b"recording",
    ),
    _case("os-exit-leaves-the-last-refresh", WARP_LOOP, expect=b"steps done True"),
    _case(
        "warp-error-through-gradcheck-hooks",
        WARP_FORK.split("x = wp.array")[0]
        + "x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)\nwith wp.Tape():\n"
        "    wp.launch(square, dim=2, inputs=[x], outputs=[])\n",
    ),
    _case(
        "warp-left-chatty",
        WARP_FORK.replace("wp.config.log_level = wp.LOG_WARNING", "").split("pid = os.fork()")[0],
        expect=b"parent [2.0, 4.0]",
    ),
    _case(
        "fork-of-a-warp-program",
        WARP_FORK,
        report="stdout",
        # a child forked after CUDA is initialised cannot use it (python fails the same way): no GPU for this one
        env={"CUDA_VISIBLE_DEVICES": ""},
        expect=b"child [2.0, 4.0] [2.0, 4.0]\nchild status 0",
    ),
    _case(
        "output-dev-stdout",
        "import sys\nprint('program first')\nprint('err', file=sys.stderr)\n",
        gc_args=("--output", "/dev/stdout"),
        report="stdout",
        env={"PYTHONUNBUFFERED": None},
        expect=b"program first\n",
    ),
    _case(
        "output-dev-full", "print('ran')\n", gc_args=("--output", "/dev/full"), report="none", exec_rc=2, expect=b"ran"
    ),
    _case(
        "output-names-the-script",
        "open('ran', 'w').write('yes')\n",
        gc_args=("--output", "prog.py"),
        report="none",
        exec_rc=2,
        runs=False,
    ),
    Case(
        "output-names-the-module",
        MODULES,
        ("-m", "mod"),
        gc_args=("--output", "mod.py"),
        report="none",
        exec_rc=2,
        runs=False,
    ),
    Case(
        "output-names-the-package-main",
        MODULES,
        ("-m", "pkg"),
        gc_args=("--output", "pkg/__main__.py"),
        report="none",
        exec_rc=2,
        runs=False,
    ),
    _case(
        "chdir-then-relative-output",
        "import os\nos.chdir('/')\nprint('moved', os.getcwd())\n",
        gc_args=("--output", "../relative-report.json"),
        expect=b"moved /",
    ),
]


# -- running a case both ways ---------------------------------------------------------------------------------


@dataclass
class Ran:
    returncode: int
    stdout: bytes
    stderr: bytes
    files: dict[str, bytes]
    timed_out: bool = False  # killed after TIMEOUT seconds


def _write_program(work: Path, files: dict[str, str]) -> None:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    for relative, source in files.items():
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if source.startswith("@link:"):
            path.symlink_to(source.removeprefix("@link:"))
        elif source.startswith("@zip:"):  # a zip holding __main__.py
            import zipfile

            # a fixed timestamp: the python and gradcheck runs build it seconds apart, and their files are compared
            entry = zipfile.ZipInfo("__main__.py", date_time=(2020, 1, 1, 0, 0, 0))
            with zipfile.ZipFile(path, "w") as archive:
                archive.writestr(entry, textwrap.dedent(source.removeprefix("@zip:")))
        else:
            path.write_text(textwrap.dedent(source), encoding="utf-8")


def _files(work: Path) -> dict[str, bytes]:
    found = {}
    for path in sorted(work.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            found[str(path.relative_to(work))] = path.read_bytes()
    return found


def _environment(case: Case) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "NO_COLOR")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    for key, value in case.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def _child_setup(close_stdout: bool):
    """The child as a terminal starts it: SIGINT at its default (a background job's children inherit it ignored,
    and python then keeps it ignored: the signal-handlers case would differ); fd 1 closed for "closed"."""

    def setup():
        default_sigint()
        if close_stdout:
            os.close(1)

    return setup


def _launch(command: list[str], case: Case, work: Path, out_file: Path) -> Ran:
    stdout = subprocess.PIPE
    if case.stdout == "file":
        stdout = open(out_file, "wb")  # noqa: SIM115 - closed below
    elif case.stdout == "closed":
        stdout = None
    stderr = subprocess.STDOUT if case.merge else subprocess.PIPE
    proc = subprocess.Popen(
        command,
        cwd=work,
        env=_environment(case),
        stdin=subprocess.PIPE,
        stdout=stdout,
        stderr=stderr,
        preexec_fn=_child_setup(case.stdout == "closed"),
    )
    try:
        if case.stdout == "broken":  # the reader goes away before the program writes: its prints meet EPIPE
            proc.stdout.close()
            out, err = b"", proc.communicate(case.stdin or b"go\n", timeout=TIMEOUT)[1]
        else:
            out, err = proc.communicate(case.stdin, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:  # this case fails (Ran.timed_out); the others still run and compare
        proc.kill()
        out, err = proc.communicate(timeout=TIMEOUT)
        return Ran(proc.returncode, out or b"", err or b"", {}, timed_out=True)
    finally:
        if case.stdout == "file":
            stdout.close()
    if case.stdout == "file":
        out = out_file.read_bytes()
    return Ran(proc.returncode, out or b"", err or b"", _files(work))


def _run_both(case: Case, root: Path) -> tuple[Ran, Ran, Path]:
    work, report = root / "work", root / "report.json"
    _write_program(work, case.files)
    python = _launch([sys.executable, *case.run], case, work, root / "python.out")
    _write_program(work, case.files)
    options = case.gc_args if case.gc_args or case.report != "file" else ("--output", str(report))
    gradcheck = _launch([*LAUNCH, "exec", "--format", "json", *options, *case.run], case, work, root / "exec.out")
    if "--output" in options:
        report = (work / options[options.index("--output") + 1]).resolve()
    return python, gradcheck, report


@pytest.fixture(scope="module")
def outcomes(request, tmp_path_factory):
    """Every selected case, both ways, four at a time (most are a python startup and gradcheck's)."""
    wanted = {
        item.callspec.params["case"].name
        for item in request.session.items
        if item.module is request.module and hasattr(item, "callspec") and "case" in item.callspec.params
    }
    base = tmp_path_factory.mktemp("hosting")
    selected = [case for case in CASES if case.name in wanted]
    with ThreadPoolExecutor(max_workers=4) as pool:
        ran = pool.map(lambda case: _run_both(case, base / case.name), selected)
        return dict(zip([c.name for c in selected], ran))


# -- what must be equal ---------------------------------------------------------------------------------------


def _normalised(data: bytes) -> bytes:
    """The program's own Warp module-load lines carry timings and whether the kernel cache was warm (only the
    program's: a line for a module of gradcheck's is a difference)."""
    return re.sub(rb"Module __main__ [^\n]* load on device [^\n]*\n", b"Module __main__ loaded\n", data)


def split_gradcheck(stderr: bytes, python_stderr: bytes) -> tuple[bytes, list[bytes]]:
    """(the program's part, gradcheck's lines): gradcheck adds only trailing ``gradcheck: error:`` lines, after
    one newline of its own when the program's stderr ended without one."""
    lines = stderr.splitlines(keepends=True)
    added = []
    while lines and lines[-1].startswith(GC_LINE):
        added.insert(0, lines.pop())
    program = b"".join(lines)
    if added and python_stderr and not python_stderr.endswith(b"\n") and program.endswith(b"\n"):
        program = program[:-1]
    return program, added


def expected_exec_rc(python_rc: int) -> int:
    if python_rc == -signal.SIGINT:
        return 130
    if python_rc == -signal.SIGTERM:
        return 143
    return 0 if python_rc == 0 else 3


def _report_after_output(stdout: bytes, program: bytes) -> dict:
    """Exactly one report, after everything the program wrote, on its own line, and nothing after it."""
    assert stdout.startswith(program), (stdout[:300], program[:300])
    rest = stdout[len(program) :]
    if program and not program.endswith(b"\n"):
        assert rest.startswith(b"\n"), rest[:100]  # the report starts on a line of its own
        rest = rest[1:]
    assert rest.startswith(b"{\n"), rest[:200]
    return json.loads(rest)  # one JSON object to the end: no duplicate, nothing glued after it


def _compare(case: Case, python: Ran, gradcheck: Ran, report_path: Path) -> dict | None:
    """The generic comparison; returns the report (None when there is none by design)."""
    for ran, how in ((python, "python"), (gradcheck, "gradcheck exec")):
        assert not ran.timed_out, f"under {how} the case ran past {TIMEOUT} s and was killed: {ran.stderr[-2000:]}"
    assert case.expect in python.stdout, (case.expect, python.stdout[-500:], python.stderr[-2000:])
    assert gradcheck.returncode == (
        case.exec_rc if case.exec_rc is not None else expected_exec_rc(python.returncode)
    ), (python.returncode, gradcheck.returncode, gradcheck.stderr[-3000:])
    if case.runs:
        assert gradcheck.files == python.files
    else:  # refused before it ran: its own files as they were, nothing written
        assert gradcheck.files == {k: textwrap.dedent(v).encode() for k, v in case.files.items()}
    program_err, added = split_gradcheck(gradcheck.stderr, python.stderr)
    report = None
    if case.report == "stdout":
        report = _report_after_output(_normalised(gradcheck.stdout), _normalised(python.stdout))
    elif case.report == "file":
        assert _normalised(gradcheck.stdout) == _normalised(python.stdout)
        report = json.loads(report_path.read_text(encoding="utf-8"))
    if case.name in DIFFERENT_STDERR:
        return report
    assert _normalised(program_err) == _normalised(python.stderr), (program_err[-2000:], python.stderr[-2000:])
    if python.returncode == 0 and case.exec_rc is None:
        assert added == [], added
    elif python.returncode > 0 and case.exec_rc is None:
        assert len(added) == 1 and f"the program exited with status {python.returncode}".encode() in added[0], added
    if report is not None:
        (scenario,) = report["scenarios"]
        assert scenario["unit"] == "backward" and scenario["name"] == _program_name(case)
        if python.returncode > 0:
            assert f"status {python.returncode}" in scenario["error"]
    return report


def _program_name(case: Case) -> str:
    if case.run[0] == "-m":
        return " ".join(case.run[1:3]) if len(case.run) > 2 and not case.run[2].startswith("-") else case.run[1]
    return case.run[0]


DIFFERENT_STDERR = {"keyboard-interrupt-raised", "sigterm-to-itself"}

# Cases the fast lane leaves to the long one (~0.5 s of CPU each, most of it gradcheck's own start): each is a
# variant of a case the fast lane runs (another path form, another stream replaced or closed, another way to fork or
# to end, another Warp print), so a change that breaks hosting shows in the fast lane first.
LONG_LANE = {
    "argv0-as-typed", "sys-path0-through-a-link", "submodule-of-package", "zip-with-main", "module-raises", "cwd",
    "chained-exception", "system-exit-from-nested-function", "atexit-output-before-the-report",
    "no-newline-to-a-file", "native-write-to-a-file", "replaced-stdout", "closed-sys-stdout",
    "stdout-closed-at-start-with-output", "os-fork-child-ends-normally", "multiprocessing-fork",
    "executor-never-shut-down", "logging", "pickle-a-function-of-main", "large-output",
    "stderr-interleaving-unbuffered", "stderr-line-left-open", "warp-and-numpy-not-imported-for-it",
    "quiet-warp-before-init", "output-dev-full", "output-names-the-module", "output-names-the-package-main",
    "sys-exit-3", "sys-exit-True", "sys-exit-None", "sys-exit-256",
}  # fmt: skip


@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            c,
            marks=[
                *([pytest.mark.xfail(strict=True, raises=AssertionError, reason=c.known)] if c.known else []),
                *([pytest.mark.slow] if c.name in LONG_LANE else []),
            ],
        )
        for c in CASES
    ],
    ids=[c.name for c in CASES],
)
def test_a_program_runs_under_exec_as_under_python(case, outcomes):
    python, gradcheck, report_path = outcomes[case.name]
    report = _compare(case, python, gradcheck, report_path)
    SPECIFIC.get(case.name, lambda *a: None)(python, gradcheck, report, report_path)


# -- what each case adds to the generic comparison -------------------------------------------------------------


def _lines(ran: Ran) -> dict[str, str]:
    return {line.split(" ", 1)[0]: line.partition(" ")[2] for line in ran.stdout.decode().splitlines()}


def _show_main(python: Ran, gradcheck: Ran, *_):
    """Concrete values python gives, which exec reproduced byte for byte: argv, path[0] replaced (not inserted
    before gradcheck's console-script folder), absolute __file__, the loader, builtins the module."""
    seen = _lines(python)
    assert "/bin'" not in seen["path"].split(",")[0] and str(GRADCHECK.parent) not in seen["path"]
    assert seen["file"].endswith(" True") and seen["builtins"] == "module True" and seen["main"] == "is me True True"
    assert _lines(gradcheck) == seen


def _exit_status(code: int, message: bytes | None = None):
    def check(python: Ran, gradcheck: Ran, report, _path):
        assert python.returncode == code
        if message is not None:
            assert python.stderr == message and gradcheck.stderr.startswith(message)

    return check


def _keyboard_interrupt(python: Ran, gradcheck: Ran, report, _path):
    """The one deliberate stderr difference: a KeyboardInterrupt that escapes the program is taken for the user's
    Ctrl-C (gradcheck cannot tell the two apart), so no traceback: the report and one line, exit 130."""
    assert python.returncode == -signal.SIGINT and python.stderr.endswith(b"KeyboardInterrupt\n")
    assert gradcheck.stderr == b"gradcheck: error: interrupted by Ctrl-C (SIGINT)\n"
    assert report["error"].startswith("interrupted by Ctrl-C")


def _sigterm(python: Ran, gradcheck: Ran, report, _path):
    """SIGTERM keeps gradcheck's handler (documented): python dies of it, exec reports what ran, exit 143."""
    assert python.returncode == -signal.SIGTERM and python.stderr == b""
    assert gradcheck.stderr == b"gradcheck: error: interrupted by SIGTERM\n" and report["error"].startswith("interr")


def _signals(python: Ran, gradcheck: Ran, *_):
    assert b"2 <built-in function default_int_handler>" in gradcheck.stdout  # Python's own SIGINT handler


def _traceback(python: Ran, gradcheck: Ran, report, _path):
    assert python.stderr.startswith(b"Traceback (most recent call last):\n") and b"gradcheck" not in python.stderr
    assert b"ValueError: boom" in gradcheck.stderr and b"hosting.py" not in gradcheck.stderr


def _no_module(python: Ran, gradcheck: Ran, report, _path):
    assert python.stderr == f"{sys.executable}: No module named no_such_module_here\n".encode()
    assert report["scenarios"][0]["error"].endswith("No module named no_such_module_here")


def _frozen_runpy(python: Ran, gradcheck: Ran, *_):
    """python -m shows runpy's frames first; so does exec (the rest of the comparison: byte for byte)."""
    assert python.stderr.count(b'File "<frozen runpy>"') == 2 and b"LookupError: in a module" in python.stderr


def _warp_error(python: Ran, gradcheck: Ran, *_):
    """Warp's own error, raised through the observer's launch hook: python's traceback, without gradcheck's frames."""
    assert b"passed 1 arguments but kernel requires 2" in python.stderr and b"hooks.py" not in gradcheck.stderr


def _syntax_error(python: Ran, gradcheck: Ran, *_):
    assert python.stderr.startswith(b'  File "') and b"SyntaxError" in gradcheck.stderr  # no Traceback header


def _custom_hook(python: Ran, gradcheck: Ran, *_):
    assert python.stderr == b"custom hook: RuntimeError mine\n"


def _one_report(python: Ran, gradcheck: Ran, report, _path):
    assert gradcheck.stdout.count(b'"schema"') == 1  # the forked child never reported


def _child_ran(python: Ran, gradcheck: Ran, *_):
    assert gradcheck.files["child-ran"] == b"1"
    _one_report(python, gradcheck, None, None)


def _closed_at_start(python: Ran, gradcheck: Ran, report, _path):
    """Nowhere for the report: refused before the program runs, one line naming stdout."""
    assert python.returncode == 0 and python.files["ran"] == b"yes" and "ran" not in gradcheck.files
    assert (
        gradcheck.stderr
        == b"gradcheck: error: stdout is closed, so the report could not be written; give --output FILE\n"
    )


def _closed_with_output(python: Ran, gradcheck: Ran, report, _path):
    assert gradcheck.files["ran"] == b"yes" and report["exit_code"] == 0


def _epipe(python: Ran, gradcheck: Ran, *_):
    """The program meets the broken pipe as under python (same traceback); the report cannot follow: one line."""
    assert python.returncode == 1 and b"BrokenPipeError" in python.stderr
    program_err, added = split_gradcheck(gradcheck.stderr, python.stderr)
    assert program_err == python.stderr
    assert (
        added[-1] == b"gradcheck: error: the report could not be written to stdout (Broken pipe); give --output FILE\n"
    )


def _dev_full(python: Ran, gradcheck: Ran, *_):
    assert gradcheck.stderr == b"gradcheck: error: cannot write --output '/dev/full': No space left on device\n"


def _refused(python: Ran, gradcheck: Ran, *_):
    """Refused before anything runs: exit 2, one line, the input untouched (--format json: the error as JSON)."""
    assert gradcheck.stderr.count(b"\n") == 1 and b"is one of this run's inputs" in gradcheck.stderr
    assert json.loads(gradcheck.stdout)["error"].endswith("write the report to another file")
    assert "ran" not in gradcheck.files


def _refused_module(python: Ran, gradcheck: Ran, *_):
    assert b"is one of this run's inputs" in gradcheck.stderr and gradcheck.stderr.count(b"\n") == 1
    assert b"argv" in python.stdout and b"argv" not in gradcheck.stdout  # the module never ran


def _relative_output(python: Ran, gradcheck: Ran, report, path):
    assert path.name == "relative-report.json" and path.parent.name != "" and path.exists()
    assert not Path("/relative-report.json").exists()


def _refreshed(python: Ran, gradcheck: Ran, report, _path):
    """os._exit skips gradcheck's end: the report on disk is the last refresh, valid, with the backwards so far."""
    (scenario,) = report["scenarios"]
    assert scenario["passes"] >= 1 and any("interim report" in note for note in scenario["notes"])


def _parent_backwards_only(python: Ran, gradcheck: Ran, report, _path):
    """The child's backwards ran (same gradients as under python) but are not audited: the observer stood aside
    in it, and the parent's report counts its own two."""
    assert report["scenarios"][0]["passes"] == 2 and gradcheck.stdout.count(b'"schema"') == 1


def _forgot_init(python: Ran, gradcheck: Ran, *_):
    """Warp initialises where the program first needs it, under gradcheck as under python: the banner follows."""
    assert python.stdout.index(b"before warp") < python.stdout.index(b"Warp ")


def _no_banner(python: Ran, gradcheck: Ran, *_):
    assert gradcheck.stdout == b"plain program\n" and gradcheck.stderr == b""


def _warnings(python: Ran, gradcheck: Ran, *_):
    assert b"prog.py:2: UserWarning: careful" in python.stderr and b"DeprecationWarning: old" in python.stderr


def _logging(python: Ran, gradcheck: Ran, *_):
    assert python.stderr == b"INFO:root:logged\n"


def _open_stderr_line(python: Ran, gradcheck: Ran, *_):
    assert gradcheck.stderr.startswith(b"no newline\ngradcheck: error: ")


SPECIFIC = {
    "argv-and-programs-own-flags": _show_main,
    "argv0-as-typed": _show_main,
    "sys-path0-script-folder": _show_main,
    "sys-path0-through-a-link": _show_main,
    "module-in-cwd": _show_main,
    "package-main-relative-import": _show_main,
    "submodule-of-package": _show_main,
    "folder-with-main": _show_main,
    "zip-with-main": _show_main,
    "sys-exit-0": _exit_status(0),
    "sys-exit-1": _exit_status(1),
    "sys-exit-3": _exit_status(3),
    "sys-exit-True": _exit_status(1),
    "sys-exit-False": _exit_status(0),
    "sys-exit-None": _exit_status(0),
    "sys-exit-message": _exit_status(1, b"a message\n"),
    "sys-exit-256": _exit_status(0),
    "system-exit-from-nested-function": _exit_status(4),
    "keyboard-interrupt-raised": _keyboard_interrupt,
    "sigterm-to-itself": _sigterm,
    "signal-handlers": _signals,
    "uncaught-exception-traceback": _traceback,
    "no-such-module": _no_module,
    "syntax-error": _syntax_error,
    "warp-error-through-gradcheck-hooks": _warp_error,
    "module-raises": _frozen_runpy,
    "custom-excepthook": _custom_hook,
    "os-fork-child-returns": _one_report,
    "os-fork-child-ends-normally": _child_ran,
    "stdout-closed-at-start": _closed_at_start,
    "stdout-closed-at-start-with-output": _closed_with_output,
    "reader-gone-epipe": _epipe,
    "output-dev-full": _dev_full,
    "output-names-the-script": _refused,
    "output-names-the-module": _refused_module,
    "output-names-the-package-main": _refused_module,
    "chdir-then-relative-output": _relative_output,
    "os-exit-leaves-the-last-refresh": _refreshed,
    "forgets-wp-init": _forgot_init,
    "fork-of-a-warp-program": _parent_backwards_only,
    "never-imports-warp": _no_banner,
    "warnings": _warnings,
    "logging": _logging,
    "stderr-line-left-open": _open_stderr_line,
}


LARGE = 40  # the battery's floor: a case removed by mistake shows here, not as a silently passing suite


def test_the_battery_is_large_and_every_case_checks_something_of_its_own_or_prints_what_it_checks():
    assert len(CASES) >= LARGE and len({c.name for c in CASES}) == len(CASES)
    assert set(SPECIFIC) <= {c.name for c in CASES} and LONG_LANE <= {c.name for c in CASES}
    for case in CASES:
        assert case.name in SPECIFIC or case.expect or case.files, case.name


def test_the_files_of_a_module_in_a_namespace_package_are_found_without_importing(tmp_path, monkeypatch):
    """``-m pkg.sub.mod`` where ``pkg`` has no ``__init__.py`` (a namespace package): the lookup of the files a
    report must not overwrite raised KeyError for every ``-m warp.examples.*`` program (the path finder hands a
    namespace package's folders out only through its parent in sys.modules), so nothing ran."""
    from gradcheck.engine.program_files import program_inputs

    (tmp_path / "space" / "inner").mkdir(parents=True)
    (tmp_path / "space" / "inner" / "__init__.py").write_text("")
    (tmp_path / "space" / "inner" / "job.py").write_text("print('job')\n")
    monkeypatch.chdir(tmp_path)
    assert program_inputs("space.inner.job", True) == [
        tmp_path / "space" / "inner" / "__init__.py",
        tmp_path / "space" / "inner" / "job.py",
    ]
    assert program_inputs("space.nothing", True) == []
