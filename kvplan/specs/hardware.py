"""The hardware spec: one GPU's memory, bandwidth, compute and links, and the node it sits in.

Every figure is a ``Sourced`` value. Units are in the field names: GiB = 2^30 bytes, GB = 10^9 bytes,
TB/s = 10^12 B/s, GB/s = 10^9 B/s per direction unless the name says otherwise.
"""

import datetime
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Annotated

from kvplan.specs.layers import SPEC_CONFIG, MinLen, Range, check_fields
from kvplan.specs.model import Sourced

COMPUTE_DTYPES = ("bf16", "fp16", "fp8", "fp4", "int8")
# Above this an hourly price for one GPU is a typo (a whole node's price, or cents): the dearest public
# on-demand offers are a few tens of dollars per GPU-hour.
MAX_USD_PER_GPU_HOUR = 1000.0
# How the source of an [efficiency] value fitted by `kvplan calibrate` starts (kvplan.inputs.calibration_file writes
# it, kvplan.calc.costs.step_factors reads it): here, so that pricing a step does not load the calibration reader.
CALIBRATED = "calibration "
HOST_OSES = ("linux", "windows")


@dataclass(frozen=True, kw_only=True)
class HostLink:
    """The GPU's link to host memory (PCIe or C2C): line rate and measured copy rates."""

    __pydantic_config__ = SPEC_CONFIG

    name: str
    theoretical_gb_s_per_direction: Sourced
    measured_h2d_gb_s: Sourced | None = None
    measured_d2h_gb_s: Sourced | None = None
    # Fraction of the per-direction line rate a large contiguous pinned copy reaches (measured pinned-copy rates,
    # cited in each preset).
    large_copy_efficiency: Sourced | None = None


@dataclass(frozen=True, kw_only=True)
class ScaleUpLink:
    """The GPU-to-GPU link inside a node (NVLink, Infinity Fabric)."""

    __pydantic_config__ = SPEC_CONFIG

    name: str
    gb_s_per_direction: Sourced | None = None
    # GPUs one scale-up domain spans when it is wider than a node (NVL72: 72 GPUs over 18 trays of 4); None: the node
    domain_gpus: Annotated[int, Range(ge=1, le=1_000_000)] | None = None


@dataclass(frozen=True, kw_only=True)
class NodeSpec:
    """The node a GPU sits in: GPU count, host DRAM, network and local storage."""

    __pydantic_config__ = SPEC_CONFIG

    gpus_per_node: Annotated[int, Range(ge=1, le=1024)] = 8
    host_dram_gb: Sourced | None = None
    nic_gb_s_per_direction_per_gpu: Sourced | None = None
    local_nvme_tb: Sourced | None = None
    # The host's operating system where the preset states it ("linux" or "windows": Windows itself or WSL2 / Docker
    # Desktop on it). Windows keeps more of a GPU's memory from CUDA processes than Linux (the display and WDDM);
    # SGLang's pre-load free memory on a GPU without a measured driver reserve reads it (kvplan.engines.sglang).
    os: str | None = None

    def __post_init__(self) -> None:
        check_fields(self)
        if self.os is not None and self.os not in HOST_OSES:
            raise ValueError(f"node.os = {self.os!r} is not a host kvplan knows; write one of {', '.join(HOST_OSES)} "
                             "(Windows, WSL2 and Docker Desktop on Windows are all 'windows'), or leave it out")


@dataclass(frozen=True, kw_only=True)
class Price:
    """A public on-demand price for one GPU-hour: the figure (its source names the offer's page), the offer
    (provider, instance, region) and the date it was read, since prices change."""

    __pydantic_config__ = SPEC_CONFIG

    usd_per_gpu_hour: Sourced
    offer: Annotated[str, MinLen(3)]
    as_of: Annotated[str, MinLen(10)]  # YYYY-MM-DD, the day the price was read

    def __post_init__(self) -> None:
        check_fields(self)
        try:
            datetime.date.fromisoformat(self.as_of)
        except ValueError:
            raise ValueError(f"price.as_of = {self.as_of!r} is not a date; write it as YYYY-MM-DD") from None
        if not 0 < self.usd_per_gpu_hour.value <= MAX_USD_PER_GPU_HOUR:
            raise ValueError(f"price.usd_per_gpu_hour = {self.usd_per_gpu_hour.value} is not a price for one "
                             f"GPU-hour (0 to {MAX_USD_PER_GPU_HOUR:,.0f} USD); divide a node's price by its GPUs")


def _figures(obj, prefix: str = ""):
    """(dotted field name, value) of every Sourced figure inside a spec."""
    for f in fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Sourced):
            yield f"{prefix}{f.name}", value.value
        elif is_dataclass(value):
            yield from _figures(value, f"{prefix}{f.name}.")
        elif isinstance(value, dict):
            for key, item in value.items():
                if isinstance(item, Sourced):
                    yield f"{prefix}{f.name}.{key}", item.value


