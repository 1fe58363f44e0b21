"""Amounts of money in messages and tables (enough digits that a small cost is not shown as zero), and a reply's
cost from the token counts its server reported, the input read from a prompt cache at its own price."""

from __future__ import annotations

import math
from dataclasses import dataclass

from cfkit.plural import plural


def usd(value: float) -> str:
    """``$12.34`` for a dollar or more; below that two significant digits (``$0.50``, ``$0.012``, ``$0.00015``)."""
    if value < 0:
        return "-" + usd(-value)
    if value == 0:
        return "$0.00"
    if value >= 1:
        return f"${value:,.2f}"
    digits = max(2, 1 - math.floor(math.log10(value)))
    return f"${value:.{digits}f}"


#: The words every note on input priced at the full input rate holds (cached input without a price of its own, a
#: cached count that cannot be used): ``cfkit runs show`` finds a run's such notes by them.
AT_INPUT_RATE = "priced at the full input rate"
#: The words every note on input priced at a rate cfkit assumed holds (Anthropic's cache writes without a price of
#: their own, or without their split by cache lifetime); ``cfkit runs show`` finds these too.
AT_ASSUMED_RATE = "priced at a rate cfkit assumed"
#: What a note on how a run's cost was worked out holds: one of these.
COST_NOTE_WORDS = (AT_INPUT_RATE, AT_ASSUMED_RATE)


def cost_notes(notes: object) -> list[str]:
    """The notes among ``notes`` (a run's ``backend_notes``) on how its cost was worked out: kept with the run
    when it is resumed, since its cost still holds the replies they were said of."""
    return [n for n in notes if isinstance(n, str) and any(w in n for w in COST_NOTE_WORDS)] \
        if isinstance(notes, (list, tuple)) else []


def token_cost(tokens_in: object, tokens_out: object, price_in: float, price_out: float,
               cached: int = 0, price_cached: float | None = None) -> float | None:
    """USD for the input and output token counts a server reported, at USD per million tokens; None unless both
    counts are there and are whole numbers of zero or more (a missing, negative or text count is not a cost).

    ``cached`` is how many of ``tokens_in`` the server read from its prompt cache (a count the caller checked with
    :func:`cached_count`); they cost ``price_cached`` a million when it is given, and ``price_in`` otherwise."""
    if not (is_count(tokens_in) and is_count(tokens_out)):
        return None
    if cached and price_cached is not None:
        return ((tokens_in - cached) * price_in + cached * price_cached + tokens_out * price_out) / 1e6
    return (tokens_in * price_in + tokens_out * price_out) / 1e6


def cached_count(n: object, within: object) -> int | None:
    """``n`` as a count of cached input tokens, of the ``within`` input tokens a reply reported (``within`` None:
    no bound, for a provider that counts cached input beside the rest): 0 when the reply says nothing of a cache
    (``n`` None), None when its count cannot be used (not a whole number of zero or more, or more than
    ``within``), which the caller prices and says as it must."""
    if n is None:
        return 0
    if is_count(n) and (not is_count(within) or n <= within):
        return int(n)
    return None


def spent(known: float | None, unreported: int, *, short: bool = False) -> str:
    """A cost of which ``unreported`` replies' part is not known: ``$0.20`` when every part is, else
    ``at least $0.20: 3 replies without a reported cost`` (``short``: ``at least $0.20``, for a table's cell); "—"
    when nothing is priced (``known`` None and every reply reported). What ``probe run``, ``cfkit runs list/show``,
    ``study status`` and the view's runs page print (:meth:`Cost.shown` adds what abandoned attempts may cost)."""
    if known is None and not unreported:
        return "—"
    known = known or 0.0
    if not unreported:
        return usd(known)
    if short:
        return f"at least {usd(known)}"
    return f"at least {usd(known)}: {plural(unreported, 'reply', 'replies')} without a reported cost"


def abandoned_usd(attempts: int, largest: float | None) -> float | None:
    """What ``attempts`` given up after they were sent may have been billed: each at ``largest``, the largest reply
    cost seen (an abandoned generation is billed, by a provider that bills it, at most about as a whole reply);
    None when no reply was priced to go by."""
    return attempts * largest if attempts and largest else None


