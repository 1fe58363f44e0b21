"""``cfkit study validate``: every run's start-up checks, every endpoint reached, every file named present, and
what the study would ask (and cost, where prices are known); nothing is sent to a model or written.

An endpoint is reached with one ``GET {url}/models`` carrying no key (a server
that answers at all, even 401, is reachable; a key is never sent here). Its
answer is read for each model by the reading ``probe run`` makes of it
(:func:`cfkit.backends.model_lists.read_listing`), and said in its words. When
it answers with its list of models, a model the study asks of it that is not
in the list (or an empty list) is a problem of each of its runs (a typo, or the
wrong server), named with the models it lists, before a request is sent, as
``probe run --batch`` refuses it. A model with replicas (several endpoints)
needs one of them to answer and list it: the others (not listing it, answering
without a model list or with an error status) are left out of its runs, as
``probe run`` leaves them out, and said in a note, not a problem (an endpoint no
other model needs alone). A 401 or 403 says nothing of the model here (no key
was sent): such an endpoint is taken as serving it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cfkit.errors import CfkitError
from cfkit.study.file import Study
from cfkit.study.jobs import model_options, replicas_refused, selection_of, study_runs, words_of
from cfkit.workspace import Workspace

#: Seconds to wait for an endpoint's answer. The endpoints are reached all at once (at most REACH_AT_ONCE), so a
#: study whose endpoints do not answer waits this long, not this long for each of them.
REACH_S = 5.0
REACH_AT_ONCE = 16


@dataclass(frozen=True)
class RunCheck:
    model: str
    display: str
    suite: str
    problem: str | None
    requests: int = 0
    to_send: int = 0  # after what is stored and cached
    cost_max: float | None = None  # USD, at most, for what would be sent


@dataclass
class StudyCheck:
    runs: list[RunCheck]
    endpoints: dict[str, str | None] = field(default_factory=dict)  # name -> problem, or None when reachable
    study: list[str] = field(default_factory=list)  # problems of the study as a whole (two models shown as one)
    notes: list[str] = field(default_factory=list)  # replicas its runs would leave out
    spared: set[str] = field(default_factory=set)  # endpoints down, but every model asking them has another

    @property
    def problems(self) -> list[str]:
        found = self.study + [f"endpoint {n}: {p}" for n, p in self.endpoints.items() if p and n not in self.spared]
        return found + [f"{r.display} on {r.suite}: {r.problem}" for r in self.runs if r.problem]


@dataclass(frozen=True)
class Answer:
    """An endpoint's answer to ``GET /models`` (read for each model by :func:`~cfkit.backends.model_lists.read_listing`)."""

    status: int
    body: bytes


#: Where a study's endpoint's url is fixed, in the words for an endpoint that does not answer.
STUDY_URL = "the endpoint's url in the study file"

#: Statuses that say nothing of the models an endpoint serves when no key is sent (a key is never sent here).
NO_KEY = (401, 403)


def reach(url: str, timeout: float = REACH_S) -> tuple[str | None, Answer | None]:
    """(None when ``url`` answers ``GET /models`` with any HTTP status, else why not, in the words ``probe run``
    uses for the same failure (:func:`cfkit.backends.no_answer.no_answer`); its answer, None when it gave none)."""
    import urllib.error
    import urllib.request

    target = url.rstrip("/") + "/models"
    try:
        with urllib.request.urlopen(urllib.request.Request(target, method="GET"), timeout=timeout) as answer:
            return None, Answer(answer.status, answer.read())
    except urllib.error.HTTPError as exc:  # it answered
        try:
            body = exc.read()
        except OSError:
            body = b""
        return None, Answer(exc.code, body)
    except (urllib.error.URLError, OSError, ValueError) as exc:  # no answer at all: said as probe run says it
        from cfkit.backends.no_answer import kind_of, no_answer
        from cfkit.endpoints import redact_url

        detail = str(exc.reason) if isinstance(exc, urllib.error.URLError) else str(exc)
        return no_answer(redact_url(url.rstrip("/")), kind_of(exc), detail=detail, seconds=timeout,
                         url=STUDY_URL), None


def why_not(study: Study, name: str, endpoint: str, answers: dict[str, Answer | None]) -> tuple[str | None, bool]:
    """(Why ``endpoint`` cannot answer for model ``name``, in the words ``probe run`` uses for the same answer, or
    None; whether that is certain: it answered a model list without the model, as ``probe run --batch`` refuses)."""
    from cfkit.backends.model_lists import read_listing
    from cfkit.servers import asked_name

    answer = answers.get(endpoint)
    if answer is None or answer.status in NO_KEY:
        return None, False
    reading = read_listing(answer.status, answer.body, asked_name(study.models[name].model) or name)
    return reading.why, reading.listed


def not_listed(study: Study, name: str, answers: dict[str, Answer | None]) -> str | None:
    """Why model ``name`` would not be answered by an endpoint of it that listed its models without it, else
    None (a provider may list its models as ``models/NAME``)."""
    from cfkit.servers import asked_name

    asked = asked_name(study.models[name].model) or name
    for endpoint, settings in study.endpoints_of(name):
        why, certain = why_not(study, name, endpoint, answers)
        if why is None or not certain:
            continue
        where = endpoint if endpoint == settings.url else f"{endpoint} ({settings.url})"
        return (f"endpoint {where} cannot answer for '{asked}' ({why}); fix the model's name or its endpoint, or "
                "load the model on that server first")
    return None


