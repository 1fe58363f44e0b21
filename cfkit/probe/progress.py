"""Where a run stands while it sends (the progress bar reads it), the budget that may stop it, and what one
invocation of a run did (its summary)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from cfkit.money import Cost

if TYPE_CHECKING:
    from cfkit.probe.plan import SkippedPair


@dataclass
class RunProgress:
    """Where a run stands, passed to the progress callback after every reply."""

    total: int
    done: int = 0  # replies in the store, including those kept from before
    sent: int = 0  # requests sent in this invocation
    errors: int = 0  # transport failures in this invocation
    cost_usd: float = 0.0  # spent in this invocation, as far as the server reported token counts
    priced: bool = False
    unpriced: int = 0  # replies of this invocation a priced backend could not cost (no usable token counts)
    concurrency: int | None = None  # requests allowed in flight now (it drops when the server is overloaded)
    elsewhere: int = 0  # requests another process running the same run answered meanwhile
    earlier: Cost = Cost()  # the run's cost as stored when this invocation began: its earlier invocations'
    abandoned: int = 0  # attempts given up after they were sent, in this invocation: cost_usd leaves them out
    waiting: str | None = None  # what the run waits for, in one line (requests another process holds the leases of)
    news: str | None = None  # good news, in one line (a replica back in use): said as a note, not a warning

    @property
    def spent_now(self) -> Cost:
        """What this invocation spent so far, as far as the server reported token counts."""
        return Cost(self.cost_usd if self.priced else None, self.unpriced, self.abandoned)  # their bound: at the end

    @property
    def run_cost(self) -> Cost:
        """The run's cost so far, its earlier invocations' and this one's: what 'cfkit runs show' gives."""
        return self.earlier + self.spent_now


class Budget:
    """Stops sending before what may be billed, plus the requests in flight, could pass ``limit``.

    A reply's cost is estimated as the most expensive one seen so far; the
    first request is sent alone to learn it. An attempt given up after it was
    sent (``Reply.abandoned``: a timeout, a connection dropped mid-reply) may
    be billed by a provider that bills abandoned generations: it counts as one
    more reply at that estimate, and a request in flight as many attempts as
    the most any request has taken so far.
    """

    def __init__(self, limit: float):
        self.limit = limit
        self.spent = 0.0  # what the replies reported
        self.largest = 0.0
        self.seen = 0
        self.in_flight = 0
        self.abandoned = 0  # attempts given up after they were sent
        self.most_attempts = 1  # the most attempts one request has taken so far

    @property
    def committed(self) -> float:
        """What may be billed so far: the replies' cost, and each abandoned attempt at the largest reply's."""
        return self.spent + self.abandoned * self.largest

    def admit(self) -> bool:
        if self.seen == 0:
            return self.in_flight == 0 and self.limit > 0
        return self.committed + (self.in_flight + 1) * self.most_attempts * self.largest <= self.limit

    def record(self, cost: float | None, abandoned: int = 0) -> None:
        """A reply came, costing ``cost``, after ``abandoned`` attempts given up once sent."""
        self.seen += 1
        if cost is not None:
            self.spent += cost
            self.largest = max(self.largest, cost)
        if abandoned:
            self.abandon(abandoned, replied=True)

    def abandon(self, attempts: int, *, replied: bool = False) -> None:
        """A request had ``attempts`` given up once sent (and failed, unless ``replied``)."""
        self.abandoned += attempts
        self.most_attempts = max(self.most_attempts, attempts + replied)


@dataclass(frozen=True)
class RunSummary:
    """What one invocation of a run did."""

    run_id: str
    model: str
    suite: str
    status: str  # done | incomplete | interrupted | failed | waiting (batches in flight)
    total: int
    kept: int  # replies already stored for identical requests
    from_cache: int  # answered from the response cache
    sent: int
    errors: int  # transport failures in this invocation
    invalid: int  # replies without a valid answer (parse errors, refusals), in the whole run
    cost_usd: float | None
    skipped: tuple[SkippedPair, ...]
    stopped: str | None = None  # why sending stopped early (budget)
    notes: tuple[str, ...] = ()
    failed: int = 0  # planned requests whose stored reply is a transport failure, in the whole run
    not_sent: int = 0  # planned requests with no stored reply at all (a budget stop, an interruption)
    first_failure: str | None = None  # what one failed request's server said, for the summary line
    unreviewed: tuple[str, ...] = ()  # pairs or cases asked with inputs no person reviewed (see ProbePlan)
    endpoint: str | None = None
    protocol: str | None = None
    elsewhere: int = 0  # requests another process running the same run answered while this one ran
    truncated: int = 0  # replies that stopped at the token limit (finish_reason "length"), in the whole run
    empty: int = 0  # replies with no text at all, in the whole run
    max_tokens: int | None = None  # the run's token limit
    cost_unreported: int = 0  # replies sent in this invocation whose cost is not known (cost_usd leaves them out)
    # Attempts of this invocation given up after they were sent (a provider may bill them: cost_usd leaves them
    # out), and what they may cost: each at the run's largest reply cost (None: no reply was priced).
    abandoned: int = 0
    abandoned_usd: float | None = None
    # The file the backend read its replies from (a replay), else None: ``sent`` then counts replies read from
    # it, as nothing went over a network.
    replayed_from: str | None = None

    @property
    def missing(self) -> int:
        """Planned requests without a stored reply: what keeps the run from being complete."""
        return self.failed + self.not_sent


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C or SIGTERM stopped an open run: ``summary`` is what it received and spent (its requests in flight as
    abandoned attempts: a provider may bill them), said before the exit status ``exit_code`` (130; 143: SIGTERM).
    Here, not in the runner, so that a command can catch it without loading the runner."""

    def __init__(self, summary: RunSummary, exit_code: int):
        super().__init__()
        self.summary, self.exit_code = summary, exit_code
