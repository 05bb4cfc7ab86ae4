"""Which scheduler ``kvplan simulate`` runs for a scenario's engine: each engine's own where kvplan models it
(``kvplan.engines.sglang_scheduler`` for SGLang), else the rule book of ``kvplan.engines.scheduling``."""

from __future__ import annotations

from typing import Any

from kvplan.engines.scheduling import RuleBook, Scheduler


def scheduler_for(s: Any, o: Any, *, max_batch: int, watermark_blocks: int, threshold_blocks: int | None,
                  total_blocks: int, block: int) -> Scheduler:
    """The scheduler of the scenario's engine, with simulate's options ``o`` (``SimOptions``): SGLang's for
    ``--engine sglang``, else the rule book (``max_batch``, ``watermark_blocks``, ``threshold_blocks`` its
    limits); ``total_blocks`` of ``block`` tokens: the replica's pool."""
    if s.engine_adapter.id == "sglang":
        from kvplan.engines.sglang_scheduler import for_scenario

        return for_scenario(s, o, total_blocks, block)
    return RuleBook(o.policy, o.victim, max_batch, watermark_blocks, threshold_blocks)
