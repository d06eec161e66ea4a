"""Reasoning (VLM backends, interaction analyzer, verification), retrieval and planning."""
