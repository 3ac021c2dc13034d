"""Command outputs pasted into README.md and docs/*.md, re-run and compared with what the commands print today.

A pasted output is a ```text block whose first line is ``$ gradcheck ...``: the rest of the block is what that
command prints on stdout (stderr is not pasted). tests/test_readme.py fails when one is stale;

    python tests/readme_outputs.py            # list the stale blocks (exit 1 when there is one)
    python tests/readme_outputs.py --update   # re-run every command and rewrite its block

Outputs are produced as a reader piping the command would see them (no colour, 100 columns, CPU only) and
compared after the parts that change from run to run or machine to machine are normalised: timings, versions in
the report's header line, memory addresses, trailing spaces. Keep the pasted commands few and fast: each one runs
in ``make test``.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
UPDATE = "python tests/readme_outputs.py --update"
# where a pasted command runs on another installation than the project's own .venv: (document, command) -> program
RUNNERS = {
    ("docs/warp-versions.md", "gradcheck run rollout --fault per-output-backward --passes 3"): (
        ".venv-compat/1.5.1/bin/gradcheck"  # made by `make test-compat`
    ),
}
_BLOCK = re.compile(r"^```text\n(\$ (gradcheck[^\n]*))\n(.*?)^```$", re.S | re.M)
_TIMING = re.compile(r"\bin \d+(?:\.\d+)? s\b")
_ADDRESS = re.compile(r"\b0x[0-9a-f]+\b")
_VERSION = re.compile(r"\b(gradcheck|warp|newton) \d[\w.+-]*")


@dataclass(frozen=True)
class Block:
    document: str  # relative to the repository root, e.g. "README.md"
    command: str  # as pasted, e.g. "gradcheck explain accumulation"
    output: str  # the pasted output, without the "$ ..." line

    @property
    def label(self) -> str:
        return f"{self.document}: $ {self.command}"

    @property
    def program(self) -> Path:
        runner = RUNNERS.get((self.document, self.command))
        if runner is not None:
            return ROOT / runner
        sibling = Path(sys.executable).with_name("gradcheck")  # the venv running the tests
        found = shutil.which("gradcheck")
        return sibling if sibling.exists() or found is None else Path(found)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    document = path.relative_to(ROOT).as_posix()
    text = path.read_text(encoding="utf-8")
    return [Block(document, m.group(2), m.group(3)) for m in _BLOCK.finditer(text)]


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks(path)]


def produce(block: Block) -> str:
    """What the command prints on stdout today, as it is pasted: plain, 100 columns, paths relative to the
    repository, no trailing spaces."""
    env = dict(os.environ, COLUMNS="100", NO_COLOR="1", TERM="dumb", CUDA_VISIBLE_DEVICES="")
    env.pop("FORCE_COLOR", None)
    proc = subprocess.run(
        [str(block.program), *shlex.split(block.command)[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if not proc.stdout.strip():
        raise RuntimeError(f"{block.label} printed nothing on stdout (exit {proc.returncode}): {proc.stderr[-2000:]}")
    text = proc.stdout.replace(f"{ROOT}/", "")
    return "".join(line.rstrip() + "\n" for line in text.rstrip("\n").split("\n"))


def normalise(text: str) -> str:
    lines = []
    for line in text.rstrip("\n").split("\n"):
        line = _ADDRESS.sub("0x…", _TIMING.sub("in … s", line.rstrip()))
        if line.startswith("gradcheck report — "):
            line = _VERSION.sub(r"\1 …", line)
        lines.append(line)
    return "\n".join(lines)


def stale(block: Block) -> str | None:
    """None when the pasted output is what the command prints today, else a unified diff of the two."""
    import difflib

    pasted, today = normalise(block.output), normalise(produce(block))
    if pasted == today:
        return None
    diff = difflib.unified_diff(pasted.split("\n"), today.split("\n"), "pasted", "today", lineterm="", n=1)
    return "\n".join(diff)


def update(path: Path) -> list[str]:
    """Re-run every pasted command of ``path`` whose program is installed and rewrite its block; the labels of
    the blocks that changed."""
    text = path.read_text(encoding="utf-8")
    changed = []

    def fresh(match: re.Match) -> str:
        block = Block(path.relative_to(ROOT).as_posix(), match.group(2), match.group(3))
        if not block.program.exists():
            print(f"skipped (no {block.program.relative_to(ROOT)}): {block.label}", file=sys.stderr)
            return match.group(0)
        output = produce(block)
        if normalise(output) != normalise(block.output):
            changed.append(block.label)
        return f"```text\n{match.group(1)}\n{output}```"

    new = _BLOCK.sub(fresh, text)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite every pasted block from the real command")
    args = parser.parse_args(argv)
    if args.update:
        for path in documents():
            for label in update(path):
                print(f"updated {label}")
        return 0
    failed = 0
    for block in all_blocks():
        if not block.program.exists():
            print(f"skipped (no {block.program.relative_to(ROOT)}): {block.label}")
            continue
        diff = stale(block)
        if diff is not None:
            failed += 1
            print(f"stale: {block.label}\n{diff}\n")
    if failed:
        print(f"{failed} stale block(s); `{UPDATE}` rewrites them")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
