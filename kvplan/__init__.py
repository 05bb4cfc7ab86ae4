"""kvplan: a capacity planner for the KV cache of LLM serving, built for long chain-of-thought decode.

The Python API (names resolve lazily, so ``import kvplan`` costs nothing)::

    import kvplan
    s = kvplan.Scenario(model="deepseek-r1", hardware="h200", kv_dtype_request="fp8", decode="32k")
    # or typed: kvplan.Scenario(model=kvplan.load_model("deepseek-r1"), hardware=kvplan.load_hardware("h200"), ...)
    plan = kvplan.plan_concurrency(s)          # a frozen plan of typed values
    plan.max_concurrency.value, plan.max_concurrency.why.substituted

A ``Scenario`` reads user values as the command line does (preset ids, paths, "32k", "80GiB"; a bad one raises
``InputError`` or ``ScenarioError``, both ``KvplanError``, with the CLI's message). Every calculator takes a
``Scenario`` and returns a typed plan; ``kvplan.present_*`` turns a plan into the
``Result`` the CLI renders.
"""

__version__ = "0.1.0"

# Type checkers see every export with its real type through this block (``typing`` is not imported at run time:
# mypy and pyright treat a name TYPE_CHECKING as true); at run time ``__getattr__`` below imports each on first use.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from kvplan.calc.capacity import host_tier, kv_pool, request_bytes
    from kvplan.calc.check import CheckPlan, plan_check
    from kvplan.calc.concurrency import ConcurrencyOptions, ConcurrencyPlan, plan_concurrency
    from kvplan.calc.costs import CostSettings, host_link_rate, step_model, swap_seconds
    from kvplan.calc.explain_log import ExplainLogPlan, plan_explain_log
    from kvplan.calc.pd import PdOptions, PdPlan, plan_pd
    from kvplan.calc.preemption import PreemptionPlan, plan_preemption
    from kvplan.calc.recommend import RecommendOptions, RecommendPlan, plan_recommend
    from kvplan.calc.simulate import SimOptions, SimPlan, plan_simulate
    from kvplan.calc.size import SizePlan, plan_size
    from kvplan.calc.sizing import SizingPlan, parse_target
    from kvplan.calc.sizing import search as search_layouts
    from kvplan.calc.tpot import TpotOptions, TpotPlan, plan_tpot
    from kvplan.errors import InputError, KvplanError, ScenarioError
    from kvplan.inputs.plan_file import load as load_plan
    from kvplan.inputs.presets import load_hardware, load_model
    from kvplan.inputs.startup_log import read_log
    from kvplan.inputs.workload import build as build_workload
    from kvplan.options.scenarios import build_scenario, scenario_from_log
    from kvplan.options.simulate import simulate_request
    from kvplan.present.check import present as present_check
    from kvplan.present.concurrency import present as present_concurrency
    from kvplan.present.explain_log import present as present_explain_log
    from kvplan.present.pd import present as present_pd
    from kvplan.present.preemption import present as present_preemption
    from kvplan.present.recommend import present as present_recommend
    from kvplan.present.simulate import present as present_simulate
    from kvplan.present.size import present as present_size
    from kvplan.present.tpot import present as present_tpot
    from kvplan.scenario import Scenario
    from kvplan.specs.dtypes import KVDtype

_EXPORTS = {
    "Scenario": "kvplan.scenario",
    "load_model": "kvplan.inputs.presets",
    "load_hardware": "kvplan.inputs.presets",
    "KVDtype": "kvplan.specs.dtypes",
    "KvplanError": "kvplan.errors",
    "InputError": "kvplan.errors",
    "ScenarioError": "kvplan.errors",
    "build_scenario": "kvplan.options.scenarios",
    "scenario_from_log": "kvplan.options.scenarios",
    "simulate_request": "kvplan.options.simulate",
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
