"""kubectl's ``-o jsonpath=TEMPLATE``: literal text, ``{EXPR}`` (values joined by a space),
``{range EXPR}...{end}`` (the inside once per value, relative to it), ``{"\\n"}`` string literals and
``{@}`` (the current value). The expressions themselves (``.items[*].metadata.name``,
``.items[?(@.status.phase=="Running")]``) are JSONPath, evaluated by ``python-jsonpath``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

# A JSON view (``views.View``) or any value inside one: the template walks whatever JSON holds.
JSONValue = Any
# A {...} group; quoted strings inside may hold braces.
_GROUP = re.compile(r"""\{((?:[^{}"']|"(?:\\.|[^"\\])*"|'[^']*')*)\}""")


class TemplateError(ValueError):
    """A template kubectl would refuse; the message says what is wrong."""


@dataclass
class _Range:
    expression: str
    body: list[_Node] = field(default_factory=list)


_Node = str | tuple[str, str] | _Range  # text, ("expr", expression), a range


def render(template: str, data: JSONValue) -> str:
    return "".join(_render(_parse(template), data))


def _parse(template: str) -> list[_Node]:
    """Text (str), expressions (``("expr", e)``) and ranges, nested."""
    root: list[_Node] = []
    stack: list[list[_Node]] = [root]
    position = 0
    for match in _GROUP.finditer(template):
        if match.start() > position:
            stack[-1].append(template[position : match.start()])
        position = match.end()
        inside = match.group(1).strip()
        if inside.startswith("range "):
            block = _Range(inside[len("range ") :].strip())
            stack[-1].append(block)
            stack.append(block.body)
        elif inside == "end":
            if len(stack) == 1:
                raise TemplateError(f"{{end}} without {{range}} in {template!r}")
            stack.pop()
        else:
            stack[-1].append(("expr", inside))
    if "{" in template[position:] or "}" in template[position:]:
        raise TemplateError(f"unbalanced braces in {template!r}")
    stack[-1].append(template[position:])
    if len(stack) != 1:
        raise TemplateError(f"{{range}} without {{end}} in {template!r}")
    return root


def _render(nodes: list[_Node], current: JSONValue) -> list[str]:
    out: list[str] = []
    for node in nodes:
        if isinstance(node, str):
            out.append(node)
        elif isinstance(node, _Range):
            for value in _values(node.expression, current):
                out += _render(node.body, value)
        else:
            out.append(" ".join(_text(v) for v in _values(node[1], current)))
    return out


def _values(expression: str, current: JSONValue) -> list[JSONValue]:
    if expression[:1] in ('"', "'"):
        return [expression[1:-1].encode().decode("unicode_escape")]
    if expression in ("@", "$"):
        return [current]
    import jsonpath  # noqa: PLC0415 - only -o jsonpath needs it, and it takes a while to import

    path = "$" + expression.removeprefix("@").removeprefix("$")
    try:
        return list(jsonpath.findall(path, current))
    except jsonpath.JSONPathError as exc:
        raise TemplateError(f"{expression!r}: {exc}") from None


def _text(value: JSONValue) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if value is None:
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)
