"""One value per option: an option that takes one value, given twice, is refused instead of keeping the last.

Click keeps the last of a repeated single-value option without a word, so
``probe run -m a -m b`` used to run ``b`` alone. Every command cfkit
registers goes through :func:`refuse_repeats`, which reads the command line
once with the command's own parser before the real parse and refuses any
option that is not ``multiple`` (nor a counter) when it occurs more than once.
An option may carry a ``repeat_hint`` attribute: the sentence that says what
to do instead (``probe run -m`` points to ``cfkit study``).
"""

from __future__ import annotations

import types

import click

_MARK = "_cfkit_refuses_repeats"


def repeated_options(command: click.Command, ctx: click.Context, args: list[str]) -> list[click.Option]:
    """The single-value options of ``command`` that ``args`` give more than once (in the order first seen)."""
    try:
        _, _, order = command.make_parser(ctx).parse_args(args=list(args))
    except click.UsageError:
        return []  # the real parse says what is wrong
    seen: dict[str, int] = {}
    for param in order:
        if isinstance(param, click.Option) and not param.multiple and not param.count and not param.is_eager:
            seen[param.name] = seen.get(param.name, 0) + 1
    by_name = {p.name: p for p in command.params if isinstance(p, click.Option)}
    return [by_name[name] for name, n in seen.items() if n > 1]


def refusal(param: click.Option) -> str:
    """The one line that refuses ``param`` given twice."""
    names = "/".join(param.opts + param.secondary_opts)
    hint = getattr(param, "repeat_hint", None) or ("give it once." if param.is_flag else
                                                   "it takes one value; give it once.")
    return f"{names} given more than once; {hint}"


def refuse_repeats(command: click.Command) -> click.Command:
    """Make ``command`` refuse a repeated single-value option (see the module docstring); idempotent."""
    if getattr(command, _MARK, False):
        return command
    parse = command.parse_args

    def parse_args(self: click.Command, ctx: click.Context, args: list[str]) -> list[str]:
        if not ctx.resilient_parsing:
            repeated = repeated_options(self, ctx, args)
            if repeated:
                raise click.UsageError(refusal(repeated[0]), ctx=ctx)
        return parse(ctx, args)

    command.parse_args = types.MethodType(parse_args, command)  # type: ignore[method-assign]
    setattr(command, _MARK, True)
    return command
