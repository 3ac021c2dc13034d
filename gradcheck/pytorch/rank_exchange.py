"""The ranks' fingerprints exchanged through the program's own key-value store: no collective, no wait in training.

The program's process group comes with a store (torchrun's agent store, or the TCPStore of ``init_process_group``):
each rank posts its payload of an audited step under ``gradcheck/ranks/<run>/<restart>/<backward>/<rank>``, and
takes the others' when they are all there. Nothing here is a collective on the program's group (a collective the
program does not expect would deadlock it or change its order), and nothing blocks while the program trains:
``ready()`` only looks (``store.check``), and what is not there yet is looked for again at the next audited step.
Ranks move in lockstep under DDP (every step all-reduces), so a step's payloads are all there by the next one.

At the end (``settle``) a rank waits, up to a deadline (``GRADCHECK_RANK_TIMEOUT`` seconds, default 30), for what
is still missing. A rank that ended before that step (it posts the last step it audited under ``.../end/<rank>``:
uneven inputs under ``Join``), one that never comes (a crash), or a store that cannot be reached makes that step
no verdict, never a hang and never an error. A step read by every rank is deleted from the store.
"""

from __future__ import annotations

import json
import os
import time

DEFAULT_TIMEOUT = 30.0
MAX_PENDING = 16


def timeout() -> float:
    try:
        return max(0.0, float(os.environ.get("GRADCHECK_RANK_TIMEOUT", DEFAULT_TIMEOUT)))
    except ValueError:
        return DEFAULT_TIMEOUT


class RankExchange:
    """Payloads keyed by a step every rank names alike: ``("r", n)``, the n-th backward that all-reduced (DDP's
    lockstep makes it the same step on every rank, whatever their micro-batches under ``no_sync()``), or
    ``("b", n)``, the n-th backward, where nothing all-reduced (the same program on every rank)."""

    def __init__(self, store, rank: int, world: int, namespace: str) -> None:
        self.store, self.rank, self.world = store, rank, world
        self.prefix = f"gradcheck/ranks/{namespace}"
        self.pending: list[tuple[str, int]] = []  # steps posted here whose other payloads were not all read yet
        self.labels: dict[tuple[str, int], str] = {}  # step -> how this rank names it ("backward #7")
        self.lost: list[str] = []  # steps that got no verdict, each with why
        self._posted: set[tuple[str, int]] = set()  # a step is posted once: a key read by every rank is deleted

    def _key(self, step: tuple[str, int], rank: int) -> str:
        return f"{self.prefix}/{step[0]}{step[1]}/{rank}"

    def _progress(self, kind: str, rank: int) -> str:
        return f"{self.prefix}/at/{kind}/{rank}"

    def post(self, step: tuple[str, int], payload: dict, label: str) -> None:
        if step in self._posted:
            return
        self._posted.add(step)
        self.store.set(self._key(step, self.rank), json.dumps(payload))
        self.store.set(self._progress(step[0], self.rank), str(step[1]))
        self.pending.append(step)
        self.labels[step] = label
        if len(self.pending) > MAX_PENDING:
            self._lose(self.pending[0], f"the other ranks had not posted it {MAX_PENDING} audited steps later")

    def _lose(self, step: tuple[str, int], why: str) -> None:
        self.pending.remove(step)
        self.lost.append(f"{self.labels.pop(step, step)}: {why}")

    def ready(self) -> list[tuple[tuple[str, int], dict[int, dict]]]:
        """The posted steps every rank has posted now, each with every rank's payload (without waiting); a step a
        rank went past without posting it (the cadence audited another there) is no verdict at once."""
        done = []
        for step in list(self.pending):
            keys = [self._key(step, r) for r in range(self.world)]
            if self.store.check(keys):
                payloads = {r: json.loads(bytes(self.store.get(k)).decode()) for r, k in enumerate(keys)}
                self.pending.remove(step)
                self.labels.pop(step, None)
                self._read(step, keys)
                done.append((step, payloads))
                continue
            past = [r for r in self._missing(step) if self._beyond(step, r)]
            if past:
                self._lose(step, f"rank(s) {', '.join(map(str, past))} did not audit it")
        return done

    def _missing(self, step: tuple[str, int]) -> list[int]:
        return [r for r in range(self.world) if not self.store.check([self._key(step, r)])]

    def _beyond(self, step: tuple[str, int], rank: int) -> bool:
        progress = self._progress(step[0], rank)
        return self.store.check([progress]) and int(bytes(self.store.get(progress)).decode() or 0) > step[1]

    def _read(self, step: tuple[str, int], keys: list[str]) -> None:
        counter = f"{self.prefix}/{step[0]}{step[1]}/read"
        if int(self.store.add(counter, 1)) >= self.world:
            for key in [*keys, counter]:
                self.store.delete_key(key)

    def settle(self, seconds: float) -> list[tuple[tuple[str, int], dict[int, dict]]]:
        """At the end: this rank marked as ended, and what is still missing waited for up to ``seconds``; a rank
        that ended without posting a step never will (uneven inputs): no verdict at once."""
        self.store.set(f"{self.prefix}/end/{self.rank}", "1")
        done = self.ready()
        deadline = time.monotonic() + seconds
        while self.pending:
            for step in list(self.pending):
                ended = [r for r in self._missing(step) if self.store.check([f"{self.prefix}/end/{r}"])]
                if ended:
                    self._lose(step, f"rank(s) {', '.join(map(str, ended))} ended before it (uneven inputs)")
            done += self.ready()
            if not self.pending or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        for step in list(self.pending):
            missing = ", ".join(map(str, self._missing(step)))
            self._lose(step, f"rank(s) {missing} did not post it within {seconds:g} s (GRADCHECK_RANK_TIMEOUT)")
        return done


def default_store():
    """The program's process group's store, or None (no process group yet)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    get = getattr(dist.distributed_c10d, "_get_default_store", None)
    return get() if get is not None else None
