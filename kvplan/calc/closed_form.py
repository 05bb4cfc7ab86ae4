"""The closed-form model of one replica: the step model and KV pool of a scenario's replica (``costs``, ``capacity``)
and what they give without simulating, under the SLO's TPOT target: the batch limit, TPOT by batch, the prefill's
price (alone, packed, shared across attention-DP ranks, mixed into decode steps), the colocated and pure-decode sides
and the rate a replica sustains. ``kvplan pd`` builds on it (``pd._Model``: the simulated colocated goodput) and
``kvplan simulate``'s capacity witness reads ``sustained``; it imports neither, so simulate reads it without
importing pd (which imports simulate). ``pd`` re-exports every public name here (``from kvplan.calc.pd import
PdOptions, Side`` keeps working).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from kvplan.calc import capacity, costs
from kvplan.calc.slo import SloTargets
from kvplan.errors import KvplanError
from kvplan.scenario import Scenario

DEFAULT_TPOT_SLO = 0.05
TPOT_SLO_SOURCE = ("50 ms per output token: DeepSeek's production V3/R1 decode served 20-22 tokens/s per user "
                   "(github.com/deepseek-ai/open-infra-index, Day 6 inference system overview)")
PREFILL_ROLE_SOURCE = (
    "a prefill-role rank forms its own prefill batch from its waiting queue (PrefillAdder) and the attention-DP ranks "
    "then run it in one synchronised forward (ranks without a prompt run an idle batch): get_next_disagg_prefill_"
    "batch_to_run -> get_new_batch_prefill, dp_attn_adapter.maybe_prepare_mlp_sync_batch, sgl-project/sglang@000c2b9 "
    "python/sglang/srt/disaggregation/prefill.py (v0.4.6: prepare_dp_attn_batch in event_loop_normal_disagg_prefill)"
    "; so an instance of R ranks prefills R prompts in one pass, each rank's prompt with EP / R of the expert GPUs")
DEFAULT_HANDOVER_SECONDS = 0.002
HANDOVER_SOURCE = "kvplan's assumption: ~2 ms per request to hand a prefilled request over (scheduling, one RPC)"
COLOCATED_SHARING_ROUNDS = 3    # rounds of rate -> prefill price -> rate of the attention-DP closed form


@dataclass(frozen=True)
class PdOptions:
    """``targets``: the SLO model's TTFT and TPOT targets at a percentile (default: ``tpot_slo`` at p99, no TTFT
    target); given, its TPOT target (or the default 50 ms when it has none) replaces ``tpot_slo``."""

    tpot_slo: float = DEFAULT_TPOT_SLO
    nic_gbps: float | None = None
    prefill_gpus: int | None = None
    handover_seconds: float = DEFAULT_HANDOVER_SECONDS
    chunked: bool = True
    factors: dict | None = None
    targets: SloTargets | None = None
    table: bool = True       # the ratio table (False: the verdict at this request alone, e.g. for recommend's row)
    prefill_hardware: str | None = None   # --prefill-gpu: the prefill role's GPU (None: the scenario's)
    decode_hardware: str | None = None    # --decode-gpu: the decode role's GPU (None: the scenario's)

    def __post_init__(self) -> None:
        from dataclasses import replace

        t = self.targets if self.targets is not None else SloTargets(tpot=self.tpot_slo)
        if t.tpot is None:
            t = replace(t, tpot=self.tpot_slo)
        object.__setattr__(self, "targets", t)
        object.__setattr__(self, "tpot_slo", t.tpot)
        slo = self.tpot_slo
        if not (isinstance(slo, (int, float)) and math.isfinite(slo) and 1e-4 <= slo <= 10):
            raise KvplanError(f"--tpot-slo {self.tpot_slo!r} s is outside 0.1 ms .. 10 s", "give it like 50ms")
        if self.nic_gbps is not None and not (math.isfinite(self.nic_gbps) and 0.1 <= self.nic_gbps <= 10_000):
            raise KvplanError(f"--nic-gbps {self.nic_gbps!r} is outside 0.1 .. 10,000 GB/s", "give it like 50")


@dataclass(frozen=True)
class Side:
    """One way of serving at one prompt length: its batch, TPOT and goodput."""

    batch: int
    tpot: float
    requests_per_second: float
    tokens_per_second: float


class ClosedFormReplica:
    """The step model and pool limits of the scenario's replica, reused for every prompt length, and what they give
    in closed form (no simulation): the batch limit, TPOT by batch, prefill prices, the colocated and pure-decode
    sides, the sustained rate. ``kvplan.calc.pd._Model`` adds the simulated colocated goodput on top."""

    def __init__(self, s: Scenario, o: PdOptions) -> None:
        import numpy as np

        self.s, self.o = s, o
        self.factors = costs.step_factors(s.hardware, **(o.factors or {}))
        self.step = costs.step_model(s, self.factors)
        self.pool = capacity.kv_pool(s).kv_pool_bytes
        mnbt, seqs = s.engine_adapter.batch_limits_for(s)
        self.chunk = mnbt.number()
        self.max_seqs = int(seqs.number())
        self.batches = np.arange(1, 4097, dtype=float)

    def fit(self, context: int) -> int:
        return capacity.fit(self.pool, capacity.request_bytes(self.s, context))

    def batch_limit(self, p: int, d: int) -> int:
        """The one batch limit both sides are judged at: the KV pool holding every request at its full context p +
        d (the fullest state of the batch, which the SLO's percentile sees: a colocated closed loop's requests end
        together there, and a decode instance fed at its capacity has its batch above the mean as often as below),
        the engine's max_num_seqs, and the table's 4,096."""
        return min(self.fit(p + d), self.max_seqs, len(self.batches))

    def tpot_by_batch(self, p: int, d: int):
        """Steady decode TPOT for batches 1..4096 with contexts spread over p..p+d."""
        return self.step.steady_tpot(p, d, self.batches)

    def prefill(self, p: int) -> float:
        """T_pf of a prompt of ``p`` tokens alone on the prefill role (``prefill_passes``' first)."""
        return self.prefill_passes(p)[0]

    def prefill_batch(self, p: int) -> int:
        """k, the prompts of ``p`` tokens a saturated prefill-role rank packs into one pass: as many as its token
        budget holds, min(max_num_batched_tokens // p, max_num_seqs), at least 1 (a longer prompt runs alone, in
        chunks). SGLang's prefill role fills a batch from its waiting queue up to its token budget (PrefillAdder,
        ``PREFILL_ROLE_SOURCE``) and vLLM's scheduler takes waiting prompts while max_num_batched_tokens lasts
        (``kvplan.engines.vllm_scheduler``'s "Then the waiting queue")."""
        return max(1, min(self.chunk // max(p, 1), self.max_seqs))

    def prefill_passes(self, p: int) -> tuple[float, ...]:
        """The pass of j = 1 .. k (``prefill_batch``) prompts of ``p`` tokens packed together on the prefill role
        (``StepModel.prefill_seconds`` with ``prompts`` = j: one weight read a pass, j prompts' FLOPs and
        communication): j = 1 is T_pf, a prompt alone (its TTFT at low load); a saturated rank serves k prompts a
        pass, T(k) / k each. Under attention DP (EP over the ranks) a saturated instance has every rank prefilling
        at once, so each rank's prompts get EP / DP = TP of the expert GPUs, not the whole EP group (which only a
        prompt alone on an idle instance gets). The ranks' prefills are aligned, one pass for the R ranks' prompts,
        not R passes (``PREFILL_ROLE_SOURCE``): a saturated role's ranks all have a prompt waiting at every step,
        the N = R end of the colocated side's pass sharing (``colocated_prefill``, ``costs.PASS_SHARING_SOURCE``),
        where at the rates a TPOT target allows few prompts share a pass."""
        par = self.s.parallelism
        spread = par.ep // par.dp if par.dp > 1 and par.ep and par.ep > par.tp else None
        chunk = self.chunk if self.o.chunked else None
        return tuple(self.step.prefill_seconds(p, 0, chunk, spread, prompts=j)
                     for j in range(1, self.prefill_batch(p) + 1))

    def colocated_prefill(self, p: int, rate: float = 0.0, d: int = 0) -> float:
        """What a colocated prefill of ``p`` tokens costs a rank's decode, as the simulator prices it: the prefill's
        pass, and under attention DP (every pass holds every rank, ``costs.LOCKSTEP_SOURCE``) R / N passes of N
        prompts each, N the prompts that share a pass when each rank receives ``rate`` prompts a second
        (``StepModel.shared_pass_ranks``, ``costs.PASS_SHARING_SOURCE``; rate 0: N = 1, R passes alone)."""
        chunk = self.chunk if self.o.chunked else None
        return self.sharing(p, d, rate).prefill_seconds(p, 0, chunk, lockstep=True)

    def sharing(self, p: int, d: int, rate: float):
        """The step model with the prompts that share a pass and the decode step a pass runs inside, at ``rate``
        prompts a second a rank (``StepModel.with_pass_sharing``: the batch by Little's law, at most
        ``batch_limit``)."""
        return self.step.with_pass_sharing(rate, p, self.chunk if self.o.chunked else None, d, None,
                                           self.batch_limit(p, d))

    def colocated(self, p: int, d: int) -> tuple[Side, float, float]:
        """Best batch meeting the SLO on mean TPOT with prefill interference: (side, plain TPOT, T_pf). Under
        attention DP the prefill's price depends on the rate (how many ranks' prompts share a pass), so the rate
        and the price are iterated from pure decode's rate (``COLOCATED_SHARING_ROUNDS`` rounds)."""
        rate = float(self.decode_only(p, d).requests_per_second) if self.step.lockstep_ranks > 1 else 0.0
        out = self._colocated_at(p, d, rate)
        for _ in range(COLOCATED_SHARING_ROUNDS - 1 if self.step.lockstep_ranks > 1 else 0):
            out = self._colocated_at(p, d, float(out[0].requests_per_second))
        return out

    def _colocated_at(self, p: int, d: int, rate: float) -> tuple[Side, float, float]:
        import numpy as np

        limit = self.batch_limit(p, d)
        t_pf = self.colocated_prefill(p, rate, d)
        plain = self.tpot_by_batch(p, d)[:limit]
        mean = costs.colocated_tpot(plain, t_pf, self.batches[:limit], d)
        ok = np.nonzero(mean <= self.o.tpot_slo)[0]
        if not len(ok):
            worst = float(mean[0]) if limit else math.inf
            return Side(0, worst, 0.0, 0.0), float(plain[0]) if limit else math.inf, t_pf
        # among batches meeting the SLO, the one with the most requests/s: B / (D x TPOT + T_pf), a slot's cycle
        # holding its own prefill and the other B - 1 (d >= 1: plan_pd refuses an empty output)
        rps = self.batches[:limit][ok] / (d * mean[ok] + t_pf)
        j = int(np.argmax(rps))
        i = ok[j]
        b = int(self.batches[i])
        return Side(b, float(mean[i]), float(rps[j]), float(rps[j] * d)), float(plain[i]), t_pf

    def steps_prefill(self, p: int, d: int, batch: int, rate: float = 0.0) -> float:
        """What one colocated prefill of ``p`` tokens adds to the replica's steps while ``batch`` - 1 others
        decode, as the engine schedules it: an engine that mixes prefill chunks into the decode steps (vLLM V1:
        ``Engine.mixes_prefill_chunks``) pays, per chunk (the token budget less the decode tokens), the mixed step
        less the decode step alone (``StepModel.mixed_parts``: the weights are read once for both); one that runs
        prefills as steps of their own pays ``colocated_prefill``. ``rate``: the prompts a second a rank, for the
        attention-DP pass sharing."""
        if not (self.o.chunked and self.s.engine_adapter.mixes_prefill_chunks()):
            return self.colocated_prefill(p, rate, d)
        step = self.sharing(p, d, rate)
        b = max(batch - 1, 0)
        mean_b, mean_f = step.steady_cache(p, d)
        chunk = max(self.chunk - b, 1)
        added, start = 0.0, 0
        while start < p:
            end = min(p, start + chunk)
            mixed, alone = step.mixed_parts(b, b * mean_b, b * mean_f, [(start, end)])
            added += mixed - alone
            start = end
        return added

    def packed_prefill(self, p: int, d: int, batch: int, rate: float = 0.0) -> tuple[float, float]:
        """(T_pf, k): what one colocated prompt of ``p`` tokens costs a saturated replica whose batch is held at
        ``batch`` = B, and the prompts a prefill pass holds on average. On an engine that runs prefills as passes of
        their own (no mixed chunks) the prompts waiting at a step share one pass up to the token budget (vLLM V0's
        ``_schedule_prefills``, SGLang's PrefillAdder: ``costs.PREFILL_PACKING_SOURCE``; the simulator's rule book
        alike). Saturated, each step frees the slots of the requests that finish in it, B / D on average (a request
        holds its slot D steps), and the queue fills them in that step's pass: k = B / D prompts a pass, at least 1,
        at most ``prefill_batch`` (the token budget // p, max_num_seqs). Passes then hold floor(k) or floor(k) + 1
        prompts, in the shares that average k: T_pf = ((1 - f) x T(floor k) + f x T(floor k + 1)) / k, f = k -
        floor k, T(j) the pass of j prompts (``StepModel.prefill_pass_seconds``; lockstep under attention DP as
        ``colocated_prefill``; T(1) is ``colocated_prefill``). An engine that mixes chunks into decode steps (vLLM
        V1): ``steps_prefill``, k = 1."""
        if self.o.chunked and self.s.engine_adapter.mixes_prefill_chunks():
            return self.steps_prefill(p, d, batch, rate), 1.0
        k = min(max(batch / max(d, 1), 1.0), float(self.prefill_batch(p)), float(max(batch, 1)))
        step, chunk = self.sharing(p, d, rate), (self.chunk if self.o.chunked else None)
        lo = int(k)
        f = k - lo
        mean = step.prefill_pass_seconds([(0, p)] * lo, chunk, lockstep=True)
        if f > 0:
            mean += f * (step.prefill_pass_seconds([(0, p)] * (lo + 1), chunk, lockstep=True) - mean)
        return mean / k, k

    def sustained(self, p: int, d: int, batch: int | None = None) -> tuple[float, int, float, float]:
        """The most requests/s one replica sustains, in closed form: its batch can grow no further than
        ``batch_limit`` (the KV pool at the full context, max_num_seqs), and each request costs the replica its
        prefill (``packed_prefill``: where prefills are passes of their own, the B / D prompts waiting at a step share
        one; ``steps_prefill`` where chunks ride in decode steps) and its share of D steps of that batch, so
        B / (D x TPOT(B) + B x T_pf) at B = the limit (the rate rises with the batch). Above it the waiting queue
        grows without bound however the TPOT looks (a pool-capped batch keeps its TPOT while the queue grows),
        which a short simulated run may not show (``colocated_goodput`` caps its rates here). Under attention DP the
        prefill's price depends on the rate (pass sharing), iterated ``COLOCATED_SHARING_ROUNDS`` times from pure
        decode's rate. ``batch``: B given (simulate's capacity witness, ``simulate.closed_form_capacity``, prices the
        pool at the batch's mean context, the fluid bound); None: ``batch_limit``. Returns (rate, B, T_pf, TPOT(B))."""
        b = self.batch_limit(p, d) if batch is None else batch
        if b < 1:
            return 0.0, 0, math.inf, math.inf
        plain = float(self.tpot_by_batch(p, d)[b - 1])
        lock = self.step.lockstep_ranks > 1
        rate = float(self.decode_only(p, d).requests_per_second) if lock else 0.0
        t_pf = math.inf
        for _ in range(COLOCATED_SHARING_ROUNDS if lock else 1):
            t_pf = self.packed_prefill(p, d, b, rate)[0]
            rate = b / (d * plain + b * t_pf)
        return rate, b, t_pf, plain

    def ceiling(self, p: int, d: int) -> int:
        """No colocated closed-loop batch above pure decode's (prefills only add to a step) or the KV pool's at the
        full context (the loop's requests run in lockstep) meets."""
        return min(max(self.decode_only(p, d).batch, 1), self.batch_limit(p, d))

    def decode_only(self, p: int, d: int) -> Side:
        """Pure decode of equal requests arriving one after another: contexts spread evenly over p..p+d (the step
        model's steady batch, so a request's TPOT is the step at the mean context), the batch held to
        ``batch_limit`` (the pool at the full context p + d, as the colocated side's: pricing the decode pool at the
        mean context p + d/2 gave the split 41 requests a rank where colocated had 31 on DeepSeek-R1 1K + 30K); the
        largest batch whose TPOT meets the target, its TPOT and rates."""
        import numpy as np

        limit = self.batch_limit(p, d)
        plain = self.tpot_by_batch(p, d)[:limit]
        ok = np.nonzero(plain <= self.o.tpot_slo)[0]
        if not len(ok):
            return Side(0, float(plain[0]) if limit else math.inf, 0.0, 0.0)
        tps = self.batches[:limit][ok] / plain[ok]
        i = ok[int(np.argmax(tps))]
        b = int(self.batches[i])
        return Side(b, float(plain[i]), b / (d * plain[i]) if d else math.inf, float(b / plain[i]))
