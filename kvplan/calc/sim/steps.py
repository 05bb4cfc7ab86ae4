"""The prices ``kvplan simulate``'s event loop pays, in closed form: a run of k decode steps of the running batch,
a prefill, a swap; and the block table and caps they rest on.

Between events nothing changes but the contexts, each one token per step, so a run of k steps is summed in closed
form: a request's cache bytes and attention FLOPs are affine in its context between the caps of its layer kinds
(windows, top-k), the step is base(B) + max(bytes / BW, FLOPs / peak), and the sum of the max of two affine series
splits at their crossing (``_affine_max_sum``). The step an event falls in is found by bisection on that sum
(``_first_step_reaching``); the step that overfills the pool by ``_last_step_that_fits`` (or the replica state's
phase counts). ``reference=True`` prices each step with ``StepModel.step`` directly: the tests' check on the closed
forms. With speculative decoding a step is priced per accepted token (``Prices.step``, ``Prices._spec_run``: an
acceptance falling with context is affine over a run, and affine / affine sums are digamma differences).
"""

from __future__ import annotations

import functools
import math
from typing import Any

from kvplan.calc import capacity, costs
from kvplan.scenario import Scenario


def _block_table(s: Scenario, block: int, block_bytes: int, longest: int):
    """(table, nbytes): request_bytes(c) = nbytes[ceil(c / block)] and blocks(c) = table[ceil(c / block)], the
    blocks of one block-bytes each that it fills. A request's bytes are constant between block boundaries: every
    layer rounds its tokens up to whole blocks, and ceil(min(c, cap) / block) = min(ceil(c / block),
    ceil(cap / block)) for a kind that keeps at most cap tokens (simulate refuses speculative slots, which would
    shift the context)."""
    import numpy as np

    kmax = -(-longest // block) + 2
    nbytes = np.array(_bytes_by_blocks(s, block, kmax), dtype=np.int64)
    return -(-nbytes // block_bytes), nbytes


def _bytes_by_blocks(s: Scenario, block: int, kmax: int) -> list[int]:
    """request_bytes(k x block) for k = 0 .. kmax, with few calls when blocks are small (SGLang's 1-token pages):
    each layer's term is affine in k between its breakpoints (its kind keeps min(context, cap) tokens: k =
    cap // block and the next; the shared prefix's whole blocks: k = shared // block), so on a segment between
    breakpoints each pipeline stage's bytes are affine and their maximum (plus a draft's) is convex; a convex
    function that meets its chord at an interior point is affine on the segment, so a segment whose middle
    lies on the chord is filled in from its ends (exact integers), and any other is halved."""
    def f(k: int) -> int:
        return capacity.request_bytes(s, k * block, block=block)

    cuts = {0, kmax, s.shared_prefix_tokens // block}
    for model in (s.sized_model, s.draft):
        for g in (model.groups if model is not None else ()):
            cap = g.kind.tokens_cap
            if cap is not None:
                cuts.update((cap // block, cap // block + 1))
    out = [0] * (kmax + 1)
    known: dict[int, int] = {}

    def at(k: int) -> int:
        if k not in known:
            known[k] = f(k)
        return known[k]

    def fill(a: int, b: int) -> None:
        fa, fb = at(a), at(b)
        out[a], out[b] = fa, fb
        if b - a < 2:
            return
        m = (a + b) // 2
        if at(m) * (b - a) == fa * (b - m) + fb * (m - a):
            step = (fb - fa) // (b - a)
            out[a:b] = range(fa, fa + step * (b - a), step) if step else [fa] * (b - a)
            return
        fill(a, m)
        fill(m, b)

    edges = sorted(c for c in cuts if 0 <= c <= kmax)
    for a, b in zip(edges, edges[1:], strict=False):
        fill(a, b)
    return out


def _caps(s: Scenario):
    """Contexts where some layer kind's decode reads or FLOPs stop growing linearly (windows, top-k)."""
    import numpy as np

    caps = set()
    for g in s.sized_model.groups:
        for cap in (g.kind.tokens_cap, g.kind.attended_keys_cap(), getattr(g.kind, "index_topk", None)):
            if cap:
                caps.add(int(cap))
    return np.array(sorted(caps), dtype=np.int64)


def _last_step_that_fits(x, block: int, slack: int) -> int:
    """The most decode steps a batch whose next step reads contexts ``x`` can run with ``slack`` blocks to spare
    after its first step, when every block boundary a request crosses adds exactly one block (no windows).

    After k steps request i holds ceil((x_i + k - 1) / block) blocks, one more each time x_i + k - 1 passes a
    multiple of block: at steps c_i = 2 + (-x_i mod block), c_i + block, ... The pool overflows at the
    (slack + 1)-th crossing of all of them: the (slack mod b)-th smallest c_i, (slack div b) blocks on. The
    batch runs to the step before it."""
    import numpy as np

    q, r = divmod(int(slack), len(x))
    c = 2 + (-x) % block
    return int(np.partition(c, r)[r]) + q * block - 1


def _lin(p0, p1, t0, t1):
    """sum_{t=t0}^{t1-1} (p0 + p1 t)."""
    n = t1 - t0
    return n * p0 + p1 * n * (t0 + t1 - 1) / 2 if n > 0 else 0.0


def _max_split(u0, u1, v0, v1, k):
    """max(u0 + u1 t, v0 + v1 t) for t in [0, k) as (m, a0, a1, b0, b1): series a wins on [0, m), b on [m, k)."""
    d0, d1 = u0 - v0, u1 - v1
    if d1 == 0:                  # parallel: one wins throughout
        return (k if d0 >= 0 else 0), u0, u1, v0, v1
    if d1 > 0:                   # u wins from the crossing on
        return min(max(math.ceil(-d0 / d1), 0), k), v0, v1, u0, u1
    return min(max(math.floor(-d0 / d1) + 1, 0), k), u0, u1, v0, v1


def _affine_max_sum(u0, u1, v0, v1, k):
    """sum_{t=0}^{k-1} max(u0 + u1 t, v0 + v1 t), in closed form: series a wins on [0, m), b on [m, k) (the same
    arithmetic as ``_lin`` on each side; a side with no terms is left out rather than added as 0.0)."""
    m, a0, a1, b0, b1 = _max_split(u0, u1, v0, v1, k)
    if m >= k:
        return k * a0 + a1 * k * (k - 1) / 2
    if m <= 0:
        return k * b0 + b1 * k * (k - 1) / 2
    return m * a0 + a1 * m * (m - 1) / 2 + _lin(b0, b1, m, k)


def _digamma(x: float) -> float:
    """psi(x) for x > 0: the recurrence up to 10, then the asymptotic series (error below 1e-16 there)."""
    acc = 0.0
    while x < 10.0:
        acc -= 1.0 / x
        x += 1.0
    inv = 1.0 / (x * x)
    return acc + math.log(x) - 0.5 / x - inv * (1 / 12 - inv * (1 / 120 - inv * (1 / 252 - inv * (1 / 240
                                                                                                  - inv / 132))))


def _inverse_sum(alpha: float, beta: float, t0: int, t1: int) -> float:
    """sum_{t=t0}^{t1-1} 1 / (alpha - beta t) (every term positive): written out for a few terms, else (psi(z - t0
    + 1) - psi(z - t1 + 1)) / beta with z = alpha / beta."""
    if t1 <= t0:
        return 0.0
    if beta == 0:
        return (t1 - t0) / alpha
    if t1 - t0 <= 32:
        return math.fsum(1.0 / (alpha - beta * t) for t in range(t0, t1))
    if beta < 0:                  # a rising acceptance: 1 / (|beta| (w + t)), w = alpha / |beta|
        w = -alpha / beta
        return (_digamma(w + t1) - _digamma(w + t0)) / -beta
    z = alpha / beta
    return (_digamma(z - t0 + 1) - _digamma(z - t1 + 1)) / beta


def _ratio_sum(p, q, alpha, beta, t0, t1):
    """sum_{t=t0}^{t1-1} (p + q t) / (alpha - beta t): (p + q t) = -q / beta (alpha - beta t) + (p + q alpha / beta)
    when beta != 0."""
    if t1 <= t0:
        return 0.0
    if beta == 0:
        return _lin(p, q, t0, t1) / alpha
    return -q / beta * (t1 - t0) + (p + q * alpha / beta) * _inverse_sum(alpha, beta, t0, t1)


def _affine_max_ratio_sum(u0, u1, v0, v1, k, alpha, beta):
    """sum_{t=0}^{k-1} max(u0 + u1 t, v0 + v1 t) / (alpha - beta t), split where the two series cross."""
    m, a0, a1, b0, b1 = _max_split(u0, u1, v0, v1, k)
    return _ratio_sum(a0, a1, alpha, beta, 0, min(m, k)) + _ratio_sum(b0, b1, alpha, beta, max(m, 0), k)


def _first_step_reaching(step0, u0, u1, v0, v1, k, target, elapsed_k):
    """(j, elapsed(j)) for the fewest steps j in 1 .. k whose time elapsed(j) = j step0 + _affine_max_sum(u0, u1,
    v0, v1, j) reaches ``target`` (k itself, at ``elapsed_k``, when none before it does): a bisection over
    elapsed(lo) < target <= elapsed(hi), its first two probes the root of the series that wins at step 0,
    (c1 / 2) j^2 + (step0 + c0 - c1 / 2) j = target, rounded up, and the step below it (elapsed grows by at least
    step0 a step, so any probes that keep the bracket end at the same j; without a crossing these two close it)."""
    c0, c1 = (u0, u1) if u0 >= v0 else (v0, v1)
    lin, quad = step0 + c0 - c1 / 2, c1 / 2
    disc = lin * lin + 4 * quad * target
    guess = math.ceil(2 * target / (lin + math.sqrt(disc))) if lin > 0 and disc >= 0 else k // 2
    # each probe's elapsed(j) is j step0 + _affine_max_sum(u0, u1, v0, v1, j) written out, the same arithmetic in
    # the same order: _max_split's crossing does not depend on j (it is clamped to [0, j]), so it is found once
    d0, d1 = u0 - v0, u1 - v1
    if d1 == 0:                  # parallel: one wins throughout
        cross, a0, a1, b0, b1 = (math.inf if d0 >= 0 else 0), u0, u1, v0, v1
    elif d1 > 0:                 # u wins from the crossing on
        cross, a0, a1, b0, b1 = max(math.ceil(-d0 / d1), 0), v0, v1, u0, u1
    else:
        cross, a0, a1, b0, b1 = max(math.floor(-d0 / d1) + 1, 0), u0, u1, v0, v1
    lo, hi, at_hi = 0, k, elapsed_k
    probes = [guess - 1, guess]               # popped from the end: guess, guess - 1, then the bisection's
    while probes or hi - lo > 1:
        mid = probes.pop() if probes else (lo + hi) // 2
        if not lo < mid < hi:
            continue
        # _affine_max_sum(u0, u1, v0, v1, mid): a wins on [0, m), b on [m, mid) (_lin's sum on b's side)
        m = cross if cross < mid else mid
        if m >= mid:
            t = mid * step0 + (mid * a0 + a1 * mid * (mid - 1) / 2)
        elif m <= 0:
            t = mid * step0 + (mid * b0 + b1 * mid * (mid - 1) / 2)
        else:
            n = mid - m
            t = mid * step0 + (m * a0 + a1 * m * (m - 1) / 2 + (n * b0 + b1 * n * (m + mid - 1) / 2))
        if t >= target:
            hi, at_hi = mid, t
        else:
            lo = mid
    return hi, at_hi


def _affine_pieces(sm, caps):
    """A request's cache bytes and attention FLOPs per decode token are affine in its context on each piece between
    the caps (every layer kind reads min(context, cap) keys and a fixed state): piece j is [caps[j-1], caps[j]]
    (from 0; the last one unbounded). Returns (bytes at context 0, bytes per token, FLOPs at 0, FLOPs per token) of
    each piece, as arrays, from ``StepModel.request_cache`` at two contexts inside it."""
    import numpy as np

    edges = [0.0, *(float(c) for c in caps)]
    lo = np.array(edges)
    hi = np.array(edges[1:] + [edges[-1] + 2.0**20])
    (b_lo, f_lo), (b_hi, f_hi) = sm.request_cache(lo), sm.request_cache(hi)
    b_lo, f_lo, b_hi, f_hi = (np.broadcast_to(np.asarray(v, dtype=float), lo.shape) for v in (b_lo, f_lo, b_hi, f_hi))
    b1, f1 = (b_hi - b_lo) / (hi - lo), (f_hi - f_lo) / (hi - lo)
    return b_lo - b1 * lo, b1, f_lo - f1 * lo, f1



class Prices:
    """One replica's prices: a run of decode steps (``run``), a prefill chunked by max_num_batched_tokens
    (``prefill``, memoized), one direction of a swap (``swap_cost``); from the one cost model (``kvplan.calc.costs``:
    ``step_model``, ``swap_copies``, ``swap_seconds``) and the block table's bytes."""

    def __init__(self, s: Scenario, sm: costs.StepModel, block: int, chunk: int, bytes_at: Any, link: float,
                 reference: bool, speculative: tuple | None = None) -> None:
        self.sm = sm
        self.model, self.block, self.chunk, self.bytes_at, self.link = s.sized_model, block, chunk, bytes_at, link
        self.settings = costs.CostSettings()
        self.reference = reference
        # Speculative decoding (``SimOptions.speculative``: K and the acceptance profile, ``kvplan.calc.tpot.Accept``
        # points): a loop step is one accepted token of every running request, priced StepModel.speculative_step /
        # the mean acceptance length (the verify step over K + 1 tokens and the MTP draft's K steps, per accepted
        # token). That price is base + max(u, (K+1) v) + cd x max(u, v) over A (u, v: the batch's cache-read and
        # attention times; cd = K x MTP layers / layers). A request's acceptance is affine in its context on each
        # piece between the profile's points (``edges``; intercept ``acc0``, slope ``acc1`` per piece, flat below
        # the first and above the last), so the batch's sum is affine in the step while no request crosses a point
        # (a run is cut there), and the sums stay closed form (``_spec_run``).
        self.spec = speculative
        self.spec_k, self.mtp, self.a0, self.cd = 0, 0, 1.0, 0.0
        self.varies = False
        caps = _caps(s)
        if speculative is not None:
            import numpy as np

            self.spec_k, profile = speculative
            self.mtp = s.mtp_layers or 1
            self.cd = self.spec_k * self.mtp / sm.layers
            xs = np.array([c for c, _ in profile], dtype=float)
            ys = np.array([a for _, a in profile], dtype=float)
            self.a0 = float(ys[0])
            self.varies = bool(np.any(ys != ys[0]))
            self.edges, self.upper = xs, np.append(xs, np.inf)   # a piece's upper point (the last piece: none)
            slope = np.diff(ys) / np.diff(xs)                     # piece j (1 .. n-1) lies between points j-1, j
            self.acc1 = np.concatenate(([0.0], slope, [0.0]))
            self.acc0 = np.concatenate(([ys[0]], ys[:-1] - slope * xs[:-1], [ys[-1]]))
            self.xs, self.ys = xs, ys
        self.caps = caps
        self.has_caps = bool(self.caps.size) or self.varies   # an acceptance profile reads every context
        self.bw, self.afs = sm.bw, sm.attention_flops_s
        self.seg = _affine_pieces(sm, self.caps)
        self.one = tuple(float(v[0]) for v in self.seg)    # no caps: the one piece
        # memoized (functools.cache: the hit is one C call): a batch's base step, a prefill of (tokens, cached)
        self.base = functools.cache(self._base)
        self.prefill = functools.cache(self._prefill)

    def _base(self, b: int) -> float:
        """The step at batch b without cache reads (weights, communication, overhead)."""
        if self.spec is not None:
            return float(self.sm.speculative_step(b, 0, 0, self.spec_k, self.mtp)["total"]) / self.a0
        return float(self.sm.step(b, 0, 0)["total"])

    def accepted(self, x) -> float:
        """The batch's mean acceptance length at its contexts ``x``: the mean of the profile at each (linear between
        its points, flat beyond)."""
        if not self.varies:
            return self.a0
        import numpy as np

        return float(np.mean(np.interp(np.asarray(x, dtype=float), self.xs, self.ys)))

    def step(self, b: int, cache_bytes: float, attention_flops: float, x=None) -> float:
        """One loop step of b requests reading ``cache_bytes`` with ``attention_flops`` at contexts ``x``:
        ``StepModel.step``, or with speculative decoding its ``speculative_step`` per accepted token."""
        if self.spec is None:
            return float(self.sm.step(b, cache_bytes, attention_flops)["total"])
        total = self.sm.speculative_step(b, cache_bytes, attention_flops, self.spec_k, self.mtp)["total"]
        return float(total) / self.accepted(x)

    def _prefill(self, tokens: int, cached: int = 0) -> float:
        return self.sm.prefill_seconds(tokens, cached, self.chunk, lockstep=True)

    def prefill_pass(self, ranges) -> float:
        """One prefill pass of several prompts' (start, end) token ranges, their tokens summing to at most the chunk
        (``StepModel.prefill_pass_seconds``, lockstep as ``prefill``)."""
        return self.sm.prefill_pass_seconds(ranges, self.chunk, lockstep=True)

    def mixed(self, r, chunks) -> tuple[float, float]:
        """One step of replica state ``r``'s running batch (its next step's contexts) with prefill ``chunks``
        ((first token, past the last) each) in the same pass, and the same step without them:
        ``StepModel.mixed_parts`` of the batch's cache reads and attention FLOPs (the affine sums without caps,
        ``request_cache`` of each context with them)."""
        b = len(r.running)
        if not b:
            return self.sm.mixed_parts(0, 0.0, 0.0, chunks)
        x = None
        if self.has_caps or self.reference:
            import numpy as np

            x = r.xo[np.array(r.running, dtype=np.int64)] + r.steps
            cb, cf = self.sm.request_cache(x.astype(float))
            cache, att = float(np.sum(cb)), float(np.sum(cf))
        else:
            one_b0, one_b1, one_f0, one_f1 = self.one
            sx = float(r.sum_xo + b * r.steps)
            cache, att = b * one_b0 + sx * one_b1, b * one_f0 + sx * one_f1
        mixed, alone = self.sm.mixed_parts(b, cache, att, chunks)
        if self.spec is None:
            return mixed, alone
        decode = self.step(b, cache, att, x)   # the decode part priced speculatively, per accepted token
        return mixed - alone + decode, decode

    def swap_cost(self, cache: int) -> tuple[int, float]:
        """(bytes per GPU, seconds) of one direction of a swap of a cache of ``cache`` tokens."""
        nbytes = int(self.bytes_at[-(-cache // self.block)])
        copies = costs.swap_copies(self.model, cache, self.block, self.settings.layout)
        return nbytes, costs.swap_seconds(nbytes, copies, self.link, self.settings, shared_link=True)

    def cap_steps(self, x, k: int) -> tuple[int, Any]:
        """A run of the contexts ``x`` ends at the step that reaches a cap (the pieces change there); also each
        context's piece."""
        import numpy as np

        caps = self.caps
        nxt = np.searchsorted(caps, x, side="right")
        within = nxt < caps.size
        if within.any():
            k = min(k, int((caps[nxt[within]] - x[within]).min()) + 1)
        return k, nxt

    def _with_caps(self, x, nxt) -> tuple[float, float, float, float]:
        """The batch's read time and attention time at the run's first step (u0, v0) and their growth per step (u1,
        v1), from the affine pieces between the caps: sum_i (a + s x_i) = n a + s sum(x) on each piece."""
        import numpy as np

        bw, afs = self.bw, self.afs
        seg_b0, seg_b1, seg_f0, seg_f1 = self.seg
        cnt = np.bincount(nxt, minlength=self.caps.size + 1)
        sx = np.bincount(nxt, weights=x, minlength=self.caps.size + 1)
        u1, v1 = float(cnt @ seg_b1), float(cnt @ seg_f1)
        u0, v0 = float(cnt @ seg_b0) + float(sx @ seg_b1), float(cnt @ seg_f0) + float(sx @ seg_f1)
        return u0 / bw, u1 / bw, v0 / afs, v1 / afs

    def run(self, b: int, k: int, sum_x: int, x, nxt, now: float, upcoming: float) -> tuple[int, float, bool]:
        """(steps, seconds, cut) of a run of up to k steps of a batch of b whose contexts at its first step are
        ``x`` (summing to ``sum_x``; pieces ``nxt``; x and nxt are read only with caps or ``reference``), starting
        at ``now``: cut at the step during which ``upcoming`` falls (``cut``: it was). One step is priced at its
        start, and what falls during it is seen at its end."""
        if self.reference:
            import numpy as np

            cb, cf = self.sm.request_cache(x.astype(float))
            return k, self.step(b, float(np.sum(cb)), float(np.sum(cf)), x), False
        bw, afs = self.bw, self.afs
        if self.has_caps:
            u0, u1, v0, v1 = self._with_caps(x, nxt)
        else:                     # the growth per step only matters for a run of two or more
            one_b0, one_b1, one_f0, one_f1 = self.one
            sx = float(sum_x)
            u0, v0 = (b * one_b0 + sx * one_b1) / bw, (b * one_f0 + sx * one_f1) / afs
        step0 = self.base(b)
        if self.spec is not None:
            if not self.has_caps:
                u1, v1 = b * one_b1 / bw, b * one_f1 / afs
            return self._spec_run(b, step0, u0, u1, v0, v1, k, x, now, upcoming)
        if k == 1:                # one step: the larger of the two at its start (as the sum has it)
            return 1, step0 + (u0 if u0 >= v0 else v0), False
        if not self.has_caps:
            u1, v1 = b * one_b1 / bw, b * one_f1 / afs
        run_time = k * step0 + _affine_max_sum(u0, u1, v0, v1, k)
        if now + run_time > upcoming:     # stop at the step during which the next event falls
            k, run_time = _first_step_reaching(step0, u0, u1, v0, v1, k, upcoming - now, run_time)
            return k, run_time, True
        return k, run_time, False

    def _spec_run(self, b, step0, u0, u1, v0, v1, k, x, now, upcoming) -> tuple[int, float, bool]:
        """``run`` with speculative decoding: sum_t [base + max(u_t, (K+1) v_t) + cd max(u_t, v_t)] / A_t with A_t
        the batch's mean acceptance (``step0`` is base / a0). Flat: A_t = a0. Otherwise request i on piece p_i of the
        profile accepts acc0[p_i] + acc1[p_i] (x_i + t); the run is cut at the step a request reaches its piece's
        upper point (the next run starts on the next piece), so b A_t = alpha - beta t with alpha = sum_i (acc0 +
        acc1 x_i), beta = -sum_i acc1; the sums of affine / affine terms are closed form
        (``_affine_max_ratio_sum``). Cut by bisection at the step during which ``upcoming`` falls."""
        w, cd, a0 = self.spec_k + 1, self.cd, self.a0
        clamped = False
        if self.varies:
            import numpy as np

            piece = np.searchsorted(self.edges, x, side="right")   # 0: below the first point; n: past the last
            # the steps before the first request reaches its piece's upper point (past the last point: none)
            gap = float(np.min(self.upper[piece] - x))
            if gap < k:
                last = math.ceil(gap)
                if last < k:
                    k, clamped = last, True
            acc1 = self.acc1[piece]
            alpha = float(np.sum(self.acc0[piece])) + float(acc1 @ x)
            beta = -float(np.sum(acc1))
            base = step0 * a0

            def elapsed(j: int) -> float:
                return b * (base * _inverse_sum(alpha, beta, 0, j)
                            + _affine_max_ratio_sum(u0, u1, w * v0, w * v1, j, alpha, beta)
                            + cd * _affine_max_ratio_sum(u0, u1, v0, v1, j, alpha, beta))
        else:
            def elapsed(j: int) -> float:
                if j == 1:
                    return step0 + ((u0 if u0 >= w * v0 else w * v0) + cd * (u0 if u0 >= v0 else v0)) / a0
                return j * step0 + (_affine_max_sum(u0, u1, w * v0, w * v1, j)
                                    + cd * _affine_max_sum(u0, u1, v0, v1, j)) / a0

        run_time = elapsed(k)
        if k == 1 or now + run_time <= upcoming:
            return k, run_time, clamped      # cut (the caller counts the blocks of the shorter run) when clamped
        lo, hi, at_hi, target = 0, k, run_time, upcoming - now
        while hi - lo > 1:
            mid = (lo + hi) // 2
            t = elapsed(mid)
            if t >= target:
                hi, at_hi = mid, t
            else:
                lo = mid
        return hi, at_hi, True
