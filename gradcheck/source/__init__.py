"""Reading kernel source: what a kernel's code says, from its syntax tree.

Constructs older Warp releases differentiate wrongly (``kernel_patterns``), steps and casts that cut a gradient
(``gradient_stops``), when two launches of one kernel are one adjoint test (``kernel_signature``, with
``loop_bounds``), and the hand-written adjoints a kernel reaches (``custom_adjoints``). Nothing here runs a kernel.
"""
