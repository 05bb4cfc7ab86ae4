"""What an engine adapter is: one engine's defaults and rules, and the release each rule follows.

An adapter maps every layer kind to the engine's own cache spec through ``kind_table`` (keyed by the exact
kind class, so a subclass such as ``SlidingWindowAttention`` never passes as its parent): a kind missing from
the table is an error, never silently counted as full attention. It chooses the block (page) size, the
memory fraction and batch limits, builds the memory budget with the shared waterfall, and reports the
figures the engine itself prints at start-up. ``settings`` lists the scenario settings the engine honours;
a scenario refuses the others, so nothing a user gives is silently ignored.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from kvplan.errors import KvplanError
from kvplan.specs.values import Bytes, Count, Derivation, Note, Number, Tokens, Value, default, given

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.budget import Budget
    from kvplan.specs.dtypes import KVDtype
    from kvplan.specs.hardware import HardwareSpec
    from kvplan.specs.layers import LayerKind
    from kvplan.specs.model import ModelSpec
    from kvplan.specs.parallel import Parallelism

GIB = 2**30

# Non-torch memory (CUDA context, NCCL buffers) and CUDA-graph capture. vLLM memory-profiling logs show
# non_torch_memory of 0.02-0.93 GiB (0.93 GiB for a TP=8 DeepSeek-V2.5 run) and "Graph capturing finished
# ... took 0.09-0.40 GiB" (public vLLM start-up logs). kvplan reserves 1 GiB by default.
DEFAULT_RUNTIME_RESERVE_BYTES = 1 * GIB
RUNTIME_RESERVE_SOURCE = ("kvplan default 1 GiB: vLLM start-up logs show non_torch_memory 0.02-0.93 GiB and CUDA-graph "
                          "capture 0.09-0.40 GiB")

# The CLI flag of each scenario setting, for messages.
SETTING_FLAGS = {
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "mem_fraction_static": "--mem-fraction-static",
    "kv_pool_bytes": "--kv-pool",
    "max_model_len": "--max-model-len",
    "max_num_batched_tokens": "--max-num-batched-tokens",
    "max_num_seqs": "--max-num-seqs",
    "block_size": "--block-size",
    "activation_reserve_bytes": "--activation-reserve",
    "runtime_reserve_bytes": "--runtime-reserve",
    "moe_a2a_backend": "--moe-a2a-backend",
    "chunked_prefill_size": "--chunked-prefill-size",
    "max_prefill_tokens": "--max-prefill-tokens",
}


@dataclass(frozen=True)
class EngineReport:
    """The engine's own start-up figures: a titled list of (label, value) rows, JSON data and notes."""

    title: str
    rows: tuple[tuple[str, Any], ...]
    data: dict[str, Value | bool | None]
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()    # what overturns the answer (the engine would not start): shown even by --brief


# Which GPU generation a hardware preset is, for the rules that depend on it (vLLM's MLA backend, SGLang's
# attention backend). kvplan's one rule: the preset id, lower-cased, is one of these names or starts with one
# followed by "-" (h100-sxm, h200, h20; b200). Any other id, including a user preset named otherwise, is
# "unknown", and each adapter says what it assumes then.
# b300 (SM103, Blackwell Ultra) stays unknown: the engines' SM100 checks were not read for it.
GPU_GENERATIONS = {"hopper": ("h100", "h200", "h20", "h800"), "blackwell": ("b200", "gb200")}
# Presets known to be neither: engines fall back to their generic backends (Triton, ROCm) on these.
OTHER_GPUS = ("a100", "l40s", "mi300x", "mi325x", "mi355x")
GPU_GENERATION_RULE = ("GPU generation from the hardware preset id: h100*, h200, h20, h800 -> Hopper (SM90); b200, "
                       "gb200 -> Blackwell (SM100); other ids -> unknown")


def _preset_named(hw: HardwareSpec | None, names: tuple[str, ...]) -> bool:
    """Whether the preset id, lower-cased, is one of ``names`` or starts with one followed by "-"."""
    hw_id = "" if hw is None else str(hw.id).strip().lower()
    return any(hw_id == name or hw_id.startswith(name + "-") for name in names)


