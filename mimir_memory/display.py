"""How a remembered node is shown to a person (the inspector's map, RViz markers): the one
state it is drawn in and the colour of each state."""

from __future__ import annotations

from mimir_memory.graph import AT_LAST_PLACE, SceneNode

#: Display states, in the order they take precedence, with their colour (RGB hex).
STATE_COLOURS: dict[str, str] = {
    "locked": "#d9534f",    # memory holds it locked
    "open": "#5cb85c",      # last seen open
    "stale": "#f0ad4e",     # missed by the cameras since, or no longer where it was seen
    "inspected": "#5b9bd5",  # its contents are known
    "unknown": "#b8b8b8",   # nothing learned by interaction yet
}


def display_state(node: SceneNode, stale_misses: int = 1) -> str:
    """The state a node is drawn in (a key of :data:`STATE_COLOURS`)."""
    props = node.properties
    locked = props.get("locked")
    if locked is not None and locked.value is True:
        return "locked"
    if any(p.is_opened for p in props.values()):
        return "open"
    here = props.get(AT_LAST_PLACE)
    if node.misses >= stale_misses or (here is not None and here.value is False):
        return "stale"
    if node.contents_stamp is not None:
        return "inspected"
    return "unknown"


def state_rgb(state: str) -> tuple[float, float, float]:
    """The colour of a display state as RGB in [0, 1].

    Raises:
        KeyError: not a display state.
    """
    code = STATE_COLOURS[state].lstrip("#")
    r, g, b = (int(code[i:i + 2], 16) / 255.0 for i in (0, 2, 4))
    return r, g, b
