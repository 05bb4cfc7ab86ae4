"""Which scheduler ``kvplan simulate`` runs for a scenario's engine: each engine's own where kvplan models it
(``kvplan.engines.sglang_scheduler`` for SGLang), else the rule book of ``kvplan.engines.scheduling``."""

from __future__ import annotations

from typing import Any

from kvplan.engines.scheduling import RuleBook, Scheduler


def scheduler_for(s: Any, o: Any, *, max_batch: int, watermark_blocks: int, threshold_blocks: int | None,
                  total_blocks: int, block: int, chunk: int, reuse: bool, prefix_blocks: int,
                  hashes: Any = None) -> Scheduler:
    """The scheduler of the scenario's engine, with simulate's options ``o`` (``SimOptions``): SGLang's for
    ``--engine sglang``; vLLM V1's for ``--engine vllm`` from the release V1 starts (the adapter's
    ``simulation_scheduler``: ``chunk`` its token budget, ``reuse`` whether a victim's own blocks can be hits on
    resume, ``prefix_blocks`` the shared prefix's); else the rule book (``max_batch``, ``watermark_blocks``,
    ``threshold_blocks`` its limits), which a pinned pre-V1 vLLM runs as V0's rules. ``total_blocks`` of
    ``block`` tokens: the replica's pool; ``hashes``: a Mooncake trace's prompt blocks (``PrefixBlocks``), which
    SGLang's radix tree shares across requests."""
    engine = s.engine_adapter
    if getattr(o, "hicache", None) is not None and engine.id != "sglang":
        from kvplan.errors import KvplanError

        raise KvplanError(f"--enable-hierarchical-cache is SGLang's host tier (HiCache), not {engine.display_name}'s",
                          "use --engine sglang, or drop --enable-hierarchical-cache")
    if getattr(o, "async_scheduling", None) is not None and engine.id != "vllm":
        from kvplan.errors import KvplanError

        flag = "--async-scheduling" if o.async_scheduling else "--no-async-scheduling"
        raise KvplanError(f"{flag} is vLLM's, not {engine.display_name}'s", f"use --engine vllm, or drop {flag}")
    if getattr(o, "kv_offloading_bytes", None) is not None and engine.id != "vllm":
        from kvplan.errors import KvplanError

        raise KvplanError(f"--kv-offloading-size is vLLM's CPU offloading connector, not {engine.display_name}'s",
                          "use --engine vllm, or drop --kv-offloading-size (SGLang: --enable-hierarchical-cache)")
    if engine.id != "vllm":
        for flag, key in (("--long-prefill-token-threshold", "long_prefill_token_threshold"),
                          ("--max-num-partial-prefills", "max_num_partial_prefills"),
                          ("--max-long-partial-prefills", "max_long_partial_prefills")):
            if getattr(o, key, None) is not None:
                from kvplan.errors import KvplanError

                raise KvplanError(f"{flag} is vLLM's, not {engine.display_name}'s",
                                  f"use --engine vllm, or drop {flag}")
    if getattr(o, "disable_overlap_schedule", False) and engine.id != "sglang":
        from kvplan.errors import KvplanError

        raise KvplanError(f"--disable-overlap-schedule is SGLang's, not {engine.display_name}'s",
                          "use --engine sglang, or drop --disable-overlap-schedule")
    if (getattr(o, "scheduler_recv_interval", None) or 1) > 1 and engine.id != "sglang":
        from kvplan.errors import KvplanError

        raise KvplanError(f"--scheduler-recv-interval is SGLang's, not {engine.display_name}'s",
                          "use --engine sglang, or drop --scheduler-recv-interval")
    if engine.id == "sglang":
        from kvplan.engines.sglang_scheduler import for_scenario

        return for_scenario(s, o, total_blocks, block, reuse, hashes)
    if engine.id == "vllm":
        v1 = engine.simulation_scheduler(o.policy, o.victim, max_batch, chunk, o.offload_threshold, reuse,
                                         prefix_blocks, async_scheduling=getattr(o, "async_scheduling", None),
                                         pp=s.parallelism.pp, speculative=getattr(o, "speculative", None),
                                         offload_bytes=getattr(o, "kv_offloading_bytes", None),
                                         long_prefill=engine.prefill_cap(
                                             getattr(o, "long_prefill_token_threshold", None),
                                             getattr(o, "max_num_partial_prefills", None),
                                             getattr(o, "max_long_partial_prefills", None),
                                             s.context_limit))
        if v1 is not None:
            span = engine.release.split(" (")[0].removeprefix("vLLM ")     # "0.29+ rules"
            v1.engine_rules = f"vLLM V1 scheduler, {span} ({v1.short})"
            v1.notes = (f"Scheduler: {v1.describe}; {engine.release}.",)
            return v1
    book = RuleBook(o.policy, o.victim, max_batch, watermark_blocks, threshold_blocks, budget=chunk)
    if engine.id == "vllm":     # a release before V1: V0's watermark and swap space, which the rule book follows
        book.notes = (f"Scheduler: {engine.release} predate vLLM V1, so kvplan's rule book runs, which follows "
                      "V0's (watermark admission, swap space, prefills packed in passes of their own).",)
    return book
