"""Symbolic parsing of the common instruction forms into goal specifications.

Recognised forms (case-insensitive, one or several joined by "and"/"then"):
find/locate/look for X [in S]; open Y; close Y; go to Y; pick X [from S] [and place it on/in T];
put/place X on/in T; bring X [from S] [to T]; choose the F where X belongs; questions starting
with what/where/which/how many/is/are/does. An object may carry a relative clause naming where
it is kept (``that is stored in a cabinet``) or what it is kept with (``that is kept with the
fruit``), a find may exclude a place (``, not the one on the counter``), ask for room to grasp
(``that has clear space around it for grasping``) or describe the thing after its name (``the
Froot Loops box, the red one with the blue check pattern``). Anything else is
returned with ``symbolic=False`` and goes to the VLM planner. The parser never guesses: an
unknown verb or an unrecognised clause makes the whole instruction non-symbolic.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum

from mimir_planner.errors import InstructionError

MAX_INSTRUCTION_CHARS = 500


class GoalKind(StrEnum):
    """Kinds of symbolic goal an instruction can produce."""

    FIND = "find"
    OPEN = "open"
    CLOSE = "close"
    GO_TO = "go_to"
    PICK = "pick"
    PLACE = "place"
    QUESTION = "question"


@dataclass(frozen=True)
class GoalSpec:
    """One goal as the instruction states it, before grounding to node ids.

    Attributes:
        kind: Goal kind.
        obj: Object mention (``"ketchup"``), or the fixture/place for open, close and go to.
        source: Explicit source mention (``from the cabinet``), if any.
        target: Explicit target mention for placement, if any.
        relation: ``container`` (in/into/inside) or ``surface`` (on/onto) for placement.
        question_kind: ``what``, ``what_with``, ``where``, ``which``, ``which_state``,
            ``how_many``, ``yes_no`` or ``belongs`` for questions.
        text: The instruction fragment this goal came from.
        near: What the object is kept with (a name or a category such as ``fruit``).
        avoid: A place the object must not be taken from (``not the one on the counter``).
        like: A reference thing the object must look like (``the cup on the counter`` gives
            ``cup``); the reference itself is not the object.
        like_at: Where that reference is (``counter``), when the instruction says.
        clear: The object must have room beside it for the gripper's fingers (``that has
            clear space around it for grasping``), judged from memory's 3D boxes.
    """

    kind: GoalKind
    obj: str | None
    source: str | None = None
    target: str | None = None
    relation: str | None = None
    question_kind: str | None = None
    text: str = ""
    near: str | None = None
    avoid: str | None = None
    like: str | None = None
    like_at: str | None = None
    clear: bool = False


@dataclass(frozen=True)
class ParsedInstruction:
    """Result of :func:`parse_instruction`.

    Attributes:
        text: The cleaned instruction (lower case, no polite prefix).
        goals: Goal specifications in task order (empty when not symbolic).
        symbolic: False when the instruction must be handed to the VLM planner.
        reason: Why the instruction is not symbolic (empty otherwise).
        original: The instruction as given (stripped).
    """

    text: str
    goals: tuple[GoalSpec, ...]
    symbolic: bool
    reason: str = ""
    original: str = ""


_PRONOUNS = frozenset({"it", "them", "that", "this", "one"})
_ARTICLES = re.compile(r"^(?:the|a|an|some|my|any|one)\s+")
_POLITE = re.compile(r"^(?:please\s+|robot,?\s+|can you\s+|could you\s+|would you\s+)+")
_TRAILING = re.compile(r"\s*(?:please|for me|now)$")
_SPLIT = re.compile(r"\s*(?:,\s*and then|,\s*then|\band then\b|;|\bthen\b|,\s*and\b|\band\b)\s*")
_NOUN = r"([a-z0-9][a-z0-9 _'\-]*?)"
_PREP_IN = r"(?:into|inside|within|in)"
_PREP_ON = r"(?:on top of|onto|on)"
_PREP_FROM = r"(?:from|inside|in|on|off)"

_FIND = re.compile(
    rf"^(?:find|locate|look for|search for|identify|spot){{1}}\s+{_NOUN}"
    rf"(?:\s+{_PREP_FROM}\s+{_NOUN})?$"
)
_LOOK = re.compile(rf"^(?:look|search|check|peek)\s+(?:(?:into|inside|through|in)\s+)?{_NOUN}$")
_OPEN = re.compile(rf"^open\s+(?:up\s+)?{_NOUN}$")
_CLOSE = re.compile(rf"^(?:close|shut)\s+{_NOUN}$")
_GO = re.compile(rf"^(?:go|move|navigate|drive|head)\s+(?:to|towards|over to)\s+{_NOUN}$|"
                 rf"^approach\s+{_NOUN}$")
_PICK = re.compile(rf"^(?:pick up|pick|grab|grasp|take)\s+{_NOUN}(?:\s+up)?"
                   rf"(?:\s+(?:from|out of|off)\s+{_NOUN})?$")
_PLACE = re.compile(
    rf"^(?:place|put|set|drop|store)\s+(?:it|them|{_NOUN})\s+"
    rf"(?:(?P<in>{_PREP_IN})|(?P<on>{_PREP_ON}))\s+{_NOUN}$"
)
_BRING = re.compile(rf"^(?:bring|fetch|get)\s+(?:me\s+)?{_NOUN}"
                    rf"(?:\s+(?:from|out of)\s+{_NOUN})?(?:\s+to\s+{_NOUN})?$")
_QUESTION = re.compile(r"^(what|where|which|how many|is|are|does|do|did|was|were)\b")
_WHERE = re.compile(rf"^where\s+(?:is|are|was|were|did i put|can i find)\s+{_NOUN}$")
_HOW_MANY = re.compile(rf"^how many\s+{_NOUN}\s+(?:are|is|were)\s*(?:there)?"
                       rf"(?:\s+{_PREP_FROM}\s+{_NOUN})?$")
_WHAT_IN = re.compile(rf"^what(?:'s| is| was| are)?\s+(?:stored\s+)?{_PREP_IN}\s+{_NOUN}$")
_WHAT_WITH = re.compile(rf"^what\s+(?:else\s+)?(?:is|was|are|were)\s+(?:stored|kept|placed)\s+"
                        rf"(?:together with|with|next to|near|beside)\s+{_NOUN}$")
_WHICH = re.compile(
    rf"^which\s+{_NOUN}\s+(?:has|have|holds|held|had|contains|contained|stores|stored|keeps|"
    rf"kept|is|are|was|were)\s+(?:.*?)\s*{_NOUN}$"
)
_WHICH_STATE = re.compile(rf"^which\s+{_NOUN}\s+(?:is|are|was|were)\s+"
                          r"(locked|open|opened|closed|empty)$")
_BELONGS = re.compile(
    rf"^(?:choose|pick|select|name|find|decide on)\s+{_NOUN}\s+where\s+{_NOUN}\s+"
    r"(?:belongs|goes|should go|should be (?:put away|stored|kept|placed|put))$"
)
_FIND_HEAD = re.compile(r"^(?:find|locate|look for|search for|identify|spot)\s+(?P<rest>.+)$")
#: ``find the froot loops box, the red one with the blue check pattern``: a name, then what it
#: looks like (``the <words> one [with <words>]``).
_DESCRIBED = re.compile(
    r"^(?P<name>.+?),\s*(?:the|a)\s+(?P<first>[a-z][a-z \-]*?)\s+(?P<one>[a-z]+)"
    r"(?:\s+with\s+(?:the\s+|a\s+|an\s+)?(?P<rest>[a-z][a-z \-]*))?$")
#: Pattern nouns of a description as the adjectives the attribute table knows.
_PATTERN_NOUNS = {"check": "checked", "checks": "checked", "checker": "checked",
                  "stripe": "striped", "stripes": "striped", "dot": "dotted", "dots": "dotted",
                  "spots": "dotted"}
#: ``the cup that looks like the cup on the counter`` / ``... like the one on the counter``.
_LOOKS_LIKE = re.compile(r"^(?P<obj>.+?)\s+that\s+looks?\s+(?:just\s+|exactly\s+)?like\s+"
                         r"(?P<ref>.+)$")
_DESCRIPTION_FILLER = {"pattern", "patterned", "print", "and", "one", "label", "labels", "lid",
                       "cap", "band"}
#: ``the water bottle that has clear space around it for grasping``, ``the mug that is not
#: cluttered``: an object the gripper can reach between its neighbours.
_CLEAR = re.compile(
    r"^(?P<obj>.+?)\s+(?:that|which)\s+(?:"
    r"(?:has|have)\s+(?:(?:enough|clear|free|open|some|plenty of)\s+)*(?:space|room)\s+"
    r"(?:all\s+)?(?:around|beside|round|about)\s+(?:it|them)"
    r"(?:\s+(?:for|to)\s+(?:grasping|grasp|gripping|grip|picking it up|picking up|pick it up|"
    r"pick up|the gripper))?"
    r"|(?:is|are)\s+(?:not cluttered|uncluttered|free of clutter|easy to grasp|easiest to grasp))$")
_KEPT_VERB = r"(?:stored|kept|placed|put|sitting|standing|lying|sat|sits|stood|stands|lay|lies)"
_REL_IN = re.compile(
    rf"^(?P<obj>.+?)\s+that\s+(?:is|was|are|were)\s+(?:{_KEPT_VERB}\s+)?"
    rf"(?:in|inside|within|on)\s+(?P<place>[a-z0-9 _'\-]+)$"
)
_REL_WITH = re.compile(
    rf"^(?P<obj>.+?)\s+that\s+(?:(?:is|was|are|were)\s+)?(?:{_KEPT_VERB}\s+)?"
    r"(?:together with|next to|beside|alongside|near|with)\s+(?P<near>[a-z0-9 _'\-]+)$"
)
_AT_PLACE = re.compile(r"^(?P<obj>.+?)\s+(?:on|in|from)\s+(?P<place>(?:the|a)\s+[a-z0-9 _'\-]+)$")
_AVOID = re.compile(
    r"^(?P<head>.+?),?\s+not\s+the\s+(?:one|ones)\s+(?:on|in|inside|from|at)\s+"
    r"(?P<avoid>[a-z0-9 _'\-]+)$"
)
_YES_NO = re.compile(rf"^(?:is|are|was|were)\s+{_NOUN}\s+(locked|open|opened|closed|empty|full)$")

_QUESTION_FORMS: tuple[tuple[str, re.Pattern[str], int | None, int | None, int | None], ...] = (
    # question kind, pattern, and its groups of the object, the source and the asked-about
    # state (None: the form has none); tried in order, after ``where``.
    ("which_state", _WHICH_STATE, 1, None, 2),
    ("how_many", _HOW_MANY, 1, 2, None),
    ("what", _WHAT_IN, None, 1, None),
    ("what_with", _WHAT_WITH, 1, None, None),
    ("which", _WHICH, 2, 1, None),
    ("yes_no", _YES_NO, 1, None, 2),
)


def _clean(text: str) -> str:
    out = text.strip().lower()
    out = re.sub(r"\s+", " ", out)
    out = out.rstrip(" .!?")
    out = _POLITE.sub("", out)
    return _TRAILING.sub("", out).strip()


def noun(phrase: str | None) -> str | None:
    """A mention without articles and surrounding space (``"the red mug"`` -> ``red mug``)."""
    if phrase is None:
        return None
    out = phrase.strip()
    while True:
        stripped = _ARTICLES.sub("", out)
        if stripped == out:
            break
        out = stripped
    out = re.sub(r"^(?:upper|lower|top|bottom|left|right|far|near)\s+(?=\w+s$)", "", out)
    return out.strip() or None


def _kept_with(phrase: str) -> str | None:
    """The thing of ``the other condiments`` (``condiments``)."""
    out = noun(phrase)
    if out is not None:
        out = re.sub(r"^(?:other|rest of the|remaining)\s+", "", out).strip() or None
    return out


def relative(phrase: str) -> tuple[str, str | None, str | None] | None:
    """``(object, source, near)`` of a mention with a relative clause, or None.

    ``mug that is stored in a cabinet`` gives ``("mug", "cabinet", None)``; ``ketchup that is
    kept with the fruit`` gives ``("ketchup", None, "fruit")``. A mention without ``that``
    is returned as it is; a relative clause of another kind gives None.
    """
    if not re.search(r"\bthat\b", phrase):
        obj = noun(phrase)
        return (obj, None, None) if obj else None
    match = _REL_IN.match(phrase)
    if match:
        obj, place = noun(match.group("obj")), noun(match.group("place"))
        return (obj, place, None) if obj and place else None
    match = _REL_WITH.match(phrase)
    if match:
        obj, near = noun(match.group("obj")), _kept_with(match.group("near"))
        return (obj, None, near) if obj and near else None
    return None


def looks_like(phrase: str) -> tuple[str, str, str | None] | None:
    """``(object, reference, where the reference is)`` of ``cup that looks like the cup on the
    counter`` (``("cup", "cup", "counter")``; ``the one`` is the object's name), or None."""
    match = _LOOKS_LIKE.match(phrase)
    if match is None:
        return None
    obj = noun(match.group("obj"))
    ref_phrase = match.group("ref").strip()
    place = None
    at = _AT_PLACE.match(ref_phrase)
    if at is not None:
        ref_phrase, place = at.group("obj"), noun(at.group("place"))
    ref = noun(ref_phrase)
    if ref in ("one", "ones"):
        if place is None:
            return None  # "looks like the one": which one is not said
        ref = obj
    if not obj or not ref:
        return None
    return obj, ref, place


def described(phrase: str) -> str | None:
    """A mention with its description moved in front of its name, or None when ``phrase`` has
    no ``, the ... one`` description: ``froot loops box, the red one with the blue check
    pattern`` gives ``red blue checked froot loops box`` (which words are colours or patterns
    is the planner's attribute table's business). The description may repeat the name's last
    word instead of ``one`` (``tomato soup can, the red can with the white label``), and the
    part a colour is said of (label, lid, cap, band) is one of the thing's colours."""
    match = _DESCRIBED.match(phrase)
    if match is None:
        return None
    name = noun(match.group("name"))
    if not name or match.group("one") not in ("one", name.split()[-1]):
        return None
    words = [_PATTERN_NOUNS.get(w, w) for part in ("first", "rest") if match.group(part)
             for w in match.group(part).split() if w not in _DESCRIPTION_FILLER]
    return " ".join([*dict.fromkeys(words), name])


def _check(text: object) -> str:
    if not isinstance(text, str):
        raise InstructionError(f"an instruction must be text, got {type(text).__name__}")
    if len(text) > MAX_INSTRUCTION_CHARS:
        raise InstructionError(f"instruction longer than {MAX_INSTRUCTION_CHARS} characters")
    if any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        raise InstructionError("instruction holds control characters")
    cleaned = _clean(text)
    if not cleaned:
        raise InstructionError("instruction is empty")
    return cleaned


def _question(text: str) -> GoalSpec | None:
    match = _WHERE.match(text)
    if match:
        rel = relative(match.group(1))
        if rel is None:
            return None
        obj, source, near = rel
        return GoalSpec(GoalKind.QUESTION, obj, source=source, near=near, question_kind="where",
                        text=text)
    for kind, pattern, obj_at, source_at, state_at in _QUESTION_FORMS:
        match = pattern.match(text)
        if match:
            return GoalSpec(GoalKind.QUESTION, noun(match.group(obj_at)) if obj_at else None,
                            source=noun(match.group(source_at)) if source_at else None,
                            target=match.group(state_at) if state_at else None,
                            question_kind=kind, text=text)
    return None


def _clause(text: str, held: str | None) -> list[GoalSpec] | None:
    """Goal specs of one clause; ``held`` is the object of an earlier pick (for "place it")."""
    head = _FIND_HEAD.match(text)
    if head and (clear := _CLEAR.match(head.group("rest"))) is not None:
        obj = noun(clear.group("obj"))
        return [GoalSpec(GoalKind.FIND, obj, clear=True, text=text)] if obj else None
    if head and (like := looks_like(head.group("rest"))) is not None:
        return [GoalSpec(GoalKind.FIND, like[0], like=like[1], like_at=like[2], text=text)]
    if head and re.search(r"\bthat\b", head.group("rest")):
        rel = relative(head.group("rest"))
        if rel is None:
            return None
        return [GoalSpec(GoalKind.FIND, rel[0], source=rel[1], near=rel[2], text=text)]
    if head:
        mention = described(head.group("rest"))
        if mention is not None:
            return [GoalSpec(GoalKind.FIND, mention, text=text)]
    match = _FIND.match(text)
    if match:
        return [GoalSpec(GoalKind.FIND, noun(match.group(1)), source=noun(match.group(2)),
                         text=text)]
    match = _OPEN.match(text)
    if match:
        return [GoalSpec(GoalKind.OPEN, noun(match.group(1)), text=text)]
    match = _CLOSE.match(text)
    if match:
        return [GoalSpec(GoalKind.CLOSE, noun(match.group(1)), text=text)]
    match = _GO.match(text)
    if match:
        return [GoalSpec(GoalKind.GO_TO, noun(match.group(1) or match.group(2)), text=text)]
    match = _PLACE.match(text)
    if match:
        obj = noun(match.group(1)) or held
        if obj is None:
            return None
        relation = "container" if match.group("in") else "surface"
        target = noun(match.group(4))
        specs = [] if obj == held else [GoalSpec(GoalKind.PICK, obj, text=text)]
        specs.append(GoalSpec(GoalKind.PLACE, obj, target=target, relation=relation, text=text))
        return specs
    match = _PICK.match(text)
    if match:
        return [GoalSpec(GoalKind.PICK, noun(match.group(1)), source=noun(match.group(2)),
                         text=text)]
    match = _BRING.match(text)
    if match:
        obj, source, target = noun(match.group(1)), noun(match.group(2)), noun(match.group(3))
        specs = [GoalSpec(GoalKind.PICK, obj, source=source, text=text)]
        if target is not None:
            specs.append(GoalSpec(GoalKind.PLACE, obj, target=target, relation="surface",
                                  text=text))
        return specs
    return None


def parse_instruction(text: object) -> ParsedInstruction:
    """Turn an instruction into goal specifications, or mark it for the VLM planner.

    Raises:
        InstructionError: The instruction is not a string, is empty, too long, or holds
            control characters.
    """
    cleaned = _check(text)
    return replace(_parse(cleaned), original=str(text).strip())


def _belongs(text: str) -> GoalSpec | None:
    """``choose the cabinet where the bread on the counter belongs``."""
    match = _BELONGS.match(text)
    if match is None:
        return None
    kind, phrase = noun(match.group(1)), match.group(2)
    at = _AT_PLACE.match(phrase)
    obj, source = (noun(at.group("obj")), noun(at.group("place"))) if at else (noun(phrase), None)
    if kind is None or obj is None:
        return None
    return GoalSpec(GoalKind.QUESTION, obj, source=source, target=kind, question_kind="belongs",
                    text=text)


def _parse(cleaned: str) -> ParsedInstruction:
    belongs = _belongs(cleaned)
    if belongs is not None:
        return ParsedInstruction(cleaned, (belongs,), True)
    avoid: str | None = None
    excluded = _AVOID.match(cleaned)
    if excluded and _FIND_HEAD.match(excluded.group("head")):
        cleaned, avoid = excluded.group("head"), noun(excluded.group("avoid"))
    if _QUESTION.match(cleaned):
        spec = _question(cleaned)
        if spec is None:
            return ParsedInstruction(cleaned, (), False, "question form not recognised")
        return ParsedInstruction(cleaned, (spec,), True)
    clauses = [c for c in _SPLIT.split(cleaned) if c]
    specs: list[GoalSpec] = []
    look_source: str | None = None
    held: str | None = None
    last_obj: str | None = None
    for clause in clauses:
        look = _LOOK.match(clause)
        if look and not _FIND.match(clause):
            look_source = noun(look.group(1))
            continue
        found = _clause(clause, held)
        if found is None:
            return ParsedInstruction(cleaned, (), False, f"clause not recognised: {clause!r}")
        for item in found:
            spec = item
            if spec.obj in _PRONOUNS:
                if last_obj is None:
                    return ParsedInstruction(cleaned, (), False, f"'{spec.obj}' refers to nothing")
                text = re.sub(rf"\b{spec.obj}\b", last_obj, spec.text, count=1)
                spec = replace(spec, obj=last_obj, text=text)
            if spec.kind is GoalKind.FIND and spec.source is None and look_source is not None:
                spec = replace(spec, source=look_source)
            if spec.obj is None:
                return ParsedInstruction(cleaned, (), False, f"no object in {clause!r}")
            specs.append(spec)
            last_obj = spec.obj
            if spec.kind is GoalKind.PICK:
                held = spec.obj
        look_source = None
    if not specs:
        return ParsedInstruction(cleaned, (), False, "no goal recognised")
    if avoid is not None:
        specs = [replace(s, avoid=avoid) if s.kind is GoalKind.FIND else s for s in specs]
    return ParsedInstruction(cleaned, tuple(specs), True)
