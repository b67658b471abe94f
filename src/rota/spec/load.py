"""Reading YAML files for the spec models: safe loading, no duplicate keys, clear errors.

Every failure is an ``InvalidSpec``: a file that cannot be read has an empty field, a YAML
syntax error names ``line N`` as its field, and so does a byte that is not UTF-8. The caller
adds the file name (``rota submit``), or answers 422 with it (``rota.api.jobfile``).

Aliases (``*name``) share the value of their anchor, so a few lines can stand for billions of
values (an alias bomb: each level refers to the one above ten times). Nothing is built from a
document whose values, aliases expanded, number more than ``MAX_VALUES``; a value that
contains itself (``&a [*a]``) is refused too. The count is made on the parsed node graph, each
node once, so a bomb is refused at the cost of its size on disk.
"""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from rota.core import InvalidSpec

MAX_VALUES = 1_000_000


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key written twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node, deep=False):  # type: ignore[override]
        seen: dict[object, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            line = key_node.start_mark.line + 1
            try:
                repeated = key in seen
            except TypeError:  # a list or mapping as a key (``? [a, b]``)
                raise _invalid(f"line {line}", "a mapping key must be a plain value") from None
            if repeated:
                raise _invalid(f"line {line}", f"key {key!r} repeats the one on line "
                                  f"{seen[key]}; a key may appear once per mapping")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)

    def construct_object(self, node, deep=False):  # type: ignore[override]
        """A value PyYAML's constructors cannot make (a date with month 13, ``!!int xyz``,
        ``!!bool maybe``) is a YAML error at its line, not a crash; so is an integer beyond 64
        bits, which no rota file needs and which ``json`` cannot read back past 4,300 digits.
        (A mapping or list tagged wrong fails after its node was made, as PyYAML fills those
        in later: ``parse_yaml`` says so without a line.)"""
        try:
            value = super().construct_object(node, deep=deep)
        except (yaml.YAMLError, InvalidSpec, RecursionError):
            raise
        except Exception as exc:  # noqa: BLE001 - any constructor's failure on its value
            raise self._unreadable(node, str(exc) or exc.__class__.__name__) from None
        if type(value) is int and value.bit_length() > 64:
            raise self._unreadable(node, "a number too large")
        return value

    @staticmethod
    def _unreadable(node, why: str) -> yaml.YAMLError:
        value = node.value if isinstance(node.value, str) else None
        shown = "the value" if value is None else repr(
            value if len(value) <= 40 else value[:37] + "...")
        return yaml.constructor.ConstructorError(
            None, None, f"cannot read {shown} as {node.tag.rsplit(':', 1)[-1]}: {why}",
            node.start_mark)

    def construct_document(self, node):  # type: ignore[override]
        check_expansion(node)
        return super().construct_document(node)


def check_expansion(root: yaml.Node) -> None:
    """Refuse a document that expands to more than ``MAX_VALUES`` values or holds itself."""
    sizes: dict[int, int] = {}
    open_: set[int] = set()
    # iterative depth-first walk: (node, children done?)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        key = id(node)
        children = _children(node)
        if done:
            open_.discard(key)
            total = 1 + sum(sizes[id(c)] for c in children)
            if total > MAX_VALUES:
                raise _invalid(f"line {node.start_mark.line + 1}", "its aliases expand to "
                                  f"more than {MAX_VALUES} values; write the values out")
            sizes[key] = total
            continue
        if key in sizes:
            continue
        if key in open_:
            raise _invalid(f"line {node.start_mark.line + 1}",
                              "a value refers to itself through an alias")
        open_.add(key)
        stack.append((node, True))
        for child in children:
            if id(child) in open_:
                raise _invalid(f"line {child.start_mark.line + 1}",
                                  "a value refers to itself through an alias")
            if id(child) not in sizes:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def read_yaml(path: str | Path) -> object:
    """The parsed content of ``path``; an empty file is ``None``."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise _invalid("", "no such file") from None
    except OSError as exc:
        raise _invalid("", f"cannot read the file ({exc.strerror or exc.__class__.__name__})"
                          ) from None
    return parse_yaml(decode(data))


def decode(data: bytes) -> str:
    """``data`` as UTF-8 text; ``InvalidSpec("line N")`` at the first byte that is not."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise _invalid(f"line {line}", f"byte {data[exc.start]:#04x} at column {column} is "
                          "not UTF-8; save the file as UTF-8") from None


def parse_yaml(text: str) -> object:
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 (a SafeLoader subclass)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}" if mark is not None else ""
        problem = exc.problem or exc.context or "invalid YAML"
        raise _invalid(where, f"not valid YAML: {problem}") from None
    except yaml.YAMLError as exc:
        raise _invalid("", f"not valid YAML: {exc.__class__.__name__}") from None
    except RecursionError:  # PyYAML composes nested values recursively
        raise _invalid("", "values nested too deeply to read (a few hundred levels); a rota "
                           "file needs a handful") from None
    except InvalidSpec:
        raise
    except Exception as exc:  # noqa: BLE001 - a tagged mapping or list that is not one
        raise _invalid("", f"not valid YAML: cannot read a value: {exc}") from None


def json_ready(data: dict) -> dict:
    """``data`` as read from YAML, with the values JSON has no type for (dates) as their text:
    the body of a request, on either side of it (``rota submit``, ``rota.api.jobfile``)."""
    return json.loads(json.dumps(data, default=str))


def read_mapping(path: str | Path, what: str) -> dict:
    """A file whose top level must be a mapping (``what`` says which keys it expects)."""
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise _invalid("", f"expected a mapping at the top level with {what}, got "
                          f"{'an empty file' if data is None else type(data).__name__}")
    return data


def _invalid(field: str, reason: str) -> Exception:
    return InvalidSpec(field, reason)
