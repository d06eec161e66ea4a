"""Reasoning and planning nodes (analyzer, planner) and their service and action clients."""
