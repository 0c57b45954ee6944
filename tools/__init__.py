"""Maintenance scripts for the asyncop repository (not part of the package)."""