def known_other_gpu(hw: HardwareSpec | None) -> bool:
    """Whether the preset is a GPU known to be neither Hopper nor Blackwell (A100, L40S, AMD Instinct)."""
    return _preset_named(hw, OTHER_GPUS)


def gpu_generation(hw: HardwareSpec | None) -> str | None:
    """'hopper', 'blackwell' or None (unknown or no hardware), from the preset id (see GPU_GENERATIONS)."""
    return next((generation for generation, names in GPU_GENERATIONS.items() if _preset_named(hw, names)), None)


def sparse_attention(kinds: dict[type, LayerKind]) -> bool:
    """Whether a model (its ``Engine.kinds``) runs DeepSeek sparse attention (V3.2 DSA/NSA): a sparse-indexer key
    cache, or an MLA latent that attends to index_topk keys."""
    from kvplan.specs.layers import MLA, SparseIndexer

    mla = kinds.get(MLA)
    return SparseIndexer in kinds or (isinstance(mla, MLA) and mla.index_topk is not None)


Release = tuple[int, int, int]


def given_reserve(scenario) -> Bytes:
    """The runtime reserve the user gave: with --runtime-reserve, or the reserve a --calibration file fitted to a
    start-up log (``scenario.runtime_reserve_source`` names the file)."""
    value = scenario.runtime_reserve_bytes
    source = scenario.runtime_reserve_source
    if source is None:
        return Bytes(value, given("--runtime-reserve"))
    return Bytes(value, Derivation("fitted to the logged pool by kvplan calibrate (--calibration)", f"{value:,} B",
                                   (source,), kind="input"))


def pinned(cls, cache: dict, version, oldest, newest, engine: str, label: str):
    """The adapter of ``cls`` for one release within ``oldest`` .. ``newest`` (one instance per release)."""
    if not oldest <= version <= newest:
        raise KvplanError(f"{label} {release_text(version)} is outside the releases kvplan has rules for",
                          f"give {engine}=={release_text(oldest)} .. {engine}=={release_text(newest)}")
    if version not in cache:
        cache[version] = cls(version, f"{engine}=={release_text(version)}")
    return cache[version]


def release_text(version: Release) -> str:
    """0.20.0 -> '0.20'; 0.10.1 -> '0.10.1'."""
    major, minor, patch = version
    return f"{major}.{minor}" if patch == 0 else f"{major}.{minor}.{patch}"


def rule_span(version: Release, boundaries: tuple[Release, ...]) -> tuple[Release, Release | None]:
    """The releases sharing every modelled rule with ``version``: [start, end) between rule boundaries (end None:
    the newest span)."""
    start, end = boundaries[0], None
    for b in boundaries:
        if b <= version:
            start = b
        elif end is None:
            end = b
    return start, end


@dataclass(frozen=True)
class Flag:
    """One engine launch flag: its value (None for a switch), why kvplan sets it, and the first release that has it
    in the form printed (None: every release kvplan models), with the source of that release bound."""

    flag: str
    value: str | None
    reason: str | Note
    since: Release | None = None
    source: str = ""

    def text(self) -> str:
        return self.flag if self.value is None else f"{self.flag} {self.value}"


@dataclass(frozen=True)
class LaunchCommand:
    """The command that launches an engine with a recommendation's settings; ``omitted`` lists the flags this
    release does not have (flag, why), which are not printed."""

    engine: str
    program: str
    flags: tuple[Flag, ...]
    omitted: tuple[tuple[str, str], ...]
    notes: tuple[str, ...] = ()

    def text(self) -> str:
        parts = [self.program] + [f.text() for f in self.flags]
        return " \\\n  ".join(parts)


def keep_flags(flags: list[Flag], version: Release | None, label: str) -> tuple[tuple[Flag, ...], tuple]:
    """The flags ``version`` has (all when the adapter is not pinned to a release), and the rest with the reason."""
    kept, omitted = [], []
    for f in flags:
        if f.since is not None and version is not None and version < f.since:
            omitted.append((f.text(), f"{label} {release_text(version)} predates it (from "
                                      f"{release_text(f.since)}: {f.source})"))
        else:
            kept.append(f)
    return tuple(kept), tuple(omitted)


