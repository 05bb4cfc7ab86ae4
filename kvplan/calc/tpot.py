"""``kvplan tpot``: time per output token over a growing decode, from the one decode-step model
(``kvplan.calc.costs.step_model``), with the prefill (TTFT), a batch x context table, speculative decoding and
calibration to measured points.

Batch shapes: ``steady`` (continuous batching: the B requests' contexts spread evenly over P..P+D, as a serving
engine runs; every step looks alike) and ``cohort`` (B requests start together at P, so step t sees B contexts of
P + t). Per-request figures: TPOT; tokens/s per user = 1 / TPOT, per replica = B / TPOT, per GPU = that over the
replica's TP x PP GPUs (pipeline stages are not overlapped).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kvplan.calc import capacity, costs, kv
from kvplan.errors import DoesNotFit, KvplanError, shorten
from kvplan.scenario import Scenario
from kvplan.specs.values import Bytes, Count, Note, Number, Seconds, Tokens, default, derived, given, note

SHAPES = ("steady", "cohort")
DEFAULT_BATCH = 8
TABLE_BATCHES = (1, 2, 4, 8, 16, 32, 64, 128, 256)
TABLE_CONTEXTS = (1024, 8192, 32768, 65536, 131072)
SAMPLES = 257          # points a decode is integrated over (trapezoid)
COMPONENTS = ("weights", "moe", "kv", "attention_compute", "comm", "overhead")
SPEC_PAYS_MIN_ACCEPT = 1.05


# Published mean acceptance lengths (tokens per verify step, the bonus token included) of DeepSeek-V3/R1's native
# MTP head, by draft tokens per step: what ``--speculative mtp:K`` uses when --accept is not given. None of these
# sources gives the same head's acceptance at two context lengths, so the profile is flat (ACCEPT_FLAT_ASSUMPTION
# says so under --explain); a profile of the user's is --accept A@CONTEXT,A@CONTEXT (``parse_accept``).
MTP_ACCEPT = {
    1: (1.85, "DeepSeek's MTP module: 'acceptance rate of 80% to 90% for predicting the second subsequent token' "
              "(DeepSeek-V3 at ISCA'25, arXiv 2505.09343 section 2.3.3): 1 + 0.85; vLLM measured 81-82.3% on R1 "
              "(github.com/vllm-project/vllm/pull/12755)"),
    3: (2.18, "SGLang MTP blog (lmsys.org/blog/2025-07-17-mtp): DeepSeek on H200, 3 draft tokens, accept length 2.18 "
              "at ISL 65,536 / OSL 4,096 (a long-context figure: at short context the head accepts as much or more)"),
    4: (2.44, "SGLang MTP blog (lmsys.org/blog/2025-07-17-mtp): the same run with 4 draft tokens, accept length 2.44"),
}
# EAGLE-3's chain acceptance, by draft position: Llama-3.1-8B-Instruct with yuhuili/EAGLE3-LLaMA3.1-Instruct-8B in
# vLLM, 7 draft tokens in a chain, MT-bench (80 prompts), temperature 0: "acceptance at token 0..6: 0.74 0.54 0.41
# 0.31 0.23 0.17 0.13", mean acceptance length 3.53 = 1 + 12,208 accepted / 4,816 drafts (github.com/vllm-project/
# vllm/issues/26191, the figure of PR #17504 and confirmed in PR #24322; the same issue's later main measured 3.41).
# A greedy chain drafts the same tokens whatever its length, so K draft tokens accept 1 + the first K rates. Only
# that target and head: another model's EAGLE-3 head accepts differently (--spec-tokens K --mtp-layers 1 --accept A).
EAGLE3_RATES = (0.74, 0.54, 0.41, 0.31, 0.23, 0.17, 0.13)
EAGLE3_TARGETS = ("llama-3.1-8b",)
EAGLE3_SOURCE = ("EAGLE-3 chain on Llama-3.1-8B-Instruct (yuhuili/EAGLE3-LLaMA3.1-Instruct-8B), vLLM, MT-bench, "
                 "temperature 0: per-position acceptance 0.74 / 0.54 / 0.41 / 0.31 / 0.23 / 0.17 / 0.13, accept length "
                 "1 + the first K (github.com/vllm-project/vllm/issues/26191; PR #17504)")
EAGLE3_ACCEPT = {k: (round(1 + sum(EAGLE3_RATES[:k]), 2), EAGLE3_SOURCE) for k in range(1, len(EAGLE3_RATES) + 1)}
SPECULATIVE_METHODS = {"mtp": MTP_ACCEPT, "eagle3": EAGLE3_ACCEPT}


def parse_speculative(text: str) -> tuple[int, float, str, str]:
    """``mtp``, ``mtp:K``, ``eagle3`` or ``eagle3:K`` (K draft tokens per verify step, 1 by default): (K, the
    published acceptance length, its source, the method), from ``MTP_ACCEPT`` or ``EAGLE3_ACCEPT``."""
    m = re.fullmatch(r"\s*([a-z0-9]+)\s*(?::\s*(\d+))?\s*", text.strip().lower())
    if not m or m.group(1) not in SPECULATIVE_METHODS:
        raise KvplanError(f"--speculative {text!r} is not a method kvplan has published acceptance for",
                          "give --speculative mtp or mtp:K (K in " + ", ".join(map(str, sorted(MTP_ACCEPT)))
                          + "), eagle3:K (K in 1-7), or --spec-tokens K with --accept A")
    method, k = m.group(1), int(m.group(2) or 1)
    if method == "eagle3":
        if k not in EAGLE3_ACCEPT:
            raise KvplanError(f"--speculative eagle3:{k}: no published acceptance length for {k} draft tokens",
                              f"give eagle3:1 to eagle3:{len(EAGLE3_RATES)}, or --spec-tokens {k} --mtp-layers 1 "
                              "--accept A")
        accept, source = EAGLE3_ACCEPT[k]
        return k, accept, source, method
    if k not in MTP_ACCEPT:
        raise KvplanError(f"--speculative mtp:{k}: no published acceptance length for {k} draft tokens",
                          "give mtp:" + ", mtp:".join(map(str, sorted(MTP_ACCEPT)))
                          + f", or --spec-tokens {k} --mtp-layers 1 --accept A")
    accept, source = MTP_ACCEPT[k]
    return k, accept, source, method


# Acceptance against context: (context tokens, tokens accepted per verify step) points, contexts rising, linear
# between points and flat beyond the first and the last (numpy.interp). A flat acceptance is one point.
Accept = tuple[tuple[float, float], ...]
MAX_ACCEPT_POINTS = 64
# Acceptance measured at several contexts for the same head, none of them a head kvplan ships a figure for: why a
# flat profile is an assumption, and what a falling one looks like (the workload document: "acceptance rate may
# fall as context grows").
ACCEPT_FALLS = ("EAGLE-3 on Qwen3-8B in vLLM, LongBench-v2 cut to each context, temperature 0: accept length 2.295 "
                "at 2K, 2.040 at 4K, 1.687 at 8K, 1.400 at 10K, 1.090 at 16K, 1.084 at 20K (github.com/vllm-project/"
                "speculators/pull/684); Qwen3.6-27B's native MTP head in vLLM, 6 draft tokens: position-1 acceptance "
                "93.5% falling to 72.1% as the context grows (github.com/vllm-project/vllm/issues/47602)")
ACCEPT_FLAT_ASSUMPTION = ("Acceptance held flat in context: no published source gives this head's acceptance at two "
                          "context lengths, and other heads' falls with context (" + ACCEPT_FALLS + "); give "
                          "--accept A@CONTEXT,A@CONTEXT (e.g. 2.3@2k,1.7@8k,1.1@16k) for a profile.")


def flat_accept(a: float) -> Accept:
    """A flat acceptance length: one point."""
    return ((0.0, float(a)),)


def accept_at(profile: Accept, contexts):
    """Tokens accepted per verify step at ``contexts`` (numpy array or number): linear between the profile's points,
    flat beyond its ends."""
    import numpy as np

    xs = np.array([c for c, _ in profile], dtype=float)
    ys = np.array([a for _, a in profile], dtype=float)
    return np.interp(np.asarray(contexts, dtype=float), xs, ys)


def accept_is_flat(profile: Accept) -> bool:
    return len({a for _, a in profile}) == 1


def describe_accept(profile: Accept) -> str:
    """The profile as plain text for a derivation: ``2.18``, or ``2.6 at 1000 -> 2 at 32000 tokens``."""
    if accept_is_flat(profile):
        return _plain(profile[0][1])
    return " -> ".join(_plain(a) + " at " + _plain(c) for c, a in profile) + " tokens"


def _plain(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def accept_note(profile: Accept) -> Note:
    """The profile as a note of typed values: ``2.18``, or ``2.6 at 1,000 -> 2 at 32,000 tokens``."""
    if accept_is_flat(profile):
        return note("{a:g}", a=Number(profile[0][1]))
    parts = [note("{a:g} at {c}", a=Number(a), c=Tokens(int(c))) for c, a in profile]
    out = parts[0]
    for part in parts[1:]:
        out = out + " -> " + part
    return out + " tokens"


def accept_assumption(profile: Accept, source: str | None) -> str | Note:
    """The --explain assumption row of a speculative run: flat (published at one context, or the user's one
    number) or the user's profile."""
    if not accept_is_flat(profile):
        return (note("Acceptance against context: ") + accept_note(profile)
                + " (--accept), linear between the points and flat beyond them; each step takes each request's "
                "acceptance at its own context.")
    if source:
        return ACCEPT_FLAT_ASSUMPTION
    return (note("Acceptance {a:g} at every context (--accept); other heads' falls with context (",
                 a=Number(profile[0][1])) + ACCEPT_FALLS + "); --accept A@CONTEXT,A@CONTEXT gives a profile.")