@dataclass
class EndpointCheck:
    """Every endpoint of a study reached once (:func:`reach`): what each said, and which models cannot be asked."""

    endpoints: dict[str, str | None] = field(default_factory=dict)  # name -> problem, or None when reachable
    answers: dict[str, Answer | None] = field(default_factory=dict)  # name -> its answer to GET /models
    notes: list[str] = field(default_factory=list)  # replicas its runs would leave out
    spared: set[str] = field(default_factory=set)  # endpoints down, but every model asking them has another
    replicated: set[str] = field(default_factory=set)  # models one of whose replicas answers and lists them

    def refused(self, study: Study, name: str) -> str | None:
        """Why model ``name``'s runs cannot be asked where the study sends them (its endpoint does not answer, or
        does not list it), or None."""
        if name in self.replicated:
            return None
        ends = [e for e, _ in study.endpoints_of(name)]
        if len(ends) > 1:  # replicas, none of which would answer (check_endpoints): as probe run refuses them
            from cfkit.servers import asked_name

            why = [(e, self.endpoints.get(e) or why_not(study, name, e, self.answers)[0]) for e in ends]
            if not all(w for _, w in why):
                return None  # not reached (a model check_endpoints was not asked about)
            return (f"no replica can answer for '{asked_name(study.models[name].model) or name}' "
                    f"({'; '.join(f'{e}: {w}' for e, w in why)}); start the servers, or fix the model's name or its "
                    "endpoints")
        down = [self.endpoints[e] for e in ends if self.endpoints.get(e)]
        if down:
            return f"its endpoint is not reachable: {down[0]}"
        return not_listed(study, name, self.answers)


def check_endpoints(study: Study, models=None, timeout: float = REACH_S) -> EndpointCheck:
    """Reach each endpoint of ``models`` (default: every model of the study) once, all at once, and decide for
    each model with replicas whether one of them answers and lists it (see the module docstring)."""
    names = list(study.models) if models is None else list(models)
    result = EndpointCheck()
    urls: dict[str, str] = {}
    for name in names:
        for endpoint, settings in study.endpoints_of(name):
            urls.setdefault(endpoint, settings.url)
    if urls:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(REACH_AT_ONCE, len(urls))) as pool:
            found = list(pool.map(lambda url: reach(url, timeout), urls.values()))
        for endpoint, (problem, answer) in zip(urls, found):
            result.endpoints[endpoint], result.answers[endpoint] = problem, answer
    needed: set[str] = set()  # endpoints some model cannot do without
    for name in names:
        ends = [e for e, _ in study.endpoints_of(name)]
        why = {e: result.endpoints.get(e) or why_not(study, name, e, result.answers)[0] for e in ends}
        if len(ends) < 2 or all(why.values()):
            needed.update(ends)
            continue
        result.replicated.add(name)
        result.notes += [f"model {name}: replica {e} would be left out of its runs ({w})" for e, w in why.items() if w]
    result.spared = {e for name in result.replicated for e, _ in study.endpoints_of(name) if e not in needed}
    return result


def check_study(ws: Workspace, study: Study, store=None, *, batch: bool = False) -> StudyCheck:
    from cfkit.probe import preview_run

    reached = check_endpoints(study)
    result = StudyCheck([], endpoints=dict(reached.endpoints), notes=list(reached.notes), spared=reached.spared)
    labels: dict[str, str] = {}
    for suite, s in study.suites.items():
        for key in ("cases", "subset"):
            value = getattr(s, key)
            if value is not None:
                path = getattr(selection_of(ws, study, suite), key)
                if path is None or not path.is_file():
                    result.endpoints.setdefault(f"[suites.{suite}] {key}", f"file {value} not found")
    for run in study_runs(study):
        m = study.models[run.model]
        refused = reached.refused(study, run.model) or replicas_refused(study, run.model)
        if refused is not None:
            result.runs.append(RunCheck(run.model, run.display, run.suite, refused))
            continue
        try:
            preview = preview_run(ws, store, m.model, run.suite, options=model_options(study, run.model),
                                  concurrency=m.concurrency, max_tokens=m.max_tokens,
                                  protocol=m.protocol, selection=selection_of(ws, study, run.suite), batch=batch,
                                  words=words_of(study, run.model))
        except CfkitError as exc:
            result.runs.append(RunCheck(run.model, run.display, run.suite, str(exc)))
            continue
        labels[run.model] = preview.model
        result.runs.append(RunCheck(run.model, run.display, run.suite, None, len(preview.plan.items),
                                    preview.to_send.requests, preview.to_send.cost_max))
    clash = study.label_clash(labels)
    if clash is not None:
        result.study.append(clash)
    result.notes += keyless(study, reached.answers)
    return result


def keyless(study: Study, answers: dict[str, Answer | None]) -> list[str]:
    """A line for each model that sends no key to an endpoint whose model list wanted one (401/403 to the
    keyless GET /models): its runs would be refused the same way, so the line says where the study file names
    the key's variable."""
    lines = []
    for name in study.models:
        found = study.endpoints_of(name)
        if not found or found[0][1].api_key_env:
            continue
        wanting = [(e, answer.status) for e, _ in found
                   if (answer := answers.get(e)) is not None and answer.status in NO_KEY]
        if wanting:
            endpoint, status = wanting[0]
            lines.append(f"model {name}: endpoint {endpoint} wants a key (HTTP {status} to a request without one), "
                         f"and the study sends it none; name the variable holding its key with "
                         f"{words_of(study, name).of('api_key_env')}")
    return lines
