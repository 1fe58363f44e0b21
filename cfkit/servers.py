"""Which servers answered: one model and one build, or several.

Every reply records the model id the server said answered (``server_model``),
its build fingerprint (``system_fingerprint``) and, with replicas, the endpoint
that answered. Replicas are checked at start-up (``GET /models``), but a
server can answer as another model than it lists, be restarted on other
weights mid-run, or a run can be continued later against other servers; and a
report's row joins a model's runs of several suites. Answers that came from
more than one model id are not one model's answers: ``probe run`` and ``study
run`` say so and exit 1, ``study status`` and ``runs show`` say so, and the
report adds a note. Several builds of one model are said, not refused (a
provider's fingerprint may change within a run).

A server can also answer every request as one model that is not the one asked
(it ignores the name and serves whatever it loaded). Names are not compared
strictly: providers answer dated snapshots of an alias, servers answer the path
they loaded the weights from. :func:`plainly_other` is the conservative rule;
when every reply named one model that is plainly not the one asked, the same
commands and the report say so in a note. It is a note, not a failure: an
alias a proxy maps to a deployment of another name is legitimate and reads the
same.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from cfkit.plural import plural

#: Model ids and builds named in a line (the rest are counted).
NAMED = 4

#: What ends a name that stands for a newer or dated snapshot: '-latest', a date ('-2024-08-06', '-20241022',
#: '@20241022') or a month and year ('-2411', '-0125'), one or several.
_SNAPSHOT = re.compile(r"(?:[-_@:](?:latest|\d{4}-\d{2}-\d{2}|\d{8}|\d{4}))+$")


def asked_name(model: str, replayed: bool = False) -> str | None:
    """The model name a run asked its servers for: ``'openai:gpt-4o'`` -> ``'gpt-4o'``; None for a run whose
    replies were read from a file made elsewhere (a replay, an import: its model may be a label given then)."""
    return None if replayed else model.partition(":")[2] or model


def _last(name: str) -> str:
    return name.strip().rstrip("/").rsplit("/", 1)[-1].lower()


def plainly_other(asked: str, named: str) -> bool:
    """Whether a reply naming model ``named`` is plainly not from model ``asked``. Both are lower-cased and cut to
    their last path component (a server may answer the path it loaded the weights from); they are the same model
    when either starts with the other (a dated snapshot of an alias, an alias of a snapshot) or when ``asked``
    without a trailing '-latest' or date (:data:`_SNAPSHOT`) starts ``named``."""
    a, n = _last(asked), _last(named)
    if not a or not n or a.startswith(n) or n.startswith(a):
        return False
    return not n.startswith(_SNAPSHOT.sub("", a))


@dataclass(frozen=True)
class Servers:
    """The replies that came back, by the model id and the build the server reported (those it reported)."""

    models: dict[str, int]  # server model id -> replies
    builds: dict[str, int]  # system_fingerprint -> replies
    endpoints: dict[str, tuple[str, ...]]  # server model id -> the endpoints that answered as it (replicas)

    @property
    def mixed_models(self) -> bool:
        return len(self.models) > 1

    @property
    def mixed_builds(self) -> bool:
        return len(self.builds) > 1

    def other_than(self, asked: str | None) -> str | None:
        """The one model id every reply named, when it is plainly not ``asked`` (:func:`plainly_other`); else
        None (no name asked or reported, or several reported: :attr:`mixed_models` says those)."""
        if not asked or len(self.models) != 1:
            return None
        (named,) = self.models
        return named if plainly_other(asked, named) else None

    def models_phrase(self) -> str:
        """``'a' (5 replies, from URL), 'b' (2 replies, from URL)``: each model id, most replies first."""
        parts = []
        for model, n in _most_first(self.models)[:NAMED]:
            where = self.endpoints.get(model) or ()
            parts.append(f"'{model}' ({plural(n, 'reply', 'replies')}{', from ' + ', '.join(where) if where else ''})")
        return ", ".join(parts) + (f" and {len(self.models) - NAMED} more" if len(self.models) > NAMED else "")

    def builds_phrase(self) -> str:
        parts = [f"{build} ({n})" for build, n in _most_first(self.builds)[:NAMED]]
        return ", ".join(parts) + (f" and {len(self.builds) - NAMED} more" if len(self.builds) > NAMED else "")

    def lines(self, what: str, run_id: str | None = None, asked: str | None = None) -> list[str]:
        """What to say of ``what`` (a model and suite, or a model's report row): a line when its replies came
        from several model ids (what, from where, how to see each reply's), one when from several builds, and a
        note when every reply named one model plainly not ``asked`` (the name sent: :func:`asked_name`)."""
        see = f"'cfkit runs export {run_id} --format csv' shows each reply's server_model and endpoint" \
            if run_id else "'cfkit runs export RUN --format csv' shows each reply's server_model and endpoint"
        out = []
        if self.mixed_models:
            out.append(f"{what}: the replies came from servers that said they were "
                       f"{plural(len(self.models), 'different model')}: {self.models_phrase()}, so the answers are not one model's. Serve the same model "
                       f"at every endpoint; {see}; then 'cfkit runs rm {run_id or 'RUN'} --drop-cached' and ask "
                       "again (the cache would answer with the same replies).")
        if self.mixed_builds:
            out.append(f"{what}: the replies came from {plural(len(self.builds), 'server build')} (system_fingerprint "
                       f"{self.builds_phrase()}); answers may differ between builds.")
        other = self.other_than(asked)
        if other is not None:
            whose = f"run {run_id}" if run_id else "its runs"
            out.append(f"{what}: every reply of {whose} named model '{other}', not '{asked}' as asked, so the "
                       f"answers may be another model's: check --base-url and what the server loaded.")
        return out


def servers_of(rows: Iterable[tuple[str | None, str | None, str | None, int]]) -> Servers:
    """The :class:`Servers` of replies given as (server model id, fingerprint, endpoint, how many) rows."""
    models: dict[str, int] = {}
    builds: dict[str, int] = {}
    endpoints: dict[str, dict[str, None]] = {}
    for model, build, endpoint, n in rows:
        if model:
            models[model] = models.get(model, 0) + n
            if endpoint:
                endpoints.setdefault(model, {})[endpoint] = None
        if build:
            builds[build] = builds.get(build, 0) + n
    return Servers(models, builds, {m: tuple(sorted(e)) for m, e in endpoints.items()})


def _most_first(counts: dict[str, int]) -> list[tuple[str, int]]:
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
