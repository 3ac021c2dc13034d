"""The private buffers a replay runs on, and the cheap way to move values in and out of them.

Blame replays ~1,600 units on cartpole, each a few launches run ~5 times on a dozen small arrays: the bytes are
nothing, Warp's Python per call is everything (``wp.copy`` ~10 us, ``array.numpy()`` ~6 us, ``assign`` ~30 us, an
allocation ~15 us). So buffers are pooled by kind and handed back after each unit, and in host memory (CPU arrays)
every buffer and recorded copy gets one numpy view of its bytes, made once: a copy is then a ``numpy.copyto`` of
bytes, a read a view. Byte for byte what ``wp.copy`` and ``assign`` write (padding of a struct's records included),
so no verdict changes; device memory goes through Warp as before.
"""

from __future__ import annotations


class BufferPool:
    """Private buffers by (dtype, shape, device), handed back after each unit; and the host views of every array it
    moves values of (kept with the array, so an id is never reused while its view is).

    A unit always gets the free buffer of a kind made first: every buffer is back after each unit, so two units
    that ask for the same kinds in the same order (each launch of one kernel) run on the same buffers, and the
    launches prepared for one (``prepared``) serve the next."""

    def __init__(self) -> None:
        self._free: dict[tuple, list] = {}  # kind → heap of (ordinal, buffer): the first made first
        self._ordinal: dict[int, int] = {}  # id(buffer) → when it was made
        self._views = HostViews()
        self.prepared = PreparedLaunches()

    def like(self, array, zero: bool = False):
        """A buffer of the array's kind holding its values (zeros with ``zero``)."""
        import heapq

        import warp as wp

        free = self._free.get(self._key(array))
        if not free:
            buffer = wp.zeros_like(array, requires_grad=False) if zero else wp.clone(array, requires_grad=False)
            self._ordinal[id(buffer)] = len(self._ordinal)
            self._views.of(buffer)  # kept: the pool holds every buffer it made
            return buffer
        _ordinal, buffer = heapq.heappop(free)
        if zero:
            self.zero(buffer)
        else:
            self.copy(buffer, array)
        return buffer

    def give(self, buffer) -> None:
        import heapq

        buffer.grad = None  # a leftover alias would feed a store's adjoint in the next unit
        heapq.heappush(self._free.setdefault(self._key(buffer), []), (self._ordinal[id(buffer)], buffer))

    @staticmethod
    def _key(array) -> tuple:
        return (array.dtype, array.shape, str(array.device))

    # -- moving values ----------------------------------------------------------------------------------------

    def copy(self, dest, src) -> None:
        """``wp.copy(dest, src)`` of two arrays of one kind."""
        to, came = self._bytes(dest), self._bytes(src)
        if to is not None and came is not None and to.size == came.size:
            to[...] = came
        else:
            import warp as wp

            wp.copy(dest, src)

    def put(self, dest, values) -> None:
        """``dest.assign(values)``: ``values`` a numpy array of the array's own dtype and shape."""
        to = self._bytes(dest)
        if to is None:
            dest.assign(values)
            return
        import numpy as np

        came = np.ascontiguousarray(values).reshape(-1).view(np.uint8)
        if came.size != to.size:
            dest.assign(values)
        else:
            to[...] = came

    def zero(self, buffer) -> None:
        to = self._bytes(buffer)
        if to is None:
            buffer.zero_()
        else:
            to.fill(0)

    def values(self, array):
        """The array's values as numpy (``array.numpy()``): a view in host memory, made once."""
        view = self._view(array)[1]
        return view if view is not None else array.numpy()

    def _bytes(self, array):
        return self._view(array)[2]

    def _view(self, array) -> tuple:
        return self._views.of(array)


class HostViews:
    """Each array's host views (``host_views``), made once: id → (the array, its values view, its bytes view), the
    array kept so its id is never another's while its views are."""

    def __init__(self) -> None:
        self._found: dict[int, tuple] = {}

    def of(self, array) -> tuple:
        """(array, values, bytes); the views are None where the array is not a contiguous one in host memory."""
        found = self._found.get(id(array))
        if found is None or found[0] is not array:
            found = self._found[id(array)] = (array, *host_views(array))
        return found


def host_views(array) -> tuple:
    """(values, bytes) views of a contiguous array in host memory, or (None, None): device memory, strided, empty."""
    import numpy as np

    device = getattr(array, "device", None)
    if device is None or not device.is_cpu or not array.is_contiguous or not array.size or not array.ptr:
        return None, None
    values = array.numpy()
    if not values.flags.c_contiguous:
        return None, None
    return values, values.reshape(-1).view(np.uint8)


class PreparedLaunches:
    """Launches packed once (gradcheck.warp_compat.launch_commands) by what they run on: the kernel, its dims and
    options, each argument (a buffer or array by identity, with the adjoint buffer aliased as its ``.grad`` for an
    adjoint launch; a number by value). The arrays named must outlive the entry: the pool's buffers do (it never
    drops one), and so do the program's arrays a recording holds. A launch with another kind of argument (a struct,
    a vector) is prepared for its own replay only."""

    def __init__(self) -> None:
        self._found: dict[tuple, object] = {}

    def get(self, launch, arguments: dict):
        """The prepared launch of ``wp.launch(launch.kernel, launch.dim, **arguments)`` (None: launch it plainly)."""
        from gradcheck.warp_compat.launch_commands import prepared_launch

        key = _launch_key(launch, arguments)
        if key is not None and key in self._found:
            return self._found[key]
        command = prepared_launch(launch.kernel, launch.dim, **arguments)
        if key is not None:
            self._found[key] = command
        return command


def _launch_key(launch, arguments: dict) -> tuple | None:
    from gradcheck.warp_compat import array_class

    array_type, adjoint = array_class(), bool(arguments.get("adjoint"))
    dim = tuple(launch.dim) if isinstance(launch.dim, (list, tuple)) else launch.dim
    key: list = [id(launch.kernel), dim, adjoint, str(arguments.get("device"))]
    key += [(name, value) for name, value in sorted(arguments.items()) if name in ("max_blocks", "block_dim")]
    for name in ("inputs", "outputs", "adj_inputs", "adj_outputs"):
        for value in arguments.get(name, ()):
            if isinstance(value, array_type):
                key.append((id(value), id(value.grad) if adjoint and value.grad is not None else None))
            elif type(value) is float:  # by its bits: -0.0 == 0.0, but a kernel may tell them apart
                key.append((float, value.hex()))
            elif value is None or type(value) in (bool, int):
                key.append((type(value), value))
            else:
                return None
    return tuple(key)
