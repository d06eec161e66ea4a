"""Prompt templates stored as Markdown files with ``{placeholder}`` fields.

Literal braces in a template are written doubled (``{{`` and ``}}``), as in ``str.format``.
Rendering demands exactly the template's placeholders: a missing or an unexpected value is a
:class:`PromptPlaceholderError`, so a prompt never goes out half filled.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from mimir_planner.reasoning.errors import PromptPlaceholderError, UnknownPromptError

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


@dataclass(frozen=True)
class PromptTemplate:
    """A loaded template."""

    name: str
    text: str
    placeholders: frozenset[str]

    @staticmethod
    def from_text(name: str, text: str) -> PromptTemplate:
        """Parses a template and lists its placeholders.

        Raises:
            PromptPlaceholderError: malformed braces or a placeholder that is not a plain name.
        """
        fields: set[str] = set()
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError as err:
            raise PromptPlaceholderError(f"template '{name}' has malformed braces") from err
        for _, field_name, spec, conversion in parsed:
            if field_name is None:
                continue
            if not re.fullmatch(r"[a-z][a-z0-9_]*", field_name) or spec or conversion:
                raise PromptPlaceholderError(
                    f"template '{name}' has an invalid placeholder '{{{field_name}}}'"
                )
            fields.add(field_name)
        return PromptTemplate(name=name, text=text, placeholders=frozenset(fields))

    def render(self, values: Mapping[str, object]) -> str:
        """Fills every placeholder.

        Raises:
            PromptPlaceholderError: a placeholder has no value, or a value has no placeholder.
        """
        missing = sorted(self.placeholders - set(values))
        if missing:
            raise PromptPlaceholderError(f"template '{self.name}' is missing values for {missing}")
        extra = sorted(set(values) - self.placeholders)
        if extra:
            raise PromptPlaceholderError(f"template '{self.name}' has no placeholders {extra}")
        return self.text.format_map({k: str(v) for k, v in values.items()})


class PromptLibrary:
    """Loads templates by name from a folder (``<name>.md``), caching them."""

    def __init__(self, folder: Path | str) -> None:
        self._folder = Path(folder)
        self._cache: dict[str, PromptTemplate] = {}

    @property
    def folder(self) -> Path:
        """Folder the templates are read from."""
        return self._folder

    def names(self) -> list[str]:
        """Names of the templates available."""
        if not self._folder.is_dir():
            return []
        return sorted(p.stem for p in self._folder.glob("*.md") if _NAME.match(p.stem))

    def get(self, name: str) -> PromptTemplate:
        """The template called ``name``.

        Raises:
            UnknownPromptError: no such template (or an invalid name).
            PromptPlaceholderError: the template's placeholders are malformed.
        """
        if name in self._cache:
            return self._cache[name]
        if not _NAME.match(name):
            raise UnknownPromptError(f"invalid prompt name '{name}'")
        path = self._folder / f"{name}.md"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError as err:
            raise UnknownPromptError(
                f"no prompt '{name}' in {self._folder}; available: {self.names()}"
            ) from err
        except OSError as err:
            raise UnknownPromptError(f"cannot read prompt {path}: {err}") from err
        template = PromptTemplate.from_text(name, text)
        self._cache[name] = template
        return template

    def render(self, name: str, values: Mapping[str, object]) -> str:
        """Loads and fills a template in one step."""
        return self.get(name).render(values)
