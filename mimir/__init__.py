"""mimir: persistent, interaction-grounded memory for mobile manipulators.

This package holds what every node shares: the command line, message conversions,
the transform buffer and parameter helpers.
"""
