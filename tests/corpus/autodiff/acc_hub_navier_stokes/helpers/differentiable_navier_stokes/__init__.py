"""Helpers for the differentiable Navier-Stokes notebook."""
