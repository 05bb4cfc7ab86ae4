"""The hardware spec: one GPU's memory, bandwidth, compute and links, and the node it sits in.

Every figure is a ``Sourced`` value. Units are in the field names: GiB = 2^30 bytes, GB = 10^9 bytes,
TB/s = 10^12 B/s, GB/s = 10^9 B/s per direction unless the name says otherwise.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kvplan.model import Sourced


class HostLink(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    theoretical_gb_s_per_direction: Sourced
    measured_h2d_gb_s: Sourced | None = None
    measured_d2h_gb_s: Sourced | None = None
    # Fraction of the per-direction line rate a large contiguous pinned copy reaches (hardware.md §3/§9).
    large_copy_efficiency: Sourced | None = None


class ScaleUpLink(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    name: str
    gb_s_per_direction: Sourced | None = None


class NodeSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    gpus_per_node: Annotated[int, Field(ge=1, le=1024)] = 8
    host_dram_gb: Sourced | None = None
    nic_gb_s_per_direction_per_gpu: Sourced | None = None
    local_nvme_tb: Sourced | None = None


class HardwareSpec(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    id: str
    name: str
    description: str = ""
    sources: tuple[str, ...] = Field(min_length=1)
    # HBM as the device reports it (nvidia-smi / rocm-smi total), in GiB; not the marketing GB figure.
    hbm_capacity_gib: Sourced
    hbm_capacity_vendor_gb: Sourced | None = None
    hbm_bandwidth_tb_s: Sourced
    # Dense (no 2:4 sparsity) peak tensor TFLOP/s by dtype: keys bf16, fp8, fp4.
    dense_tflops: dict[str, Sourced]
    host_link: HostLink
    scale_up: ScaleUpLink | None = None
    node: NodeSpec = NodeSpec()
    notes: tuple[str, ...] = ()

    @field_validator("dense_tflops")
    @classmethod
    def _dtypes(cls, value: dict[str, Sourced]) -> dict[str, Sourced]:
        unknown = set(value) - {"bf16", "fp16", "fp8", "fp4", "int8"}
        if unknown:
            raise ValueError(f"unknown compute dtype(s) {sorted(unknown)}; use bf16, fp16, fp8, fp4, int8")
        if "bf16" not in value:
            raise ValueError("dense_tflops needs at least bf16")
        return value

    @model_validator(mode="after")
    def _sane_figures(self) -> HardwareSpec:
        """Every figure is positive; efficiencies are fractions; HBM is below 100,000 GiB."""
        def walk(obj, prefix):
            for name in type(obj).model_fields:
                value = getattr(obj, name)
                if isinstance(value, Sourced):
                    yield f"{prefix}{name}", value.value
                elif isinstance(value, BaseModel):
                    yield from walk(value, f"{prefix}{name}.")
                elif isinstance(value, dict):
                    for key, item in value.items():
                        if isinstance(item, Sourced):
                            yield f"{prefix}{name}.{key}", item.value

        for name, value in walk(self, ""):
            if value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")
            if name.endswith("efficiency") and value > 1:
                raise ValueError(f"{name} is a fraction of the line rate, got {value}")
        if self.hbm_capacity_gib.value > 100_000:
            raise ValueError(f"hbm_capacity_gib {self.hbm_capacity_gib.value} is absurd for one GPU")
        return self

    @property
    def hbm_bytes(self) -> int:
        return int(round(self.hbm_capacity_gib.value * 2**30))