_ACCEPT_NUMBER = r"[0-9]*\.?[0-9]+"


def parse_accept(text: str) -> Accept:
    """``--accept``: ``2.4`` (tokens accepted per verify step, bonus token included, at every context),
    ``2.4-0.00002/token`` (falling linearly with context to 1), or a profile ``2.6@1k,2.0@32k`` (A at each
    context, rising contexts; linear between, flat beyond). Returns the ``Accept`` points."""
    from kvplan.inputs.units import parse_tokens

    if "@" in text:
        if re.search(r"(?:^|,)\s*(?:,|$)", text):   # 2.6@1k, / ,2.6@1k / 2.6@1k,,2.0@32k: a point left out
            raise KvplanError(f"--accept {shorten(text)} has an empty point (a stray comma)",
                              "give ACCEPT@CONTEXT points separated by single commas, e.g. 2.6@1k,2.0@32k")
        parts = re.split(r",(?=\s*" + _ACCEPT_NUMBER + r"\s*@)", text)
        if len(parts) > MAX_ACCEPT_POINTS:
            raise KvplanError(f"--accept has {len(parts)} points, more than {MAX_ACCEPT_POINTS}",
                              "give a few points, e.g. 2.6@1k,2.0@32k")
        points: list[tuple[float, float]] = []
        for part in parts:
            m = re.fullmatch(r"\s*(" + _ACCEPT_NUMBER + r")\s*@\s*([^@]+?)\s*", part)
            if not m:
                raise KvplanError(f"--accept point {part.strip()!r} is not ACCEPT@CONTEXT",
                                  "write a profile like 2.6@1k,2.0@32k (tokens per verify step at each context)")
            a = float(m.group(1))
            c = parse_tokens(m.group(2), "--accept context", allow_zero=True)
            if not 1 <= a <= 64:
                raise KvplanError(f"--accept {a:g} (at {c:,} tokens) is not in [1, 64]",
                                  "an acceptance length counts the bonus token: >= 1")
            if points and c <= points[-1][0]:
                raise KvplanError(f"--accept contexts must rise: {c:,} comes after {points[-1][0]:,.0f}",
                                  "list the points in order of context, e.g. 2.6@1k,2.0@32k")
            points.append((float(c), a))
        return tuple(points)
    m = re.fullmatch(r"\s*(" + _ACCEPT_NUMBER + r")\s*(?:-\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*/\s*token)?\s*",
                     text)
    if not m:
        raise KvplanError(f"--accept {text!r} is not an acceptance length",
                          "write it like 2.4, 2.4-0.00002/token or 2.6@1k,2.0@32k (tokens per verify step)")
    a0, slope = float(m.group(1)), float(m.group(2) or 0)
    if not 1 <= a0 <= 64:
        raise KvplanError(f"--accept {a0:g} is not in [1, 64]", "an acceptance length counts the bonus token: >= 1")
    return slope_accept(a0, slope)


