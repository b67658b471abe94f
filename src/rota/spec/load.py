"""Reading YAML files for the spec models: safe loading, no duplicate keys, clear errors.

Every failure is an ``InvalidSpec``: a file that cannot be read has an empty field, a YAML
syntax error names ``line N`` as its field. The caller adds the file name.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from rota.core import InvalidSpec


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            if key in seen:
                raise InvalidSpec(f"line {line}", f"key {key!r} repeats the one on line "
                                  f"{seen[key]}; a key may appear once per mapping")
            try:
                seen[key] = line
            except TypeError:
                raise InvalidSpec(f"line {line}", "a mapping key must be a plain value") from None
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: str | Path) -> Any:
    """The parsed content of ``path``; an empty file is ``None``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidSpec("", "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidSpec("", f"cannot read the file ({exc.__class__.__name__})") from None
    return parse_yaml(text)


def parse_yaml(text: str) -> Any:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise InvalidSpec(where, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise InvalidSpec("", f"not valid YAML: {exc.__class__.__name__}") from None


def read_mapping(path: str | Path, what: str) -> dict[str, Any]:
    """A file whose top level must be a mapping (``what`` says which keys it expects)."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InvalidSpec("", f"expected a mapping at the top level with {what}, got "
                          f"{'an empty file' if data is None else type(data).__name__}")
    return data
