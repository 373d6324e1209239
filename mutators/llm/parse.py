"""Turning an LLM reply into a new module: a whole ```python module, or SEARCH/REPLACE edits.

Edits take the form (as in aider and AlphaEvolve-style systems)::

    <<<<<<< SEARCH
    lines of the current kernel, exactly
    =======
    their replacement
    >>>>>>> REPLACE

Each SEARCH text must occur exactly once in the current module (trailing whitespace aside).
Anything that cannot be applied raises `ReplyError` with the reason, which becomes a failed
proposal and is shown to the model in its next prompt.
"""

from __future__ import annotations

import re

from evo.contracts.syntax import parse_module

_EDIT = re.compile(r"<{5,9} ?SEARCH[^\n]*\n(.*?)\n?={5,9}[^\n]*\n(.*?)\n?>{5,9} ?REPLACE", re.DOTALL)
_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL)


class ReplyError(ValueError):
    """The reply cannot be turned into a module; the message says why."""


def _replace_once(source: str, search: str, replace: str, n: int) -> str:
    count = source.count(search)
    if count == 1:
        return source.replace(search, replace, 1)
    if count > 1:
        raise ReplyError(f"SEARCH block {n} matches {count} places in the current kernel; include more context")
    # Retry ignoring trailing whitespace on each line (models often drop or add it).
    lines = source.split("\n")
    want = [ln.rstrip() for ln in search.strip("\n").split("\n")]
    starts = [i for i in range(len(lines) - len(want) + 1)
              if [ln.rstrip() for ln in lines[i:i + len(want)]] == want]
    if len(starts) != 1:
        first = want[0].strip() if want else ""
        what = "does not match" if not starts else f"matches {len(starts)} places in"
        raise ReplyError(f"SEARCH block {n} {what} the current kernel (first line: {first[:80]!r})")
    i = starts[0]
    return "\n".join([*lines[:i], *replace.strip("\n").split("\n"), *lines[i + len(want):]])


def apply_edits(source: str, reply: str) -> tuple[str, int]:
    """`source` with the reply's SEARCH/REPLACE blocks applied in order, and how many there were."""
    blocks = _EDIT.findall(reply)
    for n, (search, replace) in enumerate(blocks, 1):
        if not search.strip():
            raise ReplyError(f"SEARCH block {n} is empty")
        source = _replace_once(source, search, replace, n)
    return source, len(blocks)


def extract_module(reply: str) -> str | None:
    """The last fenced Python block that defines launch (a whole module), None when there is none."""
    blocks = [b for b in _FENCE.findall(reply) if "def launch" in b]
    return blocks[-1].strip("\n") + "\n" if blocks else None


def apply_reply(current: str, reply: str) -> tuple[str, str]:
    """The new module source and how it was obtained ("module" or "N edits")."""
    if _EDIT.search(reply):
        new, n = apply_edits(current, reply)
        how = f"{n} edit{'s' if n != 1 else ''}"
    else:
        module = extract_module(reply)
        if module is None:
            if _FENCE.search(reply):
                raise ReplyError("the reply's code block is not a whole module (it defines no launch) and "
                                 "there are no SEARCH/REPLACE blocks")
            raise ReplyError("the reply has neither a ```python module nor SEARCH/REPLACE blocks")
        new, how = module, "module"
    try:
        parse_module(new)
    except SyntaxError as e:
        raise ReplyError(f"the new module does not parse: line {e.lineno}: {e.msg}") from None
    if new.strip() == current.strip():
        raise ReplyError("the reply repeats the current kernel unchanged")
    return new, how
