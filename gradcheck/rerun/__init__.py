"""Running the program's code again: the forward at moved params, and recorded launches replayed.

Two kinds, named apart in docs/layout.md: a *rerun* calls the program's forward again (finite differences,
``finite_diff`` with ``fd_evidence``; the carried-state rerun, ``carried_state``); a *replay* runs recorded launches
again on private copies of the values they read (``launch_record`` records them, ``launch_values`` copies,
``unit_replay`` tests one unit, ``launch_check`` judges a launch, ``replayed_tangents`` gives the program's own
tangent, ``adjoint_dependence`` asks whether an adjoint reads an input). The program never sees any of it: a rerun
restores every param it moved, a replay writes only its private copies.
"""
