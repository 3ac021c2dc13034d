"""``torch.autograd.grad`` audited at the torch<->Warp bridge (a part of pytorch.watch.TorchWatch).

``torch.autograd.grad`` fills no ``.grad``: it returns the gradients. Programs that check their Warp Function with
``torch.autograd.gradcheck`` call it dozens of times with grad_outputs of their own (one-hot rows of a Jacobian),
and functional or higher-order training code calls it in place of ``loss.backward()``. Each call is an audited pass
of the bridge (pytorch.bridge) over its graph, as a torch backward is: a custom Function's backward that doubles a
gradient, a tape and arrays reused without ``tape.zero()`` across calls (the second call returns the sum of both),
a ``grad_output`` written in place. And what only this call has: the ``grad_outputs`` the program passed is the
program's own tensor; a backward that zeroes or changes it (Warp zeroes ``y.grad = wp.from_torch(grad_output)``
after reading it: warp#1732) corrupts what the program uses next (gradcheck's next Jacobian row is zeros), an
error naming the tensor and the Functions the call ran.

A call is not an iteration of the ``.grad`` evidence (statistics, leftovers, reads of a rewritten ``.grad``):
those belong to the backwards around it (a gradient penalty's ``create_graph=True`` call is part of the forward
of the ``loss.backward()`` that follows). Calls are sampled with the backwards' cadence, counted on their own.
"""

from __future__ import annotations

from gradcheck.model.sites import caller_site, short
from gradcheck.model.trace import BridgeIssue


class GradCalls:
    def __init__(self, watch, graph_limit: int) -> None:
        self._watch = watch
        self._limit = graph_limit  # nodes of a call's graph walked (the watch's own bound)
        self.calls = 0  # torch.autograd.grad calls made by the audited thread, outside any backward
        self.audited = 0

    def on_grad(self, outputs, grad_outputs, run):
        """One ``torch.autograd.grad(outputs, inputs, grad_outputs, ...)`` call (``run`` makes it)."""
        watch = self._watch
        bridge = watch.bridge
        if bridge.in_backward or not watch.own_thread():  # inside a backward (checkpointing): part of it
            return run()
        self.calls += 1
        if not watch.cadence.full(self.calls):
            return run()
        prints = None
        with watch._guard("torch.autograd.grad: before"):
            prints = self._before(outputs, grad_outputs)
        if prints is None:
            return run()
        self.audited += 1
        bridge.in_backward = True
        try:
            return run()
        finally:
            bridge.in_backward = False
            with watch._guard("torch.autograd.grad: after"):
                bridge.after(watch.backwards)
                self._written(prints)

    def _before(self, outputs, grad_outputs) -> tuple | None:
        from gradcheck.pytorch.graph import tensors_in, walk
        from gradcheck.pytorch.stats import fingerprint

        roots = tensors_in(outputs)
        graph = walk(roots, self._limit)
        if not graph.custom:
            return None  # no custom Function in it: nothing of the bridge's to watch
        label = f"torch.autograd.grad call #{self.calls} ({short(caller_site())})"
        self._watch.bridge.before(graph, self._watch.backwards, label=label)
        seeds = [(i, g, fingerprint(g)) for i, g in enumerate(tensors_in(grad_outputs)) if g.numel()]
        functions = sorted({type(node).__name__.removesuffix("Backward") for node in graph.custom})
        return seeds, functions, label

    def _written(self, prints: tuple) -> None:
        from gradcheck.pytorch.stats import fingerprint, nonzero_norm

        seeds, functions, label = prints
        for position, tensor, before in seeds:
            if fingerprint(tensor) == before:
                continue
            how = "zeroed" if nonzero_norm(tensor)[0] == 0 else "changed"
            ran = ", ".join(f"{name}.backward" for name in functions)
            self._watch.bridge.add(BridgeIssue(
                kind="grad-output-written", subject=f"torch.autograd.grad grad_outputs[{position}]",
                site=short(caller_site()),
                detail=f"{label}: the grad_outputs[{position}] the program passed was {how} in place by the backward "
                f"it ran ({ran}; Warp's backward zeroes an output's adjoint after reading it: y.grad = "
                "wp.from_torch(grad_output)): the program's own tensor, which it uses again (torch.autograd.gradcheck "
                "seeds every Jacobian row this way, and reads zeros from the second)",
                fix="give Warp a copy to consume in the Function's backward: y.grad = wp.from_torch(grad_output.clone())",
                backward=self._watch.backwards, shared=True,
            ))  # fmt: skip
