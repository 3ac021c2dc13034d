"""torch is an optional extra: without a torch gradcheck can audit, a program that imports torch still gets its Warp
side audited, and the report says in one line what torch auditing needs. (The torch side itself is tested in
tests/test_torch_exec.py, which runs where the extra is installed: `make test-torch`.)"""

from __future__ import annotations

import textwrap

from conftest import exec_json

OLD_TORCH = '__version__ = "1.13.1"\n'  # a torch without the global optimizer hooks torch auditing rests on

PROGRAM = textwrap.dedent(
    """
    import torch
    import warp as wp

    @wp.kernel
    def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = x[i] * x[i]

    x = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=2, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(2, dtype=float)})
    print("torch", torch.__version__, "x.grad", x.grad.numpy().tolist())
    """
)


def test_a_torch_too_old_to_audit_is_one_note_and_the_warp_side_is_audited(tmp_path):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text(OLD_TORCH)
    (tmp_path / "prog.py").write_text(PROGRAM)
    proc, scenario = exec_json("prog.py", cwd=tmp_path, env={"WARP_DEVICE": "cpu"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "torch 1.13.1 x.grad [2.0, 4.0]" in proc.stdout
    notes = [n for n in scenario["notes"] if "torch" in n]
    assert notes == [
        "torch 1.13.1: auditing torch's backward and the torch<->Warp bridge needs torch >= 2.1 "
        "(pip install 'gradcheck[torch]'); the Warp side was audited"
    ]
    assert [p["subject"] for p in scenario["params"]] == ["x.grad"]
    assert "Traceback" not in proc.stderr
