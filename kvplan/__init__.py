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
    "load_model": "kvplan.inputs.presets",
    "load_hardware": "kvplan.inputs.presets",
    "KVDtype": "kvplan.specs.dtypes",
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
    "plan_tpot": "kvplan.calc.tpot",
    "TpotOptions": "kvplan.calc.tpot",
    "TpotPlan": "kvplan.calc.tpot",
    "plan_pd": "kvplan.calc.pd",
    "PdOptions": "kvplan.calc.pd",
    "PdPlan": "kvplan.calc.pd",
    "plan_simulate": "kvplan.calc.simulate",
    "SimOptions": "kvplan.calc.simulate",
    "SimPlan": "kvplan.calc.simulate",
    "plan_check": "kvplan.calc.check",
    "CheckPlan": "kvplan.calc.check",
    "plan_recommend": "kvplan.calc.recommend",
    "RecommendOptions": "kvplan.calc.recommend",
    "RecommendPlan": "kvplan.calc.recommend",
    "plan_explain_log": "kvplan.calc.explain_log",
    "ExplainLogPlan": "kvplan.calc.explain_log",
    "read_log": "kvplan.inputs.startup_log",
    "parse_target": "kvplan.calc.sizing",
    "SizingPlan": "kvplan.calc.sizing",
}
# names whose module attribute has another name
_RENAMED = {"search_layouts": ("kvplan.calc.sizing", "search"), "build_workload": ("kvplan.inputs.workload", "build"),
            "load_plan": ("kvplan.inputs.plan_file", "load")}
_PRESENTERS = {"present_size": "kvplan.present.size", "present_concurrency": "kvplan.present.concurrency",
               "present_preemption": "kvplan.present.preemption", "present_tpot": "kvplan.present.tpot",
               "present_pd": "kvplan.present.pd", "present_simulate": "kvplan.present.simulate",
               "present_check": "kvplan.present.check", "present_recommend": "kvplan.present.recommend",
               "present_explain_log": "kvplan.present.explain_log"}

__all__ = sorted(_EXPORTS) + sorted(_RENAMED) + sorted(_PRESENTERS)


def __getattr__(name: str):
    import importlib

    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    if name in _RENAMED:
        module, attr = _RENAMED[name]
        return getattr(importlib.import_module(module), attr)
    if name in _PRESENTERS:
        return importlib.import_module(_PRESENTERS[name]).present
    raise AttributeError(f"module 'kvplan' has no attribute {name!r}")
