"""Wording of user-facing messages."""

from __future__ import annotations


def with_article(noun: str) -> str:
    """``noun`` after "a" or "an" ("an embedding checkpoint", "a gnn checkpoint").

    Decided on the first letter (a vowel takes "an"): right for the names messages put after an
    article here (stage names, file kinds, type names); "a unit"-like words are not among them.
    """
    return f"{'an' if noun[:1].lower() in 'aeiou' and noun[:1] else 'a'} {noun}"
