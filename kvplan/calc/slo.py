"""The one SLO model the commands share: targets on TTFT and TPOT at a percentile, the attainment of a run, whether a
run meets the targets, and goodput.

Definitions (the same in ``simulate --sweep-rate``, ``check`` and the closed form here):

- A **request meets the SLO** when its TTFT (first token - arrival, + the engine's frontend latency) <= the TTFT
  target and its TPOT ((finish - first token) / (output - 1)) <= the TPOT target; a target not given always holds,
  and a request of one output token has no TPOT, so it meets any TPOT target.
- The **attainment** of a run is the share of its requests that meet the SLO (both targets at once, per request:
  DistServe's SLO attainment).
- A run **meets the targets** when both forms hold: the *percentile form* (the run's TTFT at the TTFT target's
  percentile <= that target, and its TPOT at the TPOT target's percentile <= that target; numpy's linear
  interpolation over the requests) and the *attainment form* (attainment >= the attainment target, default 0.90).
  Which one decides is reported (``Verdict.decided_by``): the first that fails, the percentile form checked first.
  At the defaults (p99 and 90%) the percentile form is the stricter one: p99 of each target met leaves at most 1%
  of requests missing each, so at least 98% meet both, above 90%; the attainment form decides when the percentile
  is lowered (``--slo-percentile 90``: each target alone at 90% can leave fewer than 90% meeting both).
- **Goodput** (DistServe: the highest request rate whose SLO attainment meets the target) from a sweep: the highest
  swept rate at which it *and every lower swept rate* meet the targets: a grid point, never interpolated between a
  rate that meets and one that does not (a rate between them was not simulated). Its output tokens/s is that rate
  x the workload's mean output tokens per request (each arriving request is served within the SLO's attainment).
- **Closed form** where it is exact: a steady batch of equal requests (every request the same prompt and output,
  decoding in a batch of constant size) gives every request the same TTFT and TPOT, so the attainment is 0 or 1 and
  the percentile form and the attainment form agree; its rate is Little's law, batch / a request's time in the
  system (TTFT + (output - 1) x TPOT); ``recommend`` and its ``--target`` search take their rate from it
  (``recommend.closed_form_rate``). Where lengths vary, arrivals are random or prefills interfere the figures are the
  simulator's (``recommend --target rate>=R`` judges its launch at R with ``simulate.simulated_load``, a
  ``--sweep-rate`` point).

Every figure is a typed value whose derivation begins "closed form" or "simulated".

Layer: calc (numpy imported inside the functions that need it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.errors import KvplanError
from kvplan.specs.values import Count, Fraction, Note, Number, Seconds, Value, default, derived, given, note

PERCENTILES = (50, 90, 99)        # the percentiles a target may be at
DEFAULT_PERCENTILE = 99
DEFAULT_ATTAINMENT = 0.90         # DistServe's attainment target in its evaluation (90% of requests)
ATTAINMENT_SOURCE = ("DistServe (Zhong et al., OSDI 2024), section 2: goodput is the maximum request rate that can "
                     "be served adhering to the SLO attainment goal (e.g. 90%)")


@dataclass(frozen=True)
class SloTargets:
    """TTFT and TPOT targets (seconds, None: no target), each at a percentile, and the attainment target (the share
    of requests that must meet both). ``origin``: which option set each (for the targets' derivations)."""

    ttft: float | None = None
    tpot: float | None = None
    ttft_percentile: int = DEFAULT_PERCENTILE
    tpot_percentile: int = DEFAULT_PERCENTILE
    attainment: float = DEFAULT_ATTAINMENT
    ttft_origin: str = "--ttft-slo"
    tpot_origin: str = "--tpot-slo"
    attainment_origin: str = ""      # "": the default

    def __post_init__(self) -> None:
        for q in (self.ttft_percentile, self.tpot_percentile):
            if q not in PERCENTILES:
                raise KvplanError(f"an SLO at p{q} is not one kvplan measures",
                                  "give it at " + ", ".join(f"p{p}" for p in PERCENTILES))
        if not 0 < self.attainment <= 1:
            raise KvplanError(f"an SLO attainment of {self.attainment:g} is not in (0, 1]", "give e.g. 0.9 or 90%")

    @property
    def any(self) -> bool:
        return self.ttft is not None or self.tpot is not None

    def values(self) -> dict[str, Value]:
        """The targets as typed values: ``tpot_seconds_pQ_at_most``, ``ttft_seconds_pQ_at_most`` (those given) and
        ``slo_attainment_at_least`` (when a target is given)."""
        out: dict[str, Value] = {}
        if self.tpot is not None:
            out[f"tpot_seconds_p{self.tpot_percentile}_at_most"] = Seconds(self.tpot, given(self.tpot_origin))
        if self.ttft is not None:
            out[f"ttft_seconds_p{self.ttft_percentile}_at_most"] = Seconds(self.ttft, given(self.ttft_origin))
        if self.any:
            out["slo_attainment_at_least"] = Fraction(self.attainment, given(self.attainment_origin)
                                                      if self.attainment_origin else default(
                                                          "90% of requests meet both targets", ATTAINMENT_SOURCE))
        return out

    def bounds(self) -> list[tuple[str, int, float]]:
        """The targets given as (figure, percentile, seconds): ``[("TPOT", 99, 0.05), ("TTFT", 99, 2.0)]``, for
        derivations and notes to put in words."""
        return ([("TPOT", self.tpot_percentile, self.tpot)] if self.tpot is not None else []) + (
            [("TTFT", self.ttft_percentile, self.ttft)] if self.ttft is not None else [])

    def notes(self) -> list[Note]:
        """The targets in words as notes of typed values (``TPOT p99 <= 50 ms``)."""
        origin = {"TPOT": self.tpot_origin, "TTFT": self.ttft_origin}
        return [note(name + " p{q:d} <= {slo:ms:g} ms", q=Count(q, given(origin[name])),
                     slo=Seconds(v, given(origin[name]))) for name, q, v in self.bounds()]


def parse_slo(text: str, flag: str, percentile: int = DEFAULT_PERCENTILE) -> tuple[float, int]:
    """``TIME`` (at ``percentile``) or ``pNN:TIME`` (``p50:500ms``, ``p90:2s``). Returns (seconds, percentile)."""
    from kvplan.inputs.options import parse_seconds

    body, q = text.strip(), percentile
    head, sep, rest = body.partition(":")
    if sep:
        name = head.strip().lower()
        if name not in {f"p{p}" for p in PERCENTILES}:
            raise KvplanError(f"{flag} {text!r}: {head!r} is not one of " + ", ".join(f"p{p}" for p in PERCENTILES),
                              f"give e.g. {flag} 2s (p{percentile}) or {flag} p50:500ms")
        q, body = int(name[1:]), rest.strip()
    try:
        return parse_seconds(body, flag.removeprefix("--")), q
    except KvplanError as err:      # a plan's key (assert[1].ttft_slo) is no flag: name it as it is
        if flag.startswith("--"):
            raise
        raise KvplanError(err.message.replace(f"--{flag}", flag),
                          (err.hint or "").replace(f"--{flag}", flag)) from None


def parse_percentile(text, flag: str = "--slo-percentile") -> int:
    """``--slo-percentile``: 50, 90 or 99 (a leading p allowed)."""
    t = str(text).strip().lower().removeprefix("p")
    if t not in {str(p) for p in PERCENTILES}:
        raise KvplanError(f"{flag} {text!r} is not one of " + ", ".join(str(p) for p in PERCENTILES),
                          f"give {flag} 99 (the default), 90 or 50")
    return int(t)


def parse_attainment(text, flag: str = "--slo-attainment") -> float:
    """``--slo-attainment``: a share of requests in (0, 1], as 0.9 or 90%."""
    t = str(text).strip()
    try:
        v = float(t[:-1]) / 100 if t.endswith("%") else float(t)
    except ValueError:
        v = float("nan")
    if not 0 < v <= 1:     # NaN fails too
        raise KvplanError(f"{flag} {text!r} is not a share of requests in (0, 1]", f"give e.g. {flag} 0.9 or 90%")
    return v


FLAGS = ("--ttft-slo", "--tpot-slo", "--slo-percentile", "--slo-attainment")


def parse_targets(*, ttft=None, tpot=None, percentile=None, attainment=None, names: tuple[str, ...] = FLAGS
                  ) -> SloTargets:
    """The targets from the options' text, parsed once: ``--ttft-slo`` and ``--tpot-slo`` (``[pNN:]TIME``, at
    ``--slo-percentile`` unless they name one; default p99) and ``--slo-attainment`` (default 0.90). ``names``: how
    the four are named in messages and derivations (``FLAGS`` on the command line, a plan's keys in ``check``)."""
    n_ttft, n_tpot, n_pct, n_att = names
    q = parse_percentile(percentile, n_pct) if percentile is not None else DEFAULT_PERCENTILE
    t_s, t_q = parse_slo(str(ttft), n_ttft, q) if ttft is not None else (None, q)
    p_s, p_q = parse_slo(str(tpot), n_tpot, q) if tpot is not None else (None, q)
    a = parse_attainment(attainment, n_att) if attainment is not None else DEFAULT_ATTAINMENT
    return SloTargets(ttft=t_s, tpot=p_s, ttft_percentile=t_q, tpot_percentile=p_q, attainment=a,
                      ttft_origin=n_ttft, tpot_origin=n_tpot, attainment_origin=n_att if attainment is not None else "")


# --- a run's figures ------------------------------------------------------------------------------------------
def request_arrays(run):
    """(TTFT, TPOT) per request of a simulated run (``SimRun``): TTFT as the client sees it (first token - arrival +
    the engine's frontend latency, ``kvplan.calc.sim.metrics.client_ttft``); TPOT is NaN for a request of one output
    token."""
    import numpy as np

    from kvplan.calc.sim.metrics import client_ttft

    ttft = client_ttft(run)
    out = np.asarray(run.outputs)
    steps = np.where(out > 1, out - 1, 1)
    tpot = np.where(out > 1, (run.finish - run.first_token) / steps, np.nan)
    return ttft, tpot


def attainment(ttft, tpot, targets: SloTargets) -> float | None:
    """The share of requests whose TTFT <= the TTFT target and TPOT <= the TPOT target (NaN TPOT: one output token,
    meets), vectorized; None with no requests."""
    import numpy as np

    ttft, tpot = np.asarray(ttft, dtype=float), np.asarray(tpot, dtype=float)
    if not len(ttft):
        return None
    ok = np.ones(len(ttft), dtype=bool)
    if targets.ttft is not None:
        ok &= ttft <= targets.ttft
    if targets.tpot is not None:
        ok &= np.isnan(tpot) | (tpot <= targets.tpot)
    return float(np.count_nonzero(ok)) / len(ok)


def percentile_figure(run, kind: str, q: int) -> Seconds:
    """A simulated run's TTFT (``kind`` "ttft") or TPOT ("tpot", over the requests of more than one output token) at
    percentile ``q`` (numpy's linear interpolation), as a typed value."""
    import numpy as np

    ttft, tpot = request_arrays(run)
    values = ttft if kind == "ttft" else tpot[~np.isnan(tpot)]
    from kvplan.calc.costs import frontend_seconds

    plus = " + frontend latency" if frontend_seconds(run.scenario).number() else ""
    what = f"TTFT = first token - arrival{plus}" if kind == "ttft" else "TPOT = (finish - first token) / (output - 1)"
    v = float(np.percentile(values, q)) if len(values) else None
    return Seconds(v, derived(f"simulated: p{q} of {what} over {len(values):,} requests (numpy linear "
                              "interpolation)", f"p{q} = {v:.6g}" if v is not None else "no requests"))


def run_figures(run, targets: SloTargets, have: dict | None = None) -> dict[str, Value]:
    """A simulated run's SLO figures as typed values: ``ttft_seconds_pQ`` and ``tpot_seconds_pQ`` at the targets'
    percentiles (those ``have`` does not carry already) and ``slo_attainment``."""
    have = have or {}
    ttft, tpot = request_arrays(run)
    n = len(ttft)
    out: dict[str, Value] = {}
    for name, q in (("ttft", targets.ttft_percentile), ("tpot", targets.tpot_percentile)):
        key = f"{name}_seconds_p{q}"
        if key not in have:
            out[key] = percentile_figure(run, name, q)
    a = attainment(ttft, tpot, targets)
    met = None if a is None else round(a * n)
    out["slo_attainment"] = Fraction(a, derived(
        "simulated: requests meeting " + (" and ".join(f"{name} <= {v * 1e3:g} ms" for name, _, v in
                                                       targets.bounds()) or "no target") + " / requests",
        f"{met:,} / {n:,} = {a:.4g}" if a is not None else "no requests"))
    return out


@dataclass(frozen=True)
class Verdict:
    """Whether a run meets the targets, and the figure that decided: "" when it meets, else the first that failed:
    ``"TTFT p99"``, ``"TPOT p99"`` (the percentile form) or ``"attainment"``."""

    meets: bool
    decided_by: str


@dataclass(frozen=True)
class Deciding:
    """The figure that decides a judged run (``deciding``): ``label`` (the verdict's ``decided_by`` when it misses;
    for a run that meets, the figure nearest its target), ``key`` among the run's figures, the typed ``figure`` and
    its ``target`` (None for overload: a growing queue has no bound, it misses whatever its size)."""

    label: str
    key: str
    figure: Value
    target: Value | None

    @property
    def share(self) -> float:
        """How much of its target the figure uses (above 1 misses): figure / target for a time; for the attainment
        (a floor) the share of requests missing the SLO over the share the target allows, (1 - attainment) /
        (1 - target); infinite for overload or a figure with no value."""
        v, t = self.figure.value, None if self.target is None else self.target.value
        if v is None or t is None:
            return math.inf
        if self.key == "slo_attainment":
            return (1 - v) / (1 - t) if t < 1 else 0.0 if v >= 1 else math.inf
        return v / t if t else math.inf


def deciding(figures: dict, targets: SloTargets, verdict: Verdict) -> Deciding:
    """The figure of ``figures`` (a run judged by ``judge`` or ``simulate.sweep_verdict``) that decides ``verdict``:
    the one that failed, with its number (the queue's waiting requests at the last arrival for overload); for a run
    that meets, the judged figure with the highest share of its target (the least headroom). One reading for every
    place that puts a load verdict into words (``recommend.load_outcome``, the ``--target`` search's misses)."""
    checks = []
    if targets.tpot is not None:
        q = targets.tpot_percentile
        checks.append(Deciding(f"TPOT p{q}", f"tpot_seconds_p{q}", figures[f"tpot_seconds_p{q}"],
                               Seconds(targets.tpot, given(targets.tpot_origin))))
    if targets.ttft is not None:
        q = targets.ttft_percentile
        checks.append(Deciding(f"TTFT p{q}", f"ttft_seconds_p{q}", figures[f"ttft_seconds_p{q}"],
                               Seconds(targets.ttft, given(targets.ttft_origin))))
    if targets.any and "slo_attainment" in figures:
        checks.append(Deciding("attainment", "slo_attainment", figures["slo_attainment"],
                               Fraction(targets.attainment, given(targets.attainment_origin or "the default"))))
    if not verdict.meets:
        if verdict.decided_by == "overload":
            return Deciding("overload", "waiting_at_last_arrival", figures["waiting_at_last_arrival"], None)
        hit = next((c for c in checks if c.label == verdict.decided_by), None)
        if hit is None:          # a verdict judged on a figure no target here names (the recompute cap)
            raise KvplanError(f"no figure decides a run judged {verdict.decided_by!r}", "report this as a bug")
        return hit
    if not checks:
        raise KvplanError("a run judged with no SLO target has no deciding figure", "give --tpot-slo or --ttft-slo")
    return max(checks, key=lambda c: c.share)


def judge(figures: dict, targets: SloTargets) -> Verdict:
    """The percentile form, then the attainment form (module docstring), on a run's typed figures (the keys
    ``run_figures`` and the simulator's metrics give). A figure that is None (no requests) fails its target; a run
    without ``slo_attainment`` (no per-request figures) is judged on the percentile form alone."""
    checks = []
    if targets.tpot is not None:
        checks.append((f"TPOT p{targets.tpot_percentile}", f"tpot_seconds_p{targets.tpot_percentile}", targets.tpot))
    if targets.ttft is not None:
        checks.append((f"TTFT p{targets.ttft_percentile}", f"ttft_seconds_p{targets.ttft_percentile}", targets.ttft))
    for label, key, slo in checks:
        v = figures[key].value
        if v is None or v > slo:
            return Verdict(False, label)
    a = figures.get("slo_attainment")
    if targets.any and a is not None and (a.value is None or a.value < targets.attainment):
        return Verdict(False, "attainment")
    return Verdict(True, "")


# --- goodput --------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Goodput:
    requests_per_second: Number       # None: no swept rate meets
    tokens_per_second: Number


def goodput(rates: tuple[float, ...], meets: tuple[bool, ...], mean_output_tokens: float | None,
            targets: SloTargets, max_recompute_rate: float | None = None) -> Goodput:
    """The highest swept rate at which it and every lower one meet the targets (and the recompute cap, when
    given), a grid point, and its output tokens/s = rate x mean output tokens per request."""
    best = None
    for r, ok in zip(rates, meets, strict=True):
        if not ok:
            break
        best = r
    rps = Number(best, derived(
        "simulated: the highest swept rate at which it and every lower rate meet " + " and ".join(
            [f"{name} p{q} <= {v * 1e3:g} ms" for name, q, v in targets.bounds()]
            + ([f"recompute rate <= {max_recompute_rate:g}"] if max_recompute_rate is not None else []))
        + (f" with at least {targets.attainment:.0%} of requests meeting both" if targets.any else "")
        + " (a grid point, not interpolated)",
        "meeting: " + (", ".join(f"{r:g}" for r, ok in zip(rates, meets, strict=True) if ok) or "none")
        + f" of {len(rates)} rates; goodput = " + (f"{best:g} requests/s" if best is not None
                                                   else "below the lowest rate")))
    tok = None if best is None or mean_output_tokens is None else best * mean_output_tokens
    tokens = Number(tok, derived("goodput requests/s x mean output tokens per request (the output served in steady "
                                 "state at that rate; a run's tokens/s averages over its drain too)",
                                 f"{best:g} x {mean_output_tokens:.6g} = {tok:.6g}" if tok is not None
                                 else "no goodput"))
    return Goodput(rps, tokens)


# --- closed form ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SteadyBatch:
    """A steady batch of equal requests in closed form: every request's TTFT and TPOT the same."""

    attainment: Fraction          # 0 or 1
    verdict: Verdict
    requests_per_second: Number   # Little's law: batch / (TTFT + (output - 1) x TPOT)
    tokens_per_second: Number     # x output tokens; goodput when the verdict meets, else 0


def steady_batch(batch: int, ttft: float, tpot: float, output_tokens: int, targets: SloTargets) -> SteadyBatch:
    """Closed form for ``batch`` equal requests of ``output_tokens`` decoding together at ``tpot`` s per token after a
    ``ttft``: each percentile of TTFT and TPOT is that one value, so the attainment is 1 when both targets hold and
    0 otherwise, and the rate the batch serves is Little's law."""
    ok_ttft = targets.ttft is None or ttft <= targets.ttft
    ok_tpot = targets.tpot is None or output_tokens <= 1 or tpot <= targets.tpot
    a = 1.0 if ok_ttft and ok_tpot else 0.0
    att = Fraction(a, derived("closed form: equal requests all meet or all miss: 1 when TTFT and TPOT meet the "
                              "targets, else 0", f"TTFT {ttft:.6g} s, TPOT {tpot:.6g} s -> {a:g}"))
    figures: dict[str, Value] = {f"ttft_seconds_p{targets.ttft_percentile}": Seconds(ttft),
                                 f"tpot_seconds_p{targets.tpot_percentile}": Seconds(tpot), "slo_attainment": att}
    verdict = judge(figures, targets)
    time = ttft + (output_tokens - 1) * tpot
    rate = batch / time
    rps = Number(rate, derived("closed form (Little's law): batch / (TTFT + (output - 1) x TPOT)",
                               f"{batch:,} / ({ttft:.6g} + {output_tokens - 1:,} x {tpot:.6g}) = {rate:.6g}"))
    tok = rate * output_tokens if verdict.meets else 0.0
    tokens = Number(tok, derived("closed form: requests/s x output tokens when the targets are met, else 0",
                                 f"{rate:.6g} x {output_tokens:,} = {tok:.6g}" if verdict.meets else "targets missed"))
    return SteadyBatch(att, verdict, rps, tokens)


# --- the largest batch meeting the targets ---------------------------------------------------------------------
def largest_meeting(meets, start: int, ceiling: int) -> tuple[int, int | None]:
    """The largest batch in 1..``ceiling`` for which ``meets(batch)`` holds, for figures that grow with the batch
    (a simulated run's TPOT): galloping from ``start`` (a closed form's batch, near the answer) to a bracket, then
    bisection. Returns (batch, the first batch above it, which misses, or None when the ceiling meets); (0, 1) when
    batch 1 misses. ``pd``'s colocated side and ``recommend``'s batch row search with it, so one batch answers
    both."""
    ceiling = max(ceiling, 1)
    b, step = min(max(start, 1), ceiling), 1
    if meets(b):                 # gallop up to the first batch that misses
        lo = b
        while True:
            nxt = min(lo + step, ceiling)
            if nxt == lo:
                return lo, None
            if not meets(nxt):
                hi = nxt
                break
            lo, step = nxt, step * 2
    else:                        # gallop down to a batch that meets
        hi = b
        while True:
            nxt = max(hi - step, 1)
            if nxt == hi:
                return 0, 1
            if meets(nxt):
                lo = nxt
                break
            hi, step = nxt, step * 2
    while hi - lo > 1:           # lo meets, hi misses
        mid = (lo + hi) // 2
        if meets(mid):
            lo = mid
        else:
            hi = mid
    return lo, hi