@dataclass(frozen=True, kw_only=True)
class Efficiency:
    """What a serving engine achieves on this GPU, as fractions of the peaks and fixed overheads: the decode step
    model's factors (kvplan.calc.costs). Each is optional; kvplan's sourced generic defaults fill the gaps."""

    __pydantic_config__ = SPEC_CONFIG

    hbm: Sourced | None = None                   # achievable fraction of hbm_bandwidth_tb_s
    mfu: Sourced | None = None                   # achievable fraction of the dense peak in decode GEMMs
    prefill_mfu: Sourced | None = None           # achievable fraction of the dense peak in prefill
    link: Sourced | None = None                  # achievable fraction of the scale-up link per direction
    link_latency_us: Sourced | None = None       # one small collective (all-reduce) on the scale-up link
    overhead_us_per_layer: Sourced | None = None  # kernel launches etc. per layer per step
    overhead_us_per_step: Sourced | None = None   # scheduling, sampling, per step
    overhead_us_per_moe_layer: Sourced | None = None  # routing, permutation, per MoE layer per step
    allreduce_latency_us: Sourced | None = None  # a decode step's small TP all-reduce (in-graph, custom kernel)
    allreduce_link: Sourced | None = None        # fraction of the link that all-reduce's bytes see
    overhead_us_per_request: Sourced | None = None  # per request per step (scheduling, sampling, outputs)
    upcast_hbm: Sourced | None = None            # HBM fraction of weights upcast in-kernel (no matrix cores)
    gemm_floor_us: Sourced | None = None         # the least one decode GEMM kernel takes, whatever its bytes
    upcast_moe_us: Sourced | None = None         # fixed latency per MoE layer of experts upcast in-kernel

    def __post_init__(self) -> None:
        check_fields(self)
        for name in ("hbm", "mfu", "prefill_mfu", "link", "allreduce_link", "upcast_hbm"):
            value = getattr(self, name)
            if value is not None and not 0 < value.value <= 1:
                raise ValueError(f"efficiency.{name} is a fraction in (0, 1], got {value.value}")
        for name in ("link_latency_us", "overhead_us_per_layer", "overhead_us_per_step", "overhead_us_per_moe_layer",
                     "allreduce_latency_us", "overhead_us_per_request", "gemm_floor_us",
                     "upcast_moe_us"):
            value = getattr(self, name)
            if value is not None and not 0 <= value.value <= 1e6:
                raise ValueError(f"efficiency.{name} is a time in microseconds in 0 .. 1,000,000, got {value.value}")


@dataclass(frozen=True, kw_only=True)
class HardwareSpec:
    """One GPU: HBM capacity and bandwidth, dense compute peaks, host link, and its node."""

    __pydantic_config__ = SPEC_CONFIG

    id: str
    name: str
    description: str = ""
    sources: Annotated[tuple[str, ...], MinLen(1)]
    # HBM as the device reports it (nvidia-smi / rocm-smi total), in GiB; not the marketing GB figure.
    hbm_capacity_gib: Sourced
    hbm_capacity_vendor_gb: Sourced | None = None
    # Only the figures a calculation uses are required: HBM capacity and the host link. Bandwidth and compute
    # peaks are checked where a command needs them (compare-preemption needs a dense peak).
    hbm_bandwidth_tb_s: Sourced | None = None
    # Dense (no 2:4 sparsity) peak tensor TFLOP/s by dtype: keys bf16, fp8, fp4.
    dense_tflops: dict[str, Sourced] = field(default_factory=dict)
    host_link: HostLink
    scale_up: ScaleUpLink | None = None
    node: NodeSpec = field(default_factory=NodeSpec)
    efficiency: Efficiency = field(default_factory=Efficiency)
    # A public on-demand price per GPU-hour, where one exists (kvplan presets list shows it).
    price: Price | None = None
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        """Every figure is positive; efficiencies are fractions; HBM is below 100,000 GiB."""
        check_fields(self)
        unknown = set(self.dense_tflops) - set(COMPUTE_DTYPES)
        if unknown:
            raise ValueError(f"unknown compute dtype(s) {sorted(unknown)}; use {', '.join(COMPUTE_DTYPES)}")
        for name, value in _figures(self):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
            if name.endswith("efficiency") and value > 1:
                raise ValueError(f"{name} is a fraction of the line rate, got {value}")
        if self.hbm_capacity_gib.value > 100_000:
            raise ValueError(f"hbm_capacity_gib {self.hbm_capacity_gib.value} is absurd for one GPU")

    @property
    def hbm_bytes(self) -> int:
        return int(round(self.hbm_capacity_gib.value * 2**30))
