"""Helper modules for the Warp tutorial notebooks."""