def normalize_accept(accept) -> Accept:
    """An ``Accept`` from its points, or from (a0, slope) (max(1, a0 - slope x context), the form before profiles);
    refused when the contexts do not rise or an acceptance is below 1."""
    if len(accept) == 2 and all(isinstance(v, (int, float)) for v in accept):
        return slope_accept(float(accept[0]), float(accept[1]))
    points = tuple((float(c), float(a)) for c, a in accept)
    rising = all(c1 > c0 for (c0, _), (c1, _) in zip(points, points[1:], strict=False))
    if not points or any(a < 1 for _, a in points) or not rising:
        raise KvplanError(f"acceptance profile {points!r} is not (context, acceptance >= 1) points with rising "
                          "contexts", "give e.g. ((1000, 2.6), (32000, 2.0)), or --accept 2.6@1k,2.0@32k")
    return points


def slope_accept(a0: float, slope: float) -> Accept:
    """max(1, a0 - slope x context) as points: a0 at 0, 1 where it reaches 1 (flat when the slope is 0 or a0 is
    1)."""
    if slope < 0:
        raise KvplanError(f"--accept slope {slope:g} is negative", "give a slope >= 0 (the acceptance falls)")
    if slope == 0 or a0 <= 1:
        return flat_accept(a0)
    return ((0.0, float(a0)), ((a0 - 1) / slope, 1.0))