def abandoned_note(attempts: int, bound: float | None, *, short: bool = False, priced: bool = True) -> str:
    """What follows a cost when ``attempts`` were given up after they were sent, which may have cost ``bound``
    (:func:`abandoned_usd`): ``; 8 abandoned attempts may be billed on top: up to ~$0.96`` (``short``:
    `` + up to ~$0.96 abandoned``); "" for none. ``priced`` False (a run without prices): the count alone,
    ``; 8 abandoned attempts may be billed`` (``short``: `` + 8 abandoned``), after :data:`NO_PRICES`."""
    if not attempts:
        return ""
    if short:
        return f" + up to ~{usd(bound)} abandoned" if bound is not None else f" + {attempts} abandoned"
    if not priced:
        return f"; {plural(attempts, 'abandoned attempt')} may be billed"
    what = f"{plural(attempts, 'abandoned attempt')} may be billed on top"
    return f"; {what}: up to ~{usd(bound)}" if bound is not None else f"; {what} (no priced reply to estimate them by)"


#: What stands for the cost of a run without prices whose abandoned attempts are still said (:meth:`Cost.shown`).
NO_PRICES = "no prices known"


@dataclass(frozen=True)
class Cost:
    """What a run cost as far as known: ``usd`` of its replies that carry a cost (None: nothing priced), and the
    ``unreported`` replies of a priced run whose cost is not known (``usd`` is then at least what it spent)."""

    usd: float | None = None
    unreported: int = 0
    # Attempts given up after they were sent (a provider may bill them: ``usd`` leaves them out), and what they may
    # have cost (:func:`abandoned_usd`; None: no priced reply to estimate them by).
    abandoned: int = 0
    abandoned_usd: float | None = None

    @classmethod
    def of_run(cls, record) -> Cost:
        """A stored run's total cost (a :class:`cfkit.store.runs.RunRecord`), with its abandoned attempts, as
        ``cfkit runs show`` gives it: $0.00 so far for a priced run no reply of which carries a cost (stopped or
        failed before one came: its stored ``cost_usd`` may be NULL), not "no cost"."""
        known = record.cost_usd if record.cost_usd is not None else 0.0 if record.priced else None
        return cls(known, record.cost_unreported, record.abandoned_attempts,
                   abandoned_usd(record.abandoned_attempts, record.largest_reply_usd))

    @property
    def priced(self) -> bool:
        return self.usd is not None or self.unreported > 0

    def __add__(self, other: Cost) -> Cost:
        if not (self.priced or other.priced):  # no prices: the abandoned attempts are still counted
            return Cost(abandoned=self.abandoned + other.abandoned)
        bounds = [c.abandoned_usd for c in (self, other) if c.abandoned]
        return Cost((self.usd or 0.0) + (other.usd or 0.0), self.unreported + other.unreported,
                    self.abandoned + other.abandoned, None if None in bounds or not bounds else sum(bounds))

    def to_dict(self) -> dict[str, object]:
        """For ``--json``: the fields, and the cost as :meth:`shown` says it (None: nothing to say)."""
        return {"usd": self.usd, "unreported": self.unreported, "abandoned_attempts": self.abandoned,
                "abandoned_usd": self.abandoned_usd, "shown": self.shown() or None}

    def shown(self, *, short: bool = False) -> str:
        """As :func:`spent` says it, with what abandoned attempts may add; without prices, only the abandoned
        attempts (``no prices known; 2 abandoned attempts may be billed``, short ``no prices known + 2
        abandoned``), and "" when there are none (for a table's cell)."""
        if not self.priced:
            return NO_PRICES + abandoned_note(self.abandoned, None, short=short, priced=False) \
                if self.abandoned else ""
        return spent(self.usd, self.unreported, short=short) + abandoned_note(self.abandoned, self.abandoned_usd,
                                                                              short=short)


def is_count(n: object) -> bool:
    """Whether ``n`` is a token count: a whole, finite number of zero or more (not a bool, not text)."""
    return isinstance(n, (int, float)) and not isinstance(n, bool) and math.isfinite(n) and n >= 0 and n == int(n)
