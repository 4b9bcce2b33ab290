"""Help texts from docstrings, without their reStructuredText markup.

    ``code``  -> code        :mod:`trkx.x` -> trkx.x        :class:`~a.B` -> B
"""

from __future__ import annotations

import re

_ROLE = re.compile(r":(?:mod|func|class|meth|attr|data|obj):`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


def plain(text: str) -> str:
    """``text`` with Sphinx roles and double-backtick literals reduced to their contents."""
    text = _ROLE.sub(lambda m: m.group(1), text)
    return _LITERAL.sub(lambda m: m.group(1), text)


def description(doc: str | None) -> str:
    """The body of a command module's docstring (after its first paragraph), as plain text."""
    return plain((doc or "").split("\n\n", 1)[-1])
