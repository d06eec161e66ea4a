"""Memory nodes (scene graph, keyframes) and the memory message converters."""