@dataclass(frozen=True)
class TpotOptions:
    batch: int = DEFAULT_BATCH
    shape: str = "steady"
    batches: tuple[int, ...] = TABLE_BATCHES
    contexts: tuple[int, ...] = TABLE_CONTEXTS
    spec_tokens: int = 0              # draft tokens per verify step (with MTP layers or a draft model)
    accept: Accept | None = None      # acceptance against context (``parse_accept``)
    factors: dict | None = None       # efficiency overrides (hbm, mfu, overhead_us_per_layer, ...)
    accept_source: str | None = None  # where a published acceptance length came from (--speculative)

    def __post_init__(self) -> None:
        if isinstance(self.batch, bool) or not isinstance(self.batch, int) or not 1 <= self.batch <= 100_000:
            raise KvplanError(f"--batch {self.batch!r} is not in 1 .. 100,000", "give the requests decoding together")
        if self.shape not in SHAPES:
            raise KvplanError(f"unknown batch shape {self.shape!r}", "choose steady or cohort")
        if self.accept is not None:   # (a0, slope), as before the profiles, reads as its points
            object.__setattr__(self, "accept", normalize_accept(self.accept))
        if self.spec_tokens and self.accept is None:
            raise KvplanError("--spec-tokens needs --accept (tokens accepted per verify step)",
                              "add --accept 2.4 (or a profile 2.6@1k,2.0@32k)")


@dataclass(frozen=True)
class Phase:
    context: Tokens
    tpot: Seconds
    bound: str
    breakdown: dict


@dataclass(frozen=True)
class SpecPlan:
    spec_tokens: Count
    accept_start: Number
    accept_end: Number
    plain_start: Seconds
    plain_end: Seconds
    tpot_start: Seconds
    tpot_end: Seconds
    tpot_mean: Seconds
    gain_mean: Number
    draft_kv_bytes_per_request: object
    pays: bool
    # the acceptance profile's points: (context, tokens accepted per verify step), linear between, flat beyond
    accept_profile: tuple[tuple[Tokens, Number], ...] = ()