class Engine:
    id: ClassVar[str]
    release: str                      # the release whose rules this adapter follows (an instance may pin one)
    version: Release | None = None    # the engine release whose rules apply (None: not release-dependent)
    name: str = ""                    # what --engine said: "vllm", "vllm==0.17"; empty means ``id``
    bound_hardware: HardwareSpec | None = None   # a scenario's GPU and KV dtype (see ``bind``)
    bound_kv_dtype: KVDtype | None = None
    sources: ClassVar[tuple[str, ...]]
    fraction_name: ClassVar[str]
    settings: ClassVar[frozenset[str]]
    kind_table: ClassVar[dict[type, str]]
    block_tokens_table: ClassVar[dict[type, int]]
    # KV cache dtypes that arrived after the oldest release kvplan models: dtype -> (first release, source). A
    # scenario pinned to an older release (``--engine vllm==0.7.3``) refuses them; unpinned, the newest rules hold.
    kv_dtype_since: ClassVar[dict[KVDtype, tuple[Release, str]]] = {}
    # Per request, outside the engine's steps: the API server's way in (HTTP, tokenization, hand-off to the
    # scheduler) and the first token's way out (detokenize, stream). (seconds, source); none for neutral.
    frontend_latency: ClassVar[tuple[float, str]] = (0.0, "engine-neutral: no API server is modelled")
    # The engine's own in-graph TP all-reduce of a decode step, where a kernel benchmark of it is published:
    # (latency us, share of the scale-up link its bytes see, source). It replaces the generic allreduce_latency_us
    # and allreduce_link (kvplan.calc.costs.engine_factors) unless a GPU preset, a flag or a calibration sets them.
    decode_allreduce: ClassVar[tuple[float, float, str] | None] = None

    def mixes_prefill_chunks(self) -> bool:
        """Whether this release's scheduler runs prefill chunks inside the decode steps (one forward pass over the
        chunk and the decode tokens: ``costs.StepModel.mixed_step``), so a colocated prefill costs the decode batch
        what its chunks add to those steps, not passes of its own. False: prefills run as steps of their own (the
        rule book's, SGLang's default scheduler)."""
        return False

    def decode_layer_latency(self, scenario) -> tuple[float, str] | None:
        """(us per MLA layer, source) a decode step of this deployment adds on the engine's default kernel path,
        where that path is slower than kvplan's roofline per a published benchmark of it (kvplan.calc.costs.
        engine_factors adds it to overhead_us_per_layer unless a flag or a calibration set that); None: no such
        rule for this engine, release, GPU and model."""
        return None

    def fused_shared_experts(self, scenario) -> str | None:
        """Why the engine runs the model's shared experts inside the routed experts' fused MoE kernel on this
        deployment (the source of the rule), or None when it runs them as their own MLP. When fused, a decode step
        has no shared-expert GEMMs of its own: their weights stream in the MoE kernel (``costs.step_model``)."""
        return None

    def kv_dtype_problem(self, kv_dtype: KVDtype, model: ModelSpec | None = None,
                         hardware: HardwareSpec | None = None) -> tuple[str, str] | None:
        """(problem, fix) when this adapter cannot run ``kv_dtype``: its pinned release predates it, or (engines
        override) the engine runs it for no such ``model`` or ``hardware``; None when it has it. A model with a kind
        the adapter has no rule for is refused (``kinds``)."""
        if model is not None:
            self.kinds(model)
        first = self.kv_dtype_since.get(kv_dtype)
        if first is None or self.version is None or self.version >= first[0]:
            return None
        since, source = first
        return (f"{self.display_name} has no {kv_dtype.value} KV cache (first in {release_text(since)}: {source})",
                f"pin {self.id}=={release_text(since)} or newer, or choose another --kv-dtype")

    def refuse_kv_dtype(self, kv_dtype: KVDtype, model: ModelSpec | None = None,
                        hardware: HardwareSpec | None = None) -> None:
        """Raise the one-line KvplanError (problem, fix) of ``kv_dtype_problem``, if it finds one."""
        problem = self.kv_dtype_problem(kv_dtype, model, hardware)
        if problem is not None:
            raise KvplanError(*problem)

    def offload_settings(self, generic: str) -> str:
        """How to turn the DRAM tier on, for notes: ``generic`` (every engine's settings) unless a release differs."""
        return generic

    def host_tier_problem(self) -> tuple[str, str] | None:
        """(what this release does instead of a DRAM tier and swap, the fix naming the release that has one) when
        it has neither; None when it has them (every engine but an older pinned vLLM)."""
        return None

    def swap_space(self) -> str | None:
        """The source, when this release swaps a preempted request to a CPU swap space of its own although it has
        no DRAM offloading tier (``host_tier_problem`` is not None): vLLM V0's --preemption-mode swap with its
        --swap-space; None otherwise."""
        return None

    def layout_problem(self, par: Parallelism) -> tuple[str, str] | None:
        """(problem, fix) when this adapter's release cannot launch the deployment shape ``par``; None if it can."""
        return None

    def moe_a2a_problem(self, backend: str, model: ModelSpec, par: Parallelism) -> tuple[str, str] | None:
        """(problem, fix) when this release cannot run ``model`` on ``par`` with the MoE all-to-all ``backend``
        (``--moe-a2a-backend``, a setting only an engine that honours it reaches); None if it can."""
        return None

    # --- layer kinds -------------------------------------------------------------------------------------------
    # Rules dispatch on the kind classes, never on their ``kind`` strings: ``kinds(model)`` first looks every one
    # of the model's kinds up in ``kind_table`` (exact class), so a kind the adapter has no rule for is refused
    # before any rule reads the model, and ``MLA in kinds`` cannot be true of a subclass nobody mapped.
    def spec_of(self, kind: LayerKind) -> str:
        """The engine's cache spec for a layer kind; an unknown kind is an error."""
        try:
            return self.kind_table[type(kind)]
        except KeyError:
            raise KvplanError(f"the {self.id} adapter has no rule for layer kind {type(kind).__name__}",
                              f"add {type(kind).__name__} to kvplan/engines/{self.id}.py's kind table") from None

    def kinds(self, model: ModelSpec) -> dict[type, LayerKind]:
        """The model's layer kinds by exact class (the last group's instance of each), each checked against
        ``kind_table``: an unknown kind is an error."""
        for group in model.groups:
            self.spec_of(group.kind)
        return {type(g.kind): g.kind for g in model.groups}

    # --- identity and binding -------------------------------------------------------------------------------
    @property
    def display_name(self) -> str:
        return self.name or self.id

    def bind(self, hardware: HardwareSpec | None, kv_dtype: KVDtype | None) -> Engine:
        """A copy that answers ``block_size`` for this GPU and KV dtype when a caller passes neither (a
        scenario binds its adapter, so that every block size of a plan follows the scenario's GPU)."""
        bound = copy.copy(self)
        bound.bound_hardware, bound.bound_kv_dtype = hardware, kv_dtype
        return bound

    def _key(self):
        hw = self.bound_hardware
        return (type(self), self.version, self.name, None if hw is None else hw.id, self.bound_kv_dtype)

    def __eq__(self, other) -> bool:
        return isinstance(other, Engine) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _hardware_and_dtype(self, hardware, kv_dtype):
        return (hardware if hardware is not None else self.bound_hardware,
                kv_dtype if kv_dtype is not None else self.bound_kv_dtype)

    def block_size(self, model: ModelSpec, given_tokens: int | None = None, hardware: HardwareSpec | None = None,
                   kv_dtype: KVDtype | None = None) -> Tokens:
        """Tokens per KV block (page): the given one, else the largest any of the model's kinds asks for.
        ``hardware`` and ``kv_dtype`` (default: the bound ones) matter to engines whose block depends on them."""
        if given_tokens is not None:
            return Tokens(given_tokens, given(SETTING_FLAGS["block_size"]))
        kinds = self.kinds(model)
        block = max(self.block_tokens_table[k] for k in kinds)
        names = ", ".join(f"{k.__name__} {self.block_tokens_table[k]}" for k in kinds)
        return Tokens(block, default(f"{self.id}: the largest block any layer kind needs ({names})", *self.sources))

    # --- budget ------------------------------------------------------------------------------------------------
    def batch_limits(self, hw: HardwareSpec) -> tuple[Tokens, Count]:
        """Default (max_num_batched_tokens, max_num_seqs)."""
        raise NotImplementedError

    def sizing_flags(self, plan, label: str, kv_flags: dict, batch: str, fraction: str, length: str,
                     block: str, chunk: str | None = None) -> list[Flag]:
        """The flags that size the pool as the plan did, in this engine's names (``kv_flags``: kvplan's KV dtype
        -> the engine's value, None for its "auto"): KV dtype, batch, memory fraction, longest request, and the
        block size and token budget per step (``chunk``) when given. A KV dtype the engine cannot name is refused, not
        dropped: the engine would start in another dtype and hold another number of requests."""
        s = plan.scenario
        kv = kv_flags.get(plan.kv_dtype, "")
        if kv == "":
            raise KvplanError(f"--emit {self.id}: {label} has no --kv-cache-dtype for {plan.kv_dtype.value}",
                              "plan with --kv-dtype fp8 or bf16, or drop --emit")
        flags = [Flag("--kv-cache-dtype", kv, plan.row("kv_dtype").first)] if kv is not None else []
        flags.append(Flag(batch, str(plan.batch.value), plan.row("batch").first))   # what set the batch
        if s.kv_pool_bytes is None:
            flags.append(Flag(fraction, f"{self.memory_fraction(s, s.parallelism).value:g}",
                              "the fraction kvplan's pool was sized with"))
        else:
            flags += self.pool_flags(plan, fraction) or [Flag(
                fraction, f"{self.memory_fraction(s, s.parallelism).value:g}",
                "the engine's default: no flag here realises the --kv-pool given (the fraction that would leave it "
                "passes 1: the weights and reserves kvplan counts leave less); compare the KV cache the engine logs "
                "at start-up with it")]
        flags.append(Flag(length, str(s.max_model_len or s.context_tokens),
                          "prompt + decode: the longest request planned"))
        if s.block_size is not None:
            flags.append(Flag(block, str(s.block_size), "as given"))
        if chunk is not None and s.max_num_batched_tokens is not None:   # it sized the activation reserve and steps
            flags.append(Flag(chunk, str(s.max_num_batched_tokens), "as given: the tokens per step the plan priced"))
        return flags

    def pool_flags(self, plan, fraction: str) -> list[Flag]:
        """The flags that realise a --kv-pool given (``plan.scenario.kv_pool_bytes`` per GPU). Here, for an engine
        (or release) with no flag for the pool itself: the memory fraction whose budget leaves that pool, by the
        engine's own waterfall (``budget.waterfall``: pool = base x fraction - weights - activation - runtime, so
        fraction = (pool + weights + activation + runtime) / base), rounded up to 0.001; none when it would pass 1.
        An engine with a pool flag overrides this."""
        import math

        s = plan.scenario
        b = self.budget(s.with_(kv_pool_bytes=None), s.sized_model, s.parallelism)
        base = b.hbm.number() if b.visible is None else b.visible.number()
        rest = b.weights.number() + b.activation.number() + b.runtime.number()
        value = (s.kv_pool_bytes + rest) / base
        if value > 1:
            return []
        shown = math.ceil(value * 1000) / 1000
        return [Flag(fraction, f"{shown:g}", f"the fraction that leaves the --kv-pool given: ({s.kv_pool_bytes:,} "
                     f"+ weights, activation and runtime {rest:,.0f}) / {base:,.0f} B = {value:.4f}, rounded up; "
                     "compare the KV cache the engine logs at start-up with the pool")]

    def launch_command(self, plan) -> LaunchCommand:
        """The launch command realising a ``kvplan.calc.recommend.RecommendPlan`` (engines that can be launched)."""
        raise KvplanError(f"the {self.id} engine has no launch command", "give --emit vllm or --emit sglang")

    def memory_fraction(self, scenario, par: Parallelism) -> Number:
        raise NotImplementedError

    def activation_reserve(self, scenario, model: ModelSpec, par: Parallelism) -> Bytes:
        if scenario.activation_reserve_bytes is not None:
            return Bytes(scenario.activation_reserve_bytes, given("--activation-reserve"))
        from kvplan.engines import budget as budget_mod  # loaded by the commands that size a pool (not ``size``)

        mnbt, mns = self.batch_limits_for(scenario)
        return budget_mod.activation_estimate(model, par, mnbt.number(), mns.number())

    def batch_limits_for(self, scenario) -> tuple[Tokens, Count]:
        mnbt, mns = self.batch_limits(scenario.hardware)
        if scenario.max_num_batched_tokens is not None:
            mnbt = Tokens(scenario.max_num_batched_tokens, given("--max-num-batched-tokens"))
        if scenario.max_num_seqs is not None:
            mns = Count(scenario.max_num_seqs, given("--max-num-seqs"))
        return mnbt, mns

    def runtime_reserve(self, scenario) -> Bytes:
        if scenario.runtime_reserve_bytes is not None:
            return given_reserve(scenario)
        return Bytes(DEFAULT_RUNTIME_RESERVE_BYTES, default("1 GiB runtime reserve", RUNTIME_RESERVE_SOURCE))

    def budget(self, scenario, model: ModelSpec, par: Parallelism) -> Budget:
        """One GPU's waterfall for this engine at ``par`` (the scenario's, or a trial one for fix hints)."""
        from kvplan.engines import budget as budget_mod  # loaded by the commands that size a pool (not ``size``)

        if scenario.kv_pool_bytes is not None:
            return budget_mod.given_pool(scenario.kv_pool_bytes)
        weights = budget_mod.weights_per_gpu(model, par, scenario.weight_dtype, scenario.weights_bytes)
        if scenario.draft is not None:
            est = scenario.draft.weight_bytes_estimate()
            if est is not None:
                extra = int(est[0] / par.tp)
                why = weights.why or Derivation("weights on this GPU")
                weights = Bytes(weights.number() + extra, Derivation(
                    why.formula + " + draft model weights / TP",
                    f"{why.substituted}; + draft {scenario.draft.id} {extra:,} B", why.sources))
        return budget_mod.waterfall(scenario.hardware, self.memory_fraction(scenario, par), self.fraction_name,
                                    weights, self.activation_reserve(scenario, model, par),
                                    self.runtime_reserve(scenario))

    # Memory sizes (GiB) where the engine's defaults step, so that more HBM can give fewer requests.
    default_steps_gib: ClassVar[tuple[float, ...]] = ()
    defaults_of: ClassVar[str] = ""   # whose defaults those are ("vLLM", "SGLang")

    def boundary_note(self, hw: HardwareSpec) -> str | None:
        """A note when the GPU sits within 15% of a size where this engine's defaults step."""
        gib = hw.hbm_capacity_gib.value
        near = [b for b in self.default_steps_gib if abs(gib - b) <= 0.15 * b]
        if not near:
            return None
        steps = ", ".join(f"{b:g}" for b in near)
        return (f"{self.defaults_of}'s defaults step at {steps} GiB of GPU memory and this GPU has {gib:g} GiB: a "
                "GPU just across the step gets other defaults, so more HBM can mean fewer requests there (the engine "
                "does this, not kvplan).")

    # --- the engine's own figures ------------------------------------------------------------------------------
    def report(self, scenario, model: ModelSpec, par: Parallelism, pool_bytes: int, block: int) -> EngineReport | None:
        return None


def hub_model_id(model: ModelSpec) -> str:
    """The Hugging Face id a launch command names: the first huggingface.co/ORG/NAME among the model's sources,
    else the preset id (a local path or a name the engine resolves)."""
    import re

    for src in getattr(model, "sources", ()):
        m = re.search(r"huggingface\.co/([A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+)", str(src))
        if m and m.group(1).split("/")[0] not in ("datasets", "spaces", "docs", "blog"):
            return m.group(1)
    return model.id
