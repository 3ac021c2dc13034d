"""Measuring values on the device: what an array holds, read without bringing it to the host.

Statistics of many buffers in one launch (``stats``, with the kernels in ``kernels``), a param's gradient read once
(``gradients``), fingerprints that say "changed since" (``fingerprints``), the allocation ledger and what memory may
be read at all (``allocations``, ``liveness``), and the struct adjoint pointers behind a struct's gradient
(``struct_audit``). Everything here reads; nothing here runs the program's code.
"""