@dataclass(frozen=True)
class TpotPlan:
    scenario: Scenario
    options: TpotOptions
    factors: costs.StepFactors
    batch: Count
    max_batch: Count
    start: Phase
    mid: Phase
    end: Phase
    tpot_mean: Seconds
    decode_seconds: Seconds
    tokens_per_second_per_user: Number
    tokens_per_second_per_replica: Number
    tokens_per_second_per_gpu: Number
    kv_bound_from_context_tokens: Tokens
    ttft: Seconds
    table_batches: tuple[int, ...]
    table_contexts: tuple[int, ...]
    table: tuple[tuple[Seconds, ...], ...]      # [batch][context]
    spec: SpecPlan | None
    notes: tuple[str | Note, ...]
    # the factors the step was priced with (``factors`` with the engine's terms: ``costs.engine_factors``) and the
    # engine's terms themselves, the step's and the frontend latency in the TTFT (each the value the price used)
    factors_used: costs.StepFactors | None = None
    engine_terms: tuple[costs.EngineTerm, ...] = ()


def _mean_over(series, ts, d: int) -> float:
    """The mean of a step-time series over a decode of d steps (trapezoid rule)."""
    import numpy as np

    if not d:
        return float(series[0])
    # the trapezoid rule written out (numpy >= 2 names it ``trapezoid``, numpy < 2 ``trapz``): the same sum
    y = np.asarray(series)
    area = (np.diff(ts) * (y[1:] + y[:-1]) / 2.0).sum()
    return float(area / d)


def bound_of(split: dict, i=None) -> str:
    """The largest component of a step."""
    values = {name: float(split[name] if i is None else split[name][i]) for name in COMPONENTS}
    name = max(values, key=values.__getitem__)
    return {"weights": "weights (HBM)", "moe": "MoE experts (HBM)", "kv": "KV cache (HBM)",
            "attention_compute": "attention compute", "comm": "communication", "overhead": "fixed overhead"}[name]


def _phase(step, batch: int, contexts, label: str) -> Phase:
    """One decode step of ``batch`` requests at ``contexts`` (an array the batch's mean request is averaged over)."""
    import numpy as np

    ctx = np.asarray(contexts, dtype=float)
    nbytes, nflops = step.request_cache(ctx)
    split = step.step(batch, float(np.mean(nbytes) * batch), float(np.mean(nflops) * batch))
    parts = {k: float(v) for k, v in split.items()}
    mean_ctx = int(round(float(np.mean(ctx))))
    numbers = ", ".join(f"{k} {parts[k] * 1e3:.3f} ms" for k in COMPONENTS)
    tpot = Seconds(parts["total"], derived(
        "sum over operators of max(bytes / (HBM x hbm), FLOPs / (peak x mfu)), the dense GEMMs at least "
        "gemms x gemm_floor_us, + communication + overhead "
        f"({label})", f"batch {batch}, mean context {mean_ctx:,}: {numbers} = {parts['total'] * 1e3:.3f} ms"))
    return Phase(Tokens(mean_ctx, derived(f"mean context of the batch ({label})", f"{mean_ctx:,}")), tpot,
                 bound_of(parts), {k: Seconds(parts[k], derived(f"the step's {k} term", f"{parts[k]:.6g} s"))
                                   for k in COMPONENTS})


def _batch_contexts(shape: str, p: int, d: int, t: int):
    """The batch's contexts at decode step t: a cohort all at P + t; a steady batch spread over P..P+D (the one
    steady average of every command, ``costs.steady_contexts``)."""
    import numpy as np

    if shape == "cohort":
        return np.array([p + t], dtype=float)
    return costs.steady_contexts(p, d)


