"""The steep fit, with or without a gradcheck.audit() of its own in the middle (``--nested``): under exec, or
inside another audit(), the inner audit reports on its window and the outer report stays what it is without it."""

import contextlib
import sys

import steep

import gradcheck


def main(nested: bool):
    steep.fit()
    inner = gradcheck.audit(max_norm=100) if nested else contextlib.nullcontext()
    with inner as audit:
        steep.fit()
    steep.fit()
    return audit


if __name__ == "__main__":
    audit = main("--nested" in sys.argv)
    if audit is not None:
        print("inner:", sorted({(f.check, f.severity.label) for f in audit.findings}))
