"""Test scenario file with a syntax error (bad-input tests)."""

def setup(self device):
    pass
