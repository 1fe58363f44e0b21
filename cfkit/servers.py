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
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from cfkit.plural import plural

#: Model ids and builds named in a line (the rest are counted).
NAMED = 4


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

    def lines(self, what: str, run_id: str | None = None) -> list[str]:
        """What to say of ``what`` (a model and suite, or a model's report row): a line when its replies came
        from several model ids (what, from where, how to see each reply's), one when from several builds."""
        see = f"'cfkit runs export {run_id} --format csv' shows each reply's server_model and endpoint" \
            if run_id else "'cfkit runs export RUN --format csv' shows each reply's server_model and endpoint"
        out = []
        if self.mixed_models:
            out.append(f"{what}: the replies came from servers that said they were {len(self.models)} different "
                       f"models: {self.models_phrase()}, so the answers are not one model's. Serve the same model "
                       f"at every endpoint; {see}; then 'cfkit runs rm {run_id or 'RUN'} --drop-cached' and ask "
                       "again (the cache would answer with the same replies).")
        if self.mixed_builds:
            out.append(f"{what}: the replies came from {len(self.builds)} server builds (system_fingerprint "
                       f"{self.builds_phrase()}); answers may differ between builds.")
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
