"""Replies that are not answers, said in one sentence: cut off at the token limit, empty, or with no option read.

Shared by a probe run's summary and the report's reply problems, so that both
name the likely cause in the same words.
"""

from __future__ import annotations

from cfkit.plural import agree, plural

__all__ = ["not_clean", "reply_trouble"]


def not_clean(truncated: int, empty: int, replies: int) -> bool:
    """Whether replies are complete but not clean: some cut off at the token limit, or most of them empty. A run
    so ends with exit status 1 (``probe run``, ``study run``), ``study status`` says so, and the report marks its
    rows; replies the parser merely found no option in are counted under ``Inv.`` and said, but are answers."""
    return truncated > 0 or empty * 2 > replies


#: How a line on replies cut off says to ask them again, for a run of 'cfkit probe run'.
RAISE_LIMIT = "Raise --max-tokens and run again"


def reply_trouble(what: str, n: int, invalid: int, empty: int, truncated: int, max_tokens: int | None,
                  command: str, *, replayed: bool = False, again: str = RAISE_LIMIT,
                  made_with: int | None = None) -> str | None:
    """One sentence naming the likely cause when replies were cut off at the token limit, or when most have no
    valid answer (empty replies, truncated replies, unparsed replies); None when neither.

    ``what`` names the model and suite (or condition), ``n`` the replies counted and ``command`` the one that
    shows them (``cfkit runs unparsed RUN``). ``replayed``: the replies were made elsewhere and read from a file
    (a replay or an imported run), so they were cut off when they were made, at that harness's limit, and
    ``max_tokens`` (the replaying run's own) is not said, but ``made_with`` is, the limit they were made with
    where it is known (a run imported from a cfkit export records it): only a new file made with a higher limit
    mends them.
    ``again``: what raises the limit and asks again where the line is shown (a study's runs: its file's
    ``max_tokens`` and ``cfkit study run``, :class:`cfkit.report.commands.Commands`).
    """
    if not n or (not truncated and invalid * 2 <= n):
        return None
    see = f"; '{command}' shows {agree(max(invalid, truncated), 'them')}" if command else ""
    if truncated and truncated * 2 >= invalid - empty or not invalid:
        lacking = (f"; {invalid} of {n} {agree(invalid, 'have')} no valid answer" if invalid
                   else "; each still gave a valid answer")
        if replayed:
            made = f" ({plural(made_with, 'token')})" if made_with else ""
            return (f"{what}: {truncated} of {plural(n, 'reply', 'replies')} "
                    f"{agree(truncated, 'were')} cut off at the token limit{made} "
                    f"when {agree(truncated, 'they')} {agree(truncated, 'were')} made, and a replay keeps "
                    f"{agree(truncated, 'them')} as recorded{lacking}. Raise the token limit in the harness that "
                    f"produced {agree(truncated, 'them')}, then replay or import its new file (--max-tokens changes nothing here){see}.")
        limit = f" ({plural(max_tokens, 'token')})" if max_tokens else ""
        return (f"{what}: {truncated} of {plural(n, 'reply', 'replies')} "
                f"{agree(truncated, 'were')} cut off at the token limit{limit}{lacking}. {again}{see}.")
    if empty * 2 >= invalid:
        return (f"{what}: {invalid} of {plural(n, 'reply', 'replies')} "
                f"{agree(invalid, 'have')} no valid answer, "
                f"{'and it is empty' if invalid == 1 else f'{empty} of them empty'}: no text came back "
                f"(check the server's chat template, or whether the model answers only in its reasoning){see}.")
    return (f"{what}: {invalid} of {plural(n, 'reply', 'replies')} "
            f"{agree(invalid, 'have')} no valid answer; the parser found no option in "
            f"{'it' if invalid == 1 else 'most of them'} "
            f"({empty} empty, {truncated} cut off at the token limit){see}.")
