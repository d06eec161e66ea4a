"""``mimir inspect``: a local web page that shows a memory folder (map, nodes with the events
behind every fact, keyframes, the event timeline, the planner trace and the task agenda) as it
stands now or as it stood at any earlier moment.

``folder`` reads the memory folder read-only through the memory core, ``pages`` turns what it
reads into HTML and SVG (every text escaped), ``server`` serves the pages on a loopback port.
"""