def plan_tpot(scenario: Scenario, options: TpotOptions | None = None) -> TpotPlan:
    """Time per output token of ``scenario`` over its decode (module docstring), with the prefill time, a batch x
    context table and, per ``options``, speculative decoding and calibration."""
    import numpy as np

    o = options or TpotOptions()
    s = scenario
    factors = costs.step_factors(s.hardware, **(o.factors or {}))
    step = costs.step_model(s, factors)
    p, d, b = s.prompt_tokens, s.decode_tokens, o.batch
    par = s.parallelism
    gpus = par.tp * par.pp

    # The most requests of this length the pool holds (per replica): the batch, and the table, stop there.
    pool = capacity.kv_pool(s).kv_pool_bytes
    shared = capacity.shared_prefix_copy_bytes(s)
    fit = capacity.fit(pool, capacity.request_bytes(s, s.context_tokens), shared)
    max_batch = Count(fit, derived("requests of prompt + decode tokens the KV pool of one replica holds",
                                   f"{fit} at {s.context_tokens:,} tokens"))
    if s.max_num_seqs is not None and fit > s.max_num_seqs:   # the engine runs no more than --max-num-seqs
        max_batch = Count(s.max_num_seqs, derived(
            "min(requests the KV pool of one replica holds, --max-num-seqs)",
            f"min({fit}, {s.max_num_seqs}) at {s.context_tokens:,} tokens"))
    notes = list(step.notes)
    if fit < 1:
        raise DoesNotFit(f"one request of {s.context_tokens:,} tokens does not fit in one replica's KV pool",
                          "shorten --prompt/--decode, use a smaller --kv-dtype, or more GPUs per replica (--tp)")
    if b > fit:
        raise DoesNotFit(f"--batch {b} does not fit: one replica's KV pool holds {fit} requests of "
                          f"{s.context_tokens:,} tokens", f"give --batch {fit} or less, or a shorter request")

    start = _phase(step, b, _batch_contexts(o.shape, p, d, 0), o.shape)
    mid = _phase(step, b, _batch_contexts(o.shape, p, d, d // 2), o.shape)
    end = _phase(step, b, _batch_contexts(o.shape, p, d, d), o.shape)
    if o.shape == "steady":
        mean = start.tpot.number()
        mean_why = derived("steady batch: every step sees the same spread of contexts", f"{mean * 1e3:.3f} ms")
    else:
        ts = np.linspace(0, d, SAMPLES)
        nbytes, nflops = step.request_cache(p + ts)
        series = step.step(b, b * nbytes, b * nflops)["total"]
        mean = _mean_over(series, ts, d)
        mean_why = derived("mean step time over the decode (trapezoid over 257 steps)", f"{mean * 1e3:.3f} ms")
    tpot_mean = Seconds(mean, mean_why)
    decode = Seconds(mean * d, derived("mean TPOT x decode tokens", f"{mean:.6g} x {d:,} = {mean * d:.4g} s"))
    per_user = Number(1 / mean, derived("1 / mean TPOT (tokens/s)", f"1 / {mean:.6g}"))
    per_replica = Number(b / mean, derived("batch / mean TPOT (tokens/s)", f"{b} / {mean:.6g}"))
    per_gpu = Number(b / mean / gpus, derived("per replica / (TP x PP) GPUs (tokens/s)",
                                              f"{b / mean:.6g} / {gpus}"))

    # Where the batch's KV reads overtake the weights: all B requests at context S.
    grid = np.unique(np.geomspace(1, max(s.context_limit or 0, 1_048_576), 4096).astype(int)).astype(float)
    nbytes, nflops = step.request_cache(grid)
    split = step.step(b, b * nbytes, b * nflops)
    turn = np.nonzero(split["attention"] > split["weights"] + split["moe"])[0]
    kv_from = int(grid[turn[0]]) if len(turn) else None
    kv_bound = Tokens(kv_from, derived(
        "smallest context S at which B requests' attention (KV reads or attention FLOPs) takes longer than the "
        "weight reads", f"batch {b}: S = {kv_from:,}" if kv_from else f"batch {b}: not below "
        f"{int(grid[-1]):,} tokens"))

    mnbt, _ = s.engine_adapter.batch_limits_for(s)
    chunk = mnbt.number()
    prefill_s, frontend = step.prefill_seconds(p, 0, chunk), costs.frontend_seconds(s)
    ttft_s = prefill_s + frontend.number()
    chunks = max(1, math.ceil(p / chunk))
    fe = frontend.number()   # an engine's API server (none for neutral)
    ttft = Seconds(ttft_s, derived(
        "prefill in chunks of max_num_batched_tokens: per chunk max(weights / (HBM x hbm), FLOPs / (peak x "
        "prefill_mfu)) + the chunk's communication (TP all-reduces, EP dispatch / combine, PP sends; prefill_mfu is "
        "compute-only) + the step's fixed overhead"
        + (", + the engine's frontend latency (the API server's way in and out)" if fe else ""),
        f"{p:,} tokens in {chunks} chunk(s): {prefill_s * 1e3:.3f} ms" + (f" + {fe * 1e3:g} ms" if fe else ""),
        *(frontend.why.sources if fe and frontend.why else ())))

    # The table: cohorts of B requests at context S, for every B the pool holds at S's context.
    contexts = tuple(sorted({c for c in o.contexts if s.context_limit is None or c <= s.context_limit}
                            | {s.context_tokens}))
    batches = tuple(x for x in sorted(set(o.batches) | {b, fit}) if 1 <= x <= fit)
    over = sorted({x for x in o.batches if x > fit}) if o.batches != TABLE_BATCHES else []   # given, not the default
    if over:   # rows asked for that the table cannot have: said, not dropped silently
        notes.append(note("--batches {over} left out of the table: one replica's KV pool holds at most {fit} requests "
                          "of {context} tokens", over=", ".join(format(x, ",") for x in over), fit=Count(fit),
                          context=Tokens(s.context_tokens)))
    beyond = sorted({c for c in o.contexts if s.context_limit is not None and c > s.context_limit})
    if beyond and o.contexts != TABLE_CONTEXTS:
        notes.append(note("--contexts {beyond} left out of the table: longer than the {limit}-token limit",
                          beyond=", ".join(format(c, ",") for c in beyond), limit=Tokens(s.context_limit)))
    cb, cf = step.request_cache(np.asarray(contexts, dtype=float))
    bb = np.asarray(batches, dtype=float)[:, None]
    grid_t = step.step(bb, bb * cb[None, :], bb * cf[None, :])["total"]
    holds = [capacity.fit(pool, capacity.request_bytes(s, c), shared) for c in contexts]
    table = tuple(tuple(
        Seconds(float(grid_t[i, j]), derived("decode step of B requests all at context S",
                                             f"B {batches[i]}, S {contexts[j]:,}"))
        if batches[i] <= holds[j] else
        Seconds(None, derived("B requests at context S do not fit in the pool",
                              f"the pool holds {holds[j]} at {contexts[j]:,} tokens"))
        for j in range(len(contexts))) for i in range(len(batches)))

    spec = _speculative(s, o, step, factors) if o.spec_tokens else None
    if o.shape == "steady":
        notes.append("Steady batch: the requests' contexts are spread over the decode, so TPOT at the start, middle "
                     "and end of a request's decode is the same step; --shape cohort starts them together.")
    terms = step.engine_terms + ((costs.EngineTerm("frontend_latency_seconds", "frontend latency (in the TTFT)",
                                                   frontend),) if fe else ())
    return TpotPlan(s, o, factors, Count(b, given("--batch") if b != DEFAULT_BATCH else default("8 requests")),
                    max_batch, start, mid, end, tpot_mean, decode, per_user, per_replica, per_gpu, kv_bound, ttft,
                    batches, contexts, table, spec, tuple(notes), step.factors, terms)


def _speculative(s: Scenario, o: TpotOptions, step, factors) -> SpecPlan:
    """Effective TPOT with k draft tokens per verify step: (verify step + k draft steps) / accepted tokens, the
    acceptance at each step's context (``accept_at``)."""
    import numpy as np

    k = o.spec_tokens
    if o.accept is None:  # pragma: no cover - TpotOptions refuses spec_tokens without accept
        raise AssertionError("spec_tokens without accept")
    top = max(a for _, a in o.accept)
    if top > k + 1:
        raise KvplanError(f"--accept {top:g} is more than the {k + 1} tokens a verify step with {k} draft token(s) "
                          "can accept", f"give --accept {k + 1} or less")
    p, d, b = s.prompt_tokens, s.decode_tokens, o.batch
    ts = np.linspace(0, d, SAMPLES)
    ctx = p + ts
    if s.draft is None and s.mtp_layers:   # the target's steps without its MTP layers: they are the draft
        step = costs.step_model(s, factors, speculative=True)
    nbytes, nflops = step.request_cache(ctx)
    plain = step.step(b, b * nbytes, b * nflops)["total"]
    verify = step.step(b, b * nbytes, b * nflops, tokens_per_request=k + 1)["total"]
    if s.draft is None:   # the MTP head: the one speculative price (costs.StepModel.speculative_step)
        mtp = s.mtp_layers or 1
        draft = step.speculative_step(b, b * nbytes, b * nflops, k, mtp)["draft"]
        draft_kv = (kv.kv_bytes_at_context(s.model.with_mtp_layers(mtp), s.kv_dtype, s.context_tokens)
                    - kv.kv_bytes_at_context(s.model, s.kv_dtype, s.context_tokens))
    else:
        draft_s = s.with_(model=s.draft, draft=None, mtp_layers=0)
        dstep = costs.step_model(draft_s, factors)
        db, df = dstep.request_cache(ctx)
        draft = k * dstep.step(b, b * db, b * df)["total"]
        draft_kv = kv.kv_bytes_at_context(s.draft, s.kv_dtype, s.context_tokens)
    accept = accept_at(o.accept, ctx)
    eff = (verify + draft) / accept
    mean_eff = _mean_over(eff, ts, d)
    mean_plain = _mean_over(plain, ts, d)
    profile = describe_accept(o.accept)
    return SpecPlan(
        Count(k, given("--spec-tokens")),
        Number(float(accept[0]), derived("acceptance at the context S (linear between the profile's points, flat "
                                         "beyond)", f"{profile} at S = {p:,}", o.accept_source or "")),
        Number(float(accept[-1]), derived("the same at the end", f"{profile} at S = {p + d:,}")),
        Seconds(float(plain[0]), derived("plain decode step of the same batch at the start (cohort)",
                                         f"{plain[0]:.6g} s")),
        Seconds(float(plain[-1]), derived("plain decode step of the same batch at the end (cohort)",
                                          f"{plain[-1]:.6g} s")),
        Seconds(float(eff[0]), derived("(verify step with k + 1 tokens + k draft steps) / accepted tokens",
                                       f"({verify[0]:.6g} + {draft[0]:.6g}) / {accept[0]:.4g}")),
        Seconds(float(eff[-1]), derived("the same at the end of the decode",
                                        f"({verify[-1]:.6g} + {draft[-1]:.6g}) / {accept[-1]:.4g}")),
        Seconds(mean_eff, derived("mean effective TPOT over the decode", f"{mean_eff:.6g} s")),
        Number(mean_plain / mean_eff, derived("mean plain TPOT / mean effective TPOT",
                                              f"{mean_plain:.6g} / {mean_eff:.6g}")),
        Bytes(int(draft_kv), derived("the draft's KV per request at the full context, whole model",
                                     f"{int(draft_kv):,} B")),
        bool(accept[-1] >= SPEC_PAYS_MIN_ACCEPT and eff[-1] < plain[-1]),
        tuple((Tokens(int(c), given("--accept") if o.accept_source is None else default("the published figure, "
                                                                                      "held flat")),
               Number(a, given("--accept") if o.accept_source is None else default("published", o.accept_source)))
              for c, a in o.accept))
