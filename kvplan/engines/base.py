"""What an engine adapter is: one engine's defaults and rules, and the release each rule follows.

An adapter maps every layer kind to the engine's own cache spec through ``kind_table`` (keyed by the exact
kind class, so a subclass such as ``SlidingWindowAttention`` never passes as its parent): a kind missing from
the table is an error, never silently counted as full attention. It chooses the block (page) size, the
memory fraction and batch limits, builds the memory budget with the shared waterfall, and reports the
figures the engine itself prints at start-up. ``settings`` lists the scenario settings the engine honours;
a scenario refuses the others, so nothing a user gives is silently ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from kvplan.calc import budget as budget_mod
from kvplan.errors import KvplanError
from kvplan.values import Bytes, Count, Derivation, Number, Tokens, Value, default, given

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.hardware import HardwareSpec
    from kvplan.model import ModelSpec
    from kvplan.parallel import Parallelism

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
}


@dataclass(frozen=True)
class EngineReport:
    """The engine's own start-up figures: a titled list of (label, value) rows, JSON data and notes."""

    title: str
    rows: tuple[tuple[str, Any], ...]
    data: dict[str, Value | bool | None]
    notes: tuple[str, ...] = ()


class Engine:
    id: ClassVar[str]
    release: ClassVar[str]            # the release whose rules this adapter follows
    sources: ClassVar[tuple[str, ...]]
    fraction_name: ClassVar[str]
    settings: ClassVar[frozenset[str]]
    kind_table: ClassVar[dict[type, str]]
    block_tokens_table: ClassVar[dict[type, int]]

    # --- layer kinds -------------------------------------------------------------------------------------------
    def spec_of(self, kind) -> str:
        """The engine's cache spec for a layer kind; an unknown kind is an error."""
        try:
            return self.kind_table[type(kind)]
        except KeyError:
            raise KvplanError(f"the {self.id} adapter has no rule for layer kind {type(kind).__name__}",
                              f"add {type(kind).__name__} to kvplan/engines/{self.id}.py's kind table") from None

    def block_size(self, model: ModelSpec, given_tokens: int | None = None) -> Tokens:
        """Tokens per KV block (page): the given one, else the largest any of the model's kinds asks for."""
        if given_tokens is not None:
            return Tokens(given_tokens, given(SETTING_FLAGS["block_size"]))
        kinds = {type(g.kind): g.kind for g in model.groups}
        for kind in kinds.values():
            self.spec_of(kind)
        block = max(self.block_tokens_table[k] for k in kinds)
        names = ", ".join(f"{k.__name__} {self.block_tokens_table[k]}" for k in kinds)
        return Tokens(block, default(f"{self.id}: the largest block any layer kind needs ({names})", *self.sources))

    # --- budget ------------------------------------------------------------------------------------------------
    def batch_limits(self, hw: HardwareSpec) -> tuple[Tokens, Count]:
        """Default (max_num_batched_tokens, max_num_seqs)."""
        raise NotImplementedError

    def memory_fraction(self, scenario, par: Parallelism) -> Number:
        raise NotImplementedError

    def activation_reserve(self, scenario, model: ModelSpec, par: Parallelism) -> Bytes:
        if scenario.activation_reserve_bytes is not None:
            return Bytes(scenario.activation_reserve_bytes, given("--activation-reserve"))
        mnbt, mns = self.batch_limits_for(scenario)
        return budget_mod.activation_estimate(model, par, int(mnbt.value), int(mns.value))

    def batch_limits_for(self, scenario) -> tuple[Tokens, Count]:
        mnbt, mns = self.batch_limits(scenario.hardware)
        if scenario.max_num_batched_tokens is not None:
            mnbt = Tokens(scenario.max_num_batched_tokens, given("--max-num-batched-tokens"))
        if scenario.max_num_seqs is not None:
            mns = Count(scenario.max_num_seqs, given("--max-num-seqs"))
        return mnbt, mns

    def runtime_reserve(self, scenario) -> Bytes:
        if scenario.runtime_reserve_bytes is not None:
            return Bytes(scenario.runtime_reserve_bytes, given("--runtime-reserve"))
        return Bytes(DEFAULT_RUNTIME_RESERVE_BYTES, default("1 GiB runtime reserve", RUNTIME_RESERVE_SOURCE))

    def budget(self, scenario, model: ModelSpec, par: Parallelism) -> budget_mod.Budget:
        """One GPU's waterfall for this engine at ``par`` (the scenario's, or a trial one for fix hints)."""
        if scenario.kv_pool_bytes is not None:
            return budget_mod.given_pool(scenario.kv_pool_bytes)
        weights = budget_mod.weights_per_gpu(model, par, scenario.weight_dtype)
        if scenario.draft is not None:
            est = scenario.draft.weight_bytes_estimate()
            if est is not None:
                extra = int(est[0] / par.tp)
                weights = Bytes(int(weights.value) + extra, Derivation(
                    weights.why.formula + " + draft model weights / TP",
                    f"{weights.why.substituted}; + draft {scenario.draft.id} {extra:,} B", weights.why.sources))
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
