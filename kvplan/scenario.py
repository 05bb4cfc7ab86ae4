"""One validated deployment and request, the input of every calculator.

``Scenario(model=..., hardware=..., tp=..., ...)`` checks everything once, in one place, whether it comes
from Python or from the CLI (which builds exactly this):

* the deployment shape: GPUs planned (``gpus``, default every GPU of ``nodes`` nodes), TP (default: every GPU
  of one node, or the largest power of two below it that the model allows), PP (default 1), DP (default: the
  replicas that fill the GPUs, said so in the headline), EP dividing TP x DP;
* the engine, from the registry, and the settings it honours: a setting the engine ignores is refused;
* the KV dtype: ``auto`` (the default, with or without ``--model``) is the engines' own default, the model's
  activation dtype, bf16 for every built-in preset; the first line of every output names it;
* the request: prompt + decode (+ speculative slots) within ``--max-model-len`` and the model's maximum
  context (``max_position_embeddings``). A longer request the user gave is refused, as the engines refuse it; the
  default request (1K + 30K, for a prompt or decode not given) is fitted into the limit instead (``_fit_request``:
  the decode shortened, the prompt kept), and the first line says so.

Derived attributes (``parallelism``, ``kv_dtype``, ``engine_adapter``, ``sized_model``, ...) are set once in
``__post_init__``; the object is frozen.
"""

from __future__ import annotations

import math
from dataclasses import KW_ONLY, InitVar, dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, cast

from kvplan.errors import InputError, KvplanError, ScenarioError
from kvplan.inputs.request import (  # noqa: F401  (re-exported: the scenario's defaults and bounds)
    DEFAULT_DECODE_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    MAX_MTP_LAYERS,
    MAX_SPEC_TOKENS,
    OPTION_FIELDS,
    SEED_HARDWARE,
    SEED_MODEL,
)
from kvplan.specs.dtypes import WEIGHT_BYTES_PER_PARAM, KVDtype, parse_kv_dtype
from kvplan.specs.parallel import MAX_DEGREE, Parallelism

if TYPE_CHECKING:  # pragma: no cover
    from kvplan.engines.base import Engine
    from kvplan.specs.hardware import HardwareSpec
    from kvplan.specs.model import ModelSpec

AUTO_DTYPE_NOTE = "auto = the engines' default"


