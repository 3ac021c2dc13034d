"""Explaining a finding: where a gradient chain breaks, where a NaN started in backward.

Called by the observer's causes (gradcheck.observe.causes) once a check has something to explain: the launch, the
array and the line a finding points at come from here.
"""
