"""Perception nodes (segmentation, deprojection, localization, ZED) and camera converters."""
