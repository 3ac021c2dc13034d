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
    def __init__(self, store, rank: int, world: int, namespace: str) -> None:
        self.store, self.rank, self.world = store, rank, world
        self.prefix = f"gradcheck/ranks/{namespace}"
        self.pending: list[int] = []  # backwards posted here whose other payloads were not all read yet
        self.lost: list[str] = []  # steps that got no verdict, each with why
        self._last = 0

    def _key(self, index: int, rank: int) -> str:
        return f"{self.prefix}/{index}/{rank}"

    def post(self, index: int, payload: dict) -> None:
        self.store.set(self._key(index, self.rank), json.dumps(payload))
        self._last = index
        self.pending.append(index)
        if len(self.pending) > MAX_PENDING:
            dropped = self.pending.pop(0)
            self.lost.append(
                f"backward #{dropped}: the other ranks had not posted it {MAX_PENDING} audited steps later"
            )

    def ready(self) -> list[tuple[int, dict[int, dict]]]:
        """The posted steps every rank has posted now, each with every rank's payload (without waiting)."""
        done = []
        for index in list(self.pending):
            keys = [self._key(index, r) for r in range(self.world)]
            if not self.store.check(keys):
                continue
            payloads = {r: json.loads(bytes(self.store.get(k)).decode()) for r, k in enumerate(keys)}
            self.pending.remove(index)
            self._read(index, keys)
            done.append((index, payloads))
        return done

    def _read(self, index: int, keys: list[str]) -> None:
        counter = f"{self.prefix}/{index}/read"
        if int(self.store.add(counter, 1)) >= self.world:
            for key in [*keys, counter]:
                self.store.delete_key(key)

    def settle(self, seconds: float) -> list[tuple[int, dict[int, dict]]]:
        """At the end: this rank's last step marked, and what is still missing waited for up to ``seconds``."""
        self.store.set(f"{self.prefix}/end/{self.rank}", str(self._last))
        done = self.ready()
        deadline = time.monotonic() + seconds
        while self.pending:
            for index in list(self.pending):
                gone = self._ended_before(index)
                if gone:
                    self.pending.remove(index)
                    self.lost.append(f"backward #{index}: rank(s) {gone} ended before it (uneven inputs)")
            done += self.ready()
            if not self.pending or time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        for index in self.pending:
            missing = [r for r in range(self.world) if not self.store.check([self._key(index, r)])]
            self.lost.append(
                f"backward #{index}: rank(s) {', '.join(map(str, missing))} did not post it within {seconds:g} s "
                "(GRADCHECK_RANK_TIMEOUT)"
            )
        self.pending = []
        return done

    def _ended_before(self, index: int) -> str:
        gone = []
        for rank in range(self.world):
            end = f"{self.prefix}/end/{rank}"
            if self.store.check([self._key(index, rank)]) or not self.store.check([end]):
                continue
            if int(bytes(self.store.get(end)).decode() or 0) < index:
                gone.append(str(rank))
        return ", ".join(gone)


def default_store():
    """The program's process group's store, or None (no process group yet)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return None
    get = getattr(dist.distributed_c10d, "_get_default_store", None)
    return get() if get is not None else None
