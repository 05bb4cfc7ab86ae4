"""kvplan: a capacity planner for the KV cache of LLM serving, built for long chain-of-thought decode.

The Python API (names resolve lazily, so ``import kvplan`` costs nothing)::

    import kvplan
    s = kvplan.Scenario(model=kvplan.load_model("deepseek-r1"), hardware=kvplan.load_hardware("h200"),
                        kv_dtype_request="fp8")
    plan = kvplan.plan_concurrency(s)          # a frozen plan of typed values
    plan.max_concurrency.value, plan.max_concurrency.why.substituted

Every calculator takes a ``Scenario`` and returns a typed plan; ``kvplan.present_*`` turns a plan into the
``Result`` the CLI renders.
"""

__version__ = "0.1.0"

_EXPORTS = {
    "Scenario": "kvplan.scenario",
    "load_model": "kvplan.presets",
    "load_hardware": "kvplan.presets",
    "KVDtype": "kvplan.dtypes",
    "KvplanError": "kvplan.errors",
    "plan_size": "kvplan.calc.size",
    "SizePlan": "kvplan.calc.size",
    "plan_concurrency": "kvplan.calc.concurrency",
    "ConcurrencyOptions": "kvplan.calc.concurrency",
    "ConcurrencyPlan": "kvplan.calc.concurrency",
    "plan_preemption": "kvplan.calc.preemption",
    "PreemptionPlan": "kvplan.calc.preemption",
    "CostSettings": "kvplan.calc.costs",
    "kv_pool": "kvplan.calc.capacity",
    "request_bytes": "kvplan.calc.capacity",
    "host_tier": "kvplan.calc.capacity",
    "host_link_rate": "kvplan.calc.costs",
    "swap_seconds": "kvplan.calc.costs",
    "step_model": "kvplan.calc.costs",
}
_PRESENTERS = {"present_size": "kvplan.present.size", "present_concurrency": "kvplan.present.concurrency",
               "present_preemption": "kvplan.present.preemption"}

__all__ = sorted(_EXPORTS) + sorted(_PRESENTERS)


def __getattr__(name: str):
    import importlib

    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _PRESENTERS:
        return importlib.import_module(_PRESENTERS[name]).present
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
