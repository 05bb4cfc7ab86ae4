"""``kvplan explain-log`` presentation."""

from __future__ import annotations

from kvplan.calc.explain_log import ExplainLogPlan
from kvplan.present.common import scenario_data, spec_notes
from kvplan.render.result import Result, Table
from kvplan.specs.values import Note, Tokens, note


def _rows(comparisons) -> tuple:
    return tuple((c.label, c.logged, c.kvplan, c.difference, c.why) for c in comparisons)


def _data(comparisons) -> list[dict]:
    return [{"figure": c.label, "logged": c.logged, "kvplan": c.kvplan, "difference": c.difference,
             "agrees": c.agrees, "why": c.why} for c in comparisons]


def present(plan: ExplainLogPlan, settings_notes: tuple[str, ...] = (), settings_warnings: tuple[str, ...] = ()
            ) -> Result:
    s, log = plan.scenario, plan.log
    context = s.context_tokens
    columns = ("figure", "log", "kvplan", "kvplan - log", "why")
    tables = []
    if plan.reproduced:
        tables.append(Table(f"{log.engine}'s own figures, reproduced from the logged pool ({s.engine_adapter.release})",
                            columns, _rows(plan.reproduced)))
    if plan.budget_rows:
        tables.append(Table("kvplan's own budget against the log (per GPU)", columns, _rows(plan.budget_rows)))
    tables.append(Table(note("The workload on the logged pool ({prompt} prompt + {decode} decode)",
                             prompt=Tokens(s.prompt_tokens), decode=Tokens(s.decode_tokens)),
                        ("figure", "value"), (
                            ("KV pool per GPU (from the log)", plan.pool),
                            ("KV per request on the most loaded GPU", plan.request_bytes_per_gpu),
                            ("requests per replica", plan.requests_per_replica),
                            ("requests, deployment", plan.requests),
                            ("KV capacity per replica (tokens)", plan.capacity_tokens),
                        ), primary=True))
    notes: list[str | Note] = [*settings_notes, *plan.notes]
    notes.append(note("{requests} request(s) of {context} tokens fit in the logged pool", requests=plan.requests,
                      context=Tokens(context))
                 + (note(" ({per_replica} per replica x " f"{s.parallelism.dp} replicas)",
                         per_replica=plan.requests_per_replica) if s.parallelism.dp > 1 else "") + ".")
    data = {
        **scenario_data(s),
        "log": {"path": log.path, "engine": log.engine,
                "release": ".".join(map(str, log.release)) if log.release else None,
                "facts": {name: [f.value for f in facts] for name, facts in log.facts.items()
                          if all(isinstance(f.value, str) for f in facts)}},
        "kv_pool_bytes_per_gpu": plan.pool,
        "reproduced": _data(plan.reproduced),
        "budget": _data(plan.budget_rows),
        "budget_error": plan.budget_error or None,
        "kv_bytes_per_request_per_gpu": plan.request_bytes_per_gpu,
        "max_concurrency_per_replica": plan.requests_per_replica,
        "max_concurrency": plan.requests,
        "kv_capacity_tokens": plan.capacity_tokens,
    }
    brief = (("KV pool per GPU (from the log)", plan.pool),) + tuple(
        pair for c in plan.reproduced for pair in ((c.label + ", log", c.logged), (c.label + ", kvplan", c.kvplan))
    ) + (("requests, deployment", plan.requests),)
    assumptions = ("The pool per GPU is the log's (its least worker where several print it); kvplan's count of "
                   "bytes per token turns logged tokens or blocks into bytes.",
                   "Logged GiB figures have two decimals: a figure inside what +-0.005 GiB allows agrees.",
                   ) + spec_notes(s)
    return Result("explain-log", s.headline(), data, tuple(tables), tuple(notes), assumptions, (), brief,
                  tuple(settings_warnings) + plan.warnings, warnings_first=True)
