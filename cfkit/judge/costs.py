"""What a judge model's replies cost: what one reply's label or answer keeps, what this invocation spent, and what
the stored ones of a judge cost, said in one line with what the sum leaves out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from cfkit.store.records.judge import JudgeSpending

#: Where a judge's prices are given, said when it has none.
PRICES_HINT = "give the judge's prices: -o price_in=… -o price_out=…, or cfkit.toml [probe.prices]"


def priced_judge(ws, judge: str, options: dict, words=None):
    """The judge's backend, priced as 'probe run' prices a model: -o price_in/price_out, cfkit.toml
    [probe.prices], or the built-in estimate for OpenAI's own API. Built with ``words`` (default
    :data:`cfkit.option_words.JUDGE`: the judge and drafting commands' ``--max-tokens`` and ``-o KEY=VALUE``), so
    that its hints name what the command takes; a token limit given as ``-o`` is refused (:func:`token_option`)."""
    from cfkit.backends import BackendContext, load_backend, split_model
    from cfkit.option_words import JUDGE
    from cfkit.options import option_names
    from cfkit.probe.prices import resolve_prices

    words = words or JUDGE
    token_option(options, words)
    context = BackendContext(words=words)
    backend = load_backend(judge, options, context=context)
    if not {"price_in", "price_out"} <= option_names(type(backend)):
        return backend
    prices = resolve_prices(judge, split_model(judge)[1], backend.endpoint, options, ws.config.probe.prices)
    if prices is None or options.get("price_in") is not None:  # none known, or given (the backend has them)
        return backend
    return load_backend(judge, {**options, **prices.options()}, context=context)


#: The ``-o`` keys a user may try for the token limit of a reply, which these commands take as ``--max-tokens``.
TOKEN_KEYS = ("max_tokens", "max_completion_tokens")


def token_option(options: dict, words=None) -> None:
    """Refuse a reply's token limit given as ``-o max_tokens=N`` or ``-o max_completion_tokens=N`` to a judge or
    drafting command, naming the option the command takes for it (``words``; it was refused as an unknown option of
    the backend, with a list of the others, which never named ``--max-tokens``)."""
    from cfkit.errors import OptionError
    from cfkit.option_words import JUDGE

    for key in TOKEN_KEYS:
        if key in options:
            raise OptionError(f"-o {key}={options[key]}: the token limit of each reply is set here with "
                              f"{(words or JUDGE).of('max_tokens')} {options[key]}, not as a backend option.")


def reply_cost(reply, priced: bool) -> dict[str, Any]:
    """What one reply cost, as a label or a screening answer keeps it (:class:`cfkit.store.prelabels.Prelabel`,
    :class:`cfkit.store.screens.ScreenAnswer`)."""
    from cfkit.money import is_count

    usage = reply.usage or {}
    tokens = [usage.get(a, usage.get(b)) for a, b in (("prompt_tokens", "input_tokens"),
                                                        ("completion_tokens", "output_tokens"))]
    tokens_in, tokens_out = (int(n) if is_count(n) else None for n in tokens)
    return {"replies": 1, "priced": priced, "cost_usd": reply.cost_usd if priced else None,
            "unreported": int(priced and reply.cost_usd is None), "tokens_in": tokens_in, "tokens_out": tokens_out,
            "cut_off": int(reply.truncated), "abandoned": reply.abandoned}


def unread_cost(reply, abandoned: int, priced: bool) -> dict[str, Any]:
    """What a reply that was not read (``reply``, cut off at the token limit) or a lost request's ``abandoned``
    attempts (``reply`` None) cost, as a pending label or answer keeps it: never an answer, asked again."""
    if reply is not None:
        return reply_cost(reply, priced) | {"pending": True}
    return {"replies": 0, "priced": priced, "cost_usd": None, "unreported": 0, "tokens_in": 0, "tokens_out": 0,
            "cut_off": 0, "abandoned": abandoned, "pending": True}


@dataclass
class Spent:
    """What one invocation's replies cost, as they come (``came``), a cut-off one too (it was paid for)."""

    priced: bool = False  # the judge's backend prices its replies
    replies: int = 0
    cost_usd: float | None = None  # of the priced replies; None when none was priced
    unpriced: int = 0  # replies of a priced backend that reported no cost
    # Attempts given up after they were sent (a timeout, a connection dropped mid-reply), before a reply came or of a
    # request that failed: a provider may bill them, ``cost_usd`` leaves them out (as a probe run counts them).
    abandoned: int = 0
    largest: float | None = None  # the largest reply cost seen: what each abandoned attempt may have cost at most
    # What stopped the asking before its end (a key refused, a server that kept failing, Ctrl-C), returned by
    # :func:`cfkit.judge.questions.ask_in_turn`: the command raises it once it has said what was done and spent.
    stop: BaseException | None = None
    untried: int = 0  # requests not asked because the asking stopped

    def not_asked(self, job: object = None) -> None:
        self.untried += 1

    def came(self, reply) -> None:
        self.replies += 1
        self.gave_up(reply.abandoned)
        if reply.cost_usd is None:
            self.unpriced += self.priced
        else:
            self.cost_usd = (self.cost_usd or 0.0) + reply.cost_usd
            self.largest = max(self.largest or 0.0, reply.cost_usd)

    def gave_up(self, attempts: int) -> None:
        self.abandoned += attempts

    @property
    def abandoned_usd(self) -> float | None:
        """What the abandoned attempts may have cost (:func:`cfkit.money.abandoned_usd`); None: none, or no priced
        reply to estimate them by."""
        from cfkit.money import abandoned_usd

        return abandoned_usd(self.abandoned, self.largest)

    def to_dict(self) -> dict[str, Any]:
        """As ``--json`` gives it: the sums, and the abandoned attempts with what they may have cost."""
        return {"replies": self.replies, "priced": self.priced, "cost_usd": self.cost_usd,
                "replies_without_cost": self.unpriced, "abandoned_attempts": self.abandoned,
                "abandoned_usd": self.abandoned_usd, "stopped": self.stopped_why, "not_asked": self.untried}

    @property
    def stopped_why(self) -> str | None:
        """Why the asking stopped before its end, as the command's last line says it; None when it did not."""
        if self.stop is None:
            return None
        return str(self.stop) if not isinstance(self.stop, KeyboardInterrupt) else "interrupted"

    def said(self, prices_hint: str = PRICES_HINT) -> str:
        """``N replies, cost $X``, as ``probe run`` says it, with what abandoned attempts may add; or that the model is
        not priced, and ``prices_hint``: where its prices are given."""
        from cfkit.money import abandoned_note, spent
        from cfkit.plural import plural

        replies = plural(self.replies, "reply", "replies")
        if not self.priced:
            said = replies if not (self.replies or self.abandoned) else f"{replies}, cost not known ({prices_hint})"
        else:
            said = f"{replies}, cost {spent(self.cost_usd, self.unpriced)}"
        return said + abandoned_note(self.abandoned, self.abandoned_usd)


