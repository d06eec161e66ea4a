"""Labels of simulated entities: normalising them and matching them to remembered labels.

The simulator names things in its own words (``upper cabinet``, ``ketchup bottle``); memory and
the planner use the segmentation vocabulary's (``cabinet``, ``ketchup``). :class:`LabelMap`
translates the former into the latter, and :func:`labels_compatible` decides whether a
remembered label may name a simulated entity.
"""

from __future__ import annotations

from collections.abc import Iterable

from mimir.labels import label_text, label_words


def _words(label: str) -> tuple[str, ...]:
    return label_words(label)


def _contains_words(haystack: tuple[str, ...], needle: tuple[str, ...]) -> bool:
    """Whether ``needle`` occurs as consecutive words in ``haystack``."""
    n = len(needle)
    return n > 0 and any(haystack[i : i + n] == needle for i in range(len(haystack) - n + 1))


class LabelMap:
    """Maps simulator labels (``upper cabinet``, ``ketchup bottle``) to vocabulary labels.

    A simulator label maps to the vocabulary label it equals, else to the label whose prompt it
    equals, else to the longest vocabulary label it contains as whole words (``upper cabinet`` ->
    ``cabinet``, ``bread loaf`` -> ``bread``). Labels that match nothing stay as they are.

    Args:
        vocabulary: ``(label, prompt)`` pairs; empty keeps every simulator label.
    """

    def __init__(self, vocabulary: Iterable[tuple[str, str]] = ()) -> None:
        self._entries = [(label_text(lab), label_text(p), lab) for lab, p in vocabulary]
        self._cache: dict[str, str] = {}

    def in_vocabulary(self, sim_label: str) -> str | None:
        """Vocabulary label of a simulator label; None when the vocabulary has no word for it
        (an empty map keeps every label). SAM3 prompted with the vocabulary would not name it
        either, so such entities are left out of segmentation and never reach memory."""
        if not self._entries:
            return sim_label
        mapped = self.map(sim_label)
        return mapped if any(mapped == lab for _, _, lab in self._entries) else None

    def map(self, sim_label: str) -> str:
        """Vocabulary label of a simulator label (the label itself when nothing matches)."""
        if sim_label in self._cache:
            return self._cache[sim_label]
        norm = label_text(sim_label)
        out = sim_label
        exact = [lab for n, _, lab in self._entries if n == norm]
        prompt = [lab for _, p, lab in self._entries if p == norm]
        if exact:
            out = exact[0]
        elif prompt:
            out = prompt[0]
        else:
            words = tuple(norm.split())
            contained = [
                (len(n.split()), lab)
                for n, _, lab in self._entries
                if _contains_words(words, tuple(n.split()))
            ]
            if contained:
                out = max(contained, key=lambda item: item[0])[1]
        self._cache[sim_label] = out
        return out


def labels_compatible(query: str, sim_label: str, label_map: LabelMap | None = None) -> bool:
    """Whether a remembered label can name a simulator entity with ``sim_label``.

    Compatible when equal after normalisation, when the mapped vocabulary label equals the query,
    or when one label contains the other as whole words (``cabinet`` / ``upper cabinet``). An
    empty query is compatible with everything.
    """
    q, s = _words(query), _words(sim_label)
    if not q:
        return True
    if q == s or _contains_words(s, q) or _contains_words(q, s):
        return True
    return label_map is not None and _words(label_map.map(sim_label)) == q