@dataclass(frozen=True)
class Scenario:
    """One validated deployment and request (module docstring): every calculator takes one.

    Each input takes a typed value (a ``ModelSpec``, an int) or what a user writes: a preset id, a path or a Hub
    id for ``model`` / ``hardware`` / ``draft``, text with its unit ("32k", "80GiB", "50GB/s") or a number for the
    rest, read as the command line reads it (``kvplan.inputs.request``), and the option names the command line and
    plan files use (``prompt``, ``decode``, ``kv_pool``, ...) alongside the field names:
    ``Scenario(model="qwq-32b", hardware="h100-sxm", gpus=2, decode="32k")``. A bad value raises ``InputError``,
    a deployment the rules refuse ``ScenarioError``, with the message the command line prints for it."""

    model: ModelSpec = cast("ModelSpec", SEED_MODEL)
    hardware: HardwareSpec = cast("HardwareSpec", SEED_HARDWARE)
    kv_dtype_request: str | KVDtype = "auto"
    nodes: int = 1
    gpus: int | None = None
    tp: int | None = None
    pp: int = 1
    dp: int | None = None
    ep: int | None = None
    engine: str = "neutral"
    weight_dtype: str | None = None
    # --weights SIZE: the model's total weight bytes (all GPUs), split like the checkpoint's
    weights_bytes: int | None = None
    # None: not given, the default request (DEFAULT_PROMPT_TOKENS + DEFAULT_DECODE_TOKENS) fitted into the limit
    prompt_tokens: int = cast(int, None)
    decode_tokens: int = cast(int, None)
    # memory and batch settings (each engine honours its own; see kvplan.engines.base.SETTING_FLAGS)
    gpu_memory_utilization: float | None = None
    mem_fraction_static: float | None = None
    kv_pool_bytes: int | None = None
    max_model_len: int | None = None
    max_num_batched_tokens: int | None = None
    max_num_seqs: int | None = None
    block_size: int | None = None
    activation_reserve_bytes: int | None = None
    runtime_reserve_bytes: int | None = None
    moe_a2a_backend: str | None = None   # SGLang's --moe-a2a-backend (None: not given, "none")
    # SGLang's --chunked-prefill-size and --max-prefill-tokens (None: not given, SGLang's defaults)
    chunked_prefill_size: int | None = None
    max_prefill_tokens: int | None = None
    # what shares the pool
    mtp_layers: int = 0
    spec_tokens: int = 0
    draft: ModelSpec | None = None
    shared_prefix_tokens: int = 0
    token_budget: int | None = None
    # the host link, effective GB/s (10^9 B/s) per direction; None: the preset's line rate x large-copy efficiency
    host_link_gbs: float | None = None
    # where runtime_reserve_bytes came from when no --runtime-reserve gave it: a --calibration file's fitted reserve
    # (kvplan.inputs.calibration_file.apply), cited by the budget's row; None: given with --runtime-reserve
    runtime_reserve_source: str | None = None
    # the command line's option names for the fields named otherwise (kvplan.inputs.request.OPTION_FIELDS; not
    # kv_dtype, which is the resolved dtype: give kv_dtype_request), and the folder of the user's presets that model,
    # hardware and draft ids are looked up in first
    _: KW_ONLY
    prompt: InitVar[str | int | None] = None
    decode: InitVar[str | int | None] = None
    weights: InitVar[str | int | None] = None
    kv_pool: InitVar[str | int | None] = None
    activation_reserve: InitVar[str | int | None] = None
    runtime_reserve: InitVar[str | int | None] = None
    shared_prefix: InitVar[str | int | None] = None
    draft_model: InitVar[str | Path | ModelSpec | None] = None
    presets_dir: InitVar[str | Path | None] = None

    # derived in __post_init__
    parallelism: Parallelism = field(init=False)
    planned_gpus: int = field(init=False)
    dp_filled: bool = field(init=False)
    tp_defaulted: bool = field(init=False)
    kv_dtype: KVDtype = field(init=False)
    kv_dtype_auto: bool = field(init=False)
    engine_adapter: Engine = field(init=False)
    sized_model: ModelSpec = field(init=False)
    prompt_given: bool = field(init=False)
    decode_given: bool = field(init=False)
    # the default request fitted into the limit: what was shortened, for the first line (None: nothing was)
    request_fitted: str | None = field(init=False)

    def __post_init__(self, prompt: str | int | None, decode: str | int | None, weights: str | int | None,
                      kv_pool: str | int | None, activation_reserve: str | int | None,
                      runtime_reserve: str | int | None, shared_prefix: str | int | None,
                      draft_model: str | Path | ModelSpec | None, presets_dir: str | Path | None) -> None:
        from kvplan.inputs.request import resolve

        options = {"prompt": prompt, "decode": decode, "weights": weights, "kv_pool": kv_pool,
                   "activation_reserve": activation_reserve, "runtime_reserve": runtime_reserve,
                   "shared_prefix": shared_prefix, "draft_model": draft_model}
        given = {k: v for k, v in options.items() if v is not None}
        for option in given:
            name = OPTION_FIELDS[option]
            if getattr(self, name) != _DEFAULTS[name]:
                raise InputError(f"{option} and {name} both given", f"give one of them ({option}: the option's name)")
        for name, value in resolve({k: getattr(self, k) for k in _INPUTS}, given, presets_dir).items():
            object.__setattr__(self, name, value)
        for name, default_ in (("prompt", DEFAULT_PROMPT_TOKENS), ("decode", DEFAULT_DECODE_TOKENS)):
            object.__setattr__(self, f"{name}_given", getattr(self, f"{name}_tokens") is not None)
            if getattr(self, f"{name}_tokens") is None:
                object.__setattr__(self, f"{name}_tokens", default_)
        object.__setattr__(self, "request_fitted", None)
        try:
            self._validate()
        except (InputError, ScenarioError):
            raise
        except KvplanError as err:   # a rule of the engine or the model (TP, layout, KV dtype)
            raise ScenarioError(err.message, err.hint) from None

    def _validate(self) -> None:
        from kvplan import engines

        set_ = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        model, hw = self.model, self.hardware
        adapter = engines.get(self.engine)
        set_("engine", adapter.display_name)
        self._check_settings(adapter)

        # --- KV dtype: auto is the engine default (the model's activation dtype) -------------------------------
        req = self.kv_dtype_request
        auto = isinstance(req, str) and req.strip().lower() == "auto"
        set_("kv_dtype", (KVDtype.FP16 if model.weight_dtype == "fp16" else KVDtype.BF16) if auto
             else parse_kv_dtype(req))
        set_("kv_dtype_auto", auto)
        if self.kv_dtype is KVDtype.NVFP4 and "fp4" not in hw.dense_tflops:   # before the engine's own rules
            raise ScenarioError(f"nvfp4 KV needs FP4 tensor cores (Blackwell); the {hw.id} preset has no fp4 peak",
                               "use --kv-dtype fp8 on this GPU")
        adapter.refuse_kv_dtype(self.kv_dtype, model, hw)
        set_("engine_adapter", adapter.bind(hw, self.kv_dtype))  # block sizes follow this GPU and KV dtype
        if self.weight_dtype is not None and self.weight_dtype not in WEIGHT_BYTES_PER_PARAM:
            raise ScenarioError(f"unknown weight dtype {self.weight_dtype!r}",
                               "choose one of " + ", ".join(WEIGHT_BYTES_PER_PARAM))

        if self.weights_bytes is not None and model.params_total is not None:
            # the narrowest weight kvplan models is 4 bits (int4): fewer bytes than that for every parameter is a unit
            # slip (1B is one byte, not a billion parameters), not a checkpoint
            least_per = min(WEIGHT_BYTES_PER_PARAM.values())
            least = model.params_total.value * least_per
            if self.weights_bytes < least:
                given = (f"{self.weights_bytes / 1e9:,.4g} GB" if self.weights_bytes >= 1e6
                         else f"{self.weights_bytes:,} B")
                raise ScenarioError(f"--weights {given} is less than {model.id}'s "
                                    f"{model.params_total.value / 1e9:,.4g}B parameters take at {least_per * 8:g} bits "
                                    f"each, the narrowest weight kvplan models ({least / 1e9:,.4g} GB)",
                                    "give the checkpoint's total bytes over all GPUs, e.g. 642GB (B is bytes), or "
                                    "--weight-dtype for params x a dtype")

        # --- request (each value is in its option's range already: kvplan.inputs.request.resolve) ---------------
        if self.host_link_gbs is not None and not (isinstance(self.host_link_gbs, (int, float))
                                                    and math.isfinite(self.host_link_gbs)
                                                    and 0.01 <= self.host_link_gbs <= 1e5):
            raise ScenarioError(f"host link rate {self.host_link_gbs!r} GB/s is outside 0.01 .. 100,000 GB/s",
                               "give --host-link-gbs like 50")
        if self.prompt_tokens + self.decode_tokens == 0:
            raise ScenarioError("--prompt and --decode are both 0", "give the request at least one token")
        limit = self.context_limit
        if limit is not None and self.context_tokens + self.spec_tokens > limit:
            self._fit_request(limit)
        if self.shared_prefix_tokens > self.prompt_tokens:
            raise ScenarioError(f"--shared-prefix {self.shared_prefix_tokens:,} is longer than the "
                               f"{self.prompt_tokens:,}-token prompt", "give a shared prefix no longer than --prompt")
        if self.kv_pool_bytes is not None and self.kv_pool_bytes > hw.hbm_bytes:
            raise ScenarioError(f"--kv-pool {self.kv_pool_bytes / 2**30:,.2f} GiB is more than the {hw.id}'s "
                               f"{hw.hbm_capacity_gib.value:g} GiB of HBM",
                               "give the pool of one GPU, e.g. from vLLM's 'Available KV cache memory' line")
        # --- deployment shape ----------------------------------------------------------------------------------
        per_node = hw.node.gpus_per_node
        available = self.nodes * per_node
        if self.gpus is not None:
            if self.gpus > available:
                raise ScenarioError(f"--gpus {self.gpus} is more than {self.nodes} node(s) of {hw.id} hold "
                                   f"({available})", f"add --nodes {-(-self.gpus // per_node)}, or lower --gpus")
        gpus = self.gpus if self.gpus is not None else available
        sized = model.with_mtp_layers(self.mtp_layers) if self.mtp_layers else model
        set_("sized_model", sized)
        tp = self.tp
        set_("tp_defaulted", tp is None)
        if tp is None:
            tp = self._default_tp(sized, min(per_node, gpus), gpus // max(self.pp, 1) if self.dp is None else None)
        pp = self.pp
        sized.check_tp(tp)
        if pp > sized.num_layers:
            raise ScenarioError(f"pp={pp} is more pipeline stages than the {sized.num_layers} layers of {model.id}",
                               f"choose --pp <= {sized.num_layers}")
        if self.draft is not None:
            self.draft.check_tp(tp)
        if self.dp is None and tp * pp <= gpus:
            if gpus % (tp * pp):
                raise ScenarioError(f"{gpus} GPUs do not split into TP={tp} x PP={pp} replicas",
                                   "give --dp (or --gpus), or a TP x PP that divides the GPU count")
            dp = gpus // (tp * pp)
        else:   # DP given, or one replica larger than the GPUs: the fix is more GPUs, not a DP
            dp = self.dp if self.dp is not None else 1
            if tp * pp * dp > gpus:
                need = tp * pp * dp
                raise ScenarioError(f"TP x PP{' x DP' if self.dp is not None else ''} = {need} GPUs but "
                                   f"{self.nodes} node(s) of {hw.id} "
                                   f"have {available}" + (f" and --gpus is {gpus}" if self.gpus else ""),
                                   (f"raise --gpus to {need}" + (f" and --nodes to {-(-need // per_node)}"
                                                                  if need > available else "")
                                    if self.gpus is not None and need <= MAX_DEGREE else
                                    f"add --nodes {-(-need // per_node)}") + ", or lower --tp/--pp/--dp")
        if dp > MAX_DEGREE:
            raise ScenarioError(f"the deployment would have {dp} DP replicas (over {MAX_DEGREE})",
                               "give fewer --nodes or a larger --tp")
        if self.ep is not None and model.params_expert is None:
            raise ScenarioError(f"--ep {self.ep}: {model.id} has no routed experts to split",
                               "drop --ep for a dense model")
        if self.ep is not None and (tp * dp) % self.ep:
            raise ScenarioError(f"--ep {self.ep} does not divide TP x DP = {tp * dp}",
                               "give an EP degree that divides the GPUs of the TP and DP ranks")
        par = Parallelism(tp=tp, pp=pp, dp=dp, ep=self.ep)
        problem = adapter.layout_problem(par)
        if problem is None and self.moe_a2a_backend is not None:
            problem = adapter.moe_a2a_problem(self.moe_a2a_backend, sized, par)
        if problem is not None:
            raise ScenarioError(*problem)
        set_("parallelism", par)
        set_("planned_gpus", par.gpus)
        set_("dp_filled", self.dp is None and dp > 1)

    def _fit_request(self, limit: int) -> None:
        """Fit a request longer than ``limit`` into it by shortening what the user did not give: the default decode
        (the prompt kept; when the default prompt alone leaves no decode, half the room each), else the default
        prompt. A request the user gave is refused, as the engine refuses it."""
        where = ("--max-model-len" if self.max_model_len is not None
                 else f"{self.model.id}'s maximum context (max_position_embeddings)")
        room = limit - self.spec_tokens
        prompt, decode = self.prompt_tokens, self.decode_tokens
        if not self.decode_given:
            if not self.prompt_given and room - prompt < 1:
                prompt = room // 2
            decode = room - prompt
        elif not self.prompt_given:
            prompt = room - decode
        if prompt < 0 or decode < (0 if self.decode_given else 1) or (self.prompt_given and self.decode_given):
            raise ScenarioError(
                f"the request's {self.context_tokens + self.spec_tokens:,} tokens (prompt + decode"
                + (" + speculative slots" if self.spec_tokens else "") + f") exceed {where} of {limit:,}; "
                "the engine would reject it",
                "shorten --prompt/--decode" + ("" if self.max_model_len is not None else
                                                ", or raise the limit with --max-model-len (rope scaling)"))
        cut = [f"the default {name} of {old:,}" for name, old, new in
               (("prompt", self.prompt_tokens, prompt), ("decode", self.decode_tokens, decode)) if new != old]
        short = "--max-model-len" if self.max_model_len is not None else f"{self.model.id}'s maximum context"
        object.__setattr__(self, "prompt_tokens", prompt)
        object.__setattr__(self, "decode_tokens", decode)
        object.__setattr__(self, "request_fitted", f"{' and '.join(cut)} shortened to fit {short} of {limit:,}")

    # ---------------------------------------------------------------------------------------------------------
    def _check_settings(self, adapter: Engine) -> None:
        from kvplan.engines.base import SETTING_FLAGS

        for name, flag in SETTING_FLAGS.items():
            if getattr(self, name) is not None and name not in adapter.settings:
                from kvplan.engines import NAMES, get

                # the engines whose adapter honours the setting (not merely the others: the neutral count has no
                # --mem-fraction-static either)
                users = [e for e in NAMES if e != adapter.id and name in get(e).settings]
                raise ScenarioError(f"{flag} is not a setting of --engine {adapter.id}",
                                   f"drop {flag}, or use an engine that has it ({', '.join(users)})"
                                   if name != "gpu_memory_utilization" else
                                   "SGLang's fraction is --mem-fraction-static")

    @staticmethod
    def _default_tp(model: ModelSpec, cap: int, divides: int | None = None) -> int:
        """The largest power of two <= cap that the model allows (and that divides ``divides``, the GPUs per
        pipeline when DP is to be filled in)."""
        tp = 1
        while tp * 2 <= cap:
            tp *= 2
        while tp > 1:
            try:
                model.check_tp(tp)
                if divides is None or divides % tp == 0:
                    return tp
            except KvplanError:
                pass
            tp //= 2
        return 1

    @property
    def context_tokens(self) -> int:
        """The request's peak context: prompt + decode (speculative lookahead slots not included)."""
        return self.prompt_tokens + self.decode_tokens

    @property
    def context_limit(self) -> int | None:
        """The longest request the engine serves: --max-model-len, else the model's max_position_embeddings."""
        if self.max_model_len is not None:
            return self.max_model_len
        return self.model.max_position_embeddings

    def over_limit(self, context: int) -> bool:
        """Whether a request of ``context`` tokens (plus its speculative lookahead slots, as the length check
        counts them) is longer than the engine serves."""
        limit = self.context_limit
        return limit is not None and context + self.spec_tokens > limit

    def dtype_text(self) -> str:
        return f"{self.kv_dtype.value} KV" + (f" ({AUTO_DTYPE_NOTE})" if self.kv_dtype_auto else "")

    def shape_text(self) -> str:
        par, hw = self.parallelism, self.hardware
        gpus = par.gpus
        text = f"{gpus} x {hw.id}"
        if self.nodes > 1 or gpus > hw.node.gpus_per_node:
            text += f" ({self.nodes} nodes of {hw.node.gpus_per_node})"
        text += f": TP={par.tp} x PP={par.pp} x DP={par.dp}" + (f", EP={par.ep}" if par.ep else "")
        extras = []
        if self.tp_defaulted:
            extras.append("TP default: " + ("one node" if par.tp == min(hw.node.gpus_per_node, gpus)
                                              else "the largest the model allows"))
        if self.dp_filled:
            extras.append(f"DP filled in to use all {gpus} GPUs")
        available = self.nodes * hw.node.gpus_per_node
        if gpus < available:
            extras.append(f"{available - gpus} of the {available} GPUs unused")
        return text + (f" ({'; '.join(extras)})" if extras else "")

    def headline(self, lengths: str | None = None) -> str:
        """The first line of every output: model, GPUs and their split, KV dtype, engine, and the request's
        lengths (``lengths`` replaces them for a command whose requests are a workload, e.g. simulate's)."""
        return (f"{self.model.id} on {self.shape_text()}; {self.dtype_text()}; {self.engine} engine; "
                + (lengths or f"{self.prompt_tokens:,} + {self.decode_tokens:,} tokens")
                + (f" ({self.request_fitted})" if self.request_fitted else ""))

    def with_(self, **changes) -> Scenario:
        """A copy with some inputs changed (field or option names, typed or user values), validated again. A prompt or
        decode not given stays not given (the default, fitted again into the copy's limit)."""
        from dataclasses import replace

        unset = {f"{name}_tokens": None for name in ("prompt", "decode") if not getattr(self, f"{name}_given")}
        return replace(self, **{**unset, **{OPTION_FIELDS.get(k, k): v for k, v in changes.items()}})


_INPUTS = tuple(f.name for f in fields(Scenario) if f.init)
_DEFAULTS = {f.name: f.default for f in fields(Scenario) if f.init}