def _not_counted(spend: JudgeSpending, unit: str = "label") -> list[str]:
    """What a judge's cost leaves out (:func:`spending_said`)."""
    from cfkit.plural import agree, plural

    left_out = []
    if spend.priced and spend.unpriced:
        left_out.append(f"{plural(spend.unpriced, unit)} asked while the judge was not priced")
    if spend.not_kept:
        left_out.append(f"{plural(spend.not_kept, unit)} stored before cfkit kept what the judge cost")
    if spend.cut_off_not_kept:
        left_out.append(f"replies cut off at the token limit and abandoned attempts before "
                        f"{plural(spend.cut_off_not_kept, unit)} "
                        f"{agree(spend.cut_off_not_kept, 'were')} stored (cfkit did not keep them then)")
    return left_out


def spending_said(subject: str, spend: JudgeSpending, unit: str = "label") -> str:
    """What ``subject`` ("judge J on audit A") cost, in one line that says what it leaves out: 'audit status' and
    'audit agreement --judge' say it of a judge's labels, 'edits screen' of its answers (``unit``). Replies cut off
    at the token limit are counted (paid for, never read) and said; abandoned attempts are said as ``probe run``
    says them, with what they may add."""
    from cfkit.money import abandoned_note, spent
    from cfkit.plural import plural

    said = (f"{subject}: {plural(spend.labels, unit)}"
            + (f" from {plural(spend.replies, 'reply', 'replies')}" if spend.replies else "")
            + (f" ({spend.cut_off} cut off at the token limit, not read)" if spend.cut_off else ""))
    if spend.replies or spend.abandoned:
        if spend.priced:
            said += f", cost {spent(spend.cost_usd, spend.unreported)}"
        else:
            said += f", cost not known: the judge was not priced ({PRICES_HINT})"
        if spend.tokens_in is not None and spend.tokens_out is not None:
            said += f" ({plural(spend.tokens_in, 'token', spec=',')} in, {spend.tokens_out:,} out)"
        else:
            said += " (some replies reported no token counts)"
        said += abandoned_note(spend.abandoned, spend.abandoned_usd)
    left_out = _not_counted(spend, unit)
    return said + ("; not counted: " + ", ".join(left_out) if left_out else "")


def spending_dict(spend: JudgeSpending, unit: str = "label") -> dict[str, Any]:
    """The same, as ``--json`` gives it: the sums, and ``not_counted``, what they leave out."""
    from dataclasses import asdict

    return asdict(spend) | {"not_counted": _not_counted(spend, unit)}
