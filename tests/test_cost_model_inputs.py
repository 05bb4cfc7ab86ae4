"""The cost model asks for the hardware figures it uses, when it uses them."""

import dataclasses

import pytest

from kvplan.calc.costs import compute_dtype_for
from kvplan.errors import KvplanError
from kvplan.inputs.presets import load_hardware, load_model


def test_recompute_needs_a_dense_peak_and_says_so():
    h100 = load_hardware("h100-sxm")
    bare = dataclasses.replace(h100, dense_tflops={})
    with pytest.raises(KvplanError, match="no dense_tflops"):
        compute_dtype_for(load_model("llama-3.1-8b"), bare, "auto")
    # fp8 weights on a GPU with an fp8 peak use it; a GPU with only bf16 falls back to bf16
    r1 = load_model("deepseek-r1")
    assert compute_dtype_for(r1, h100, "auto") == "fp8"
    only_bf16 = dataclasses.replace(h100, dense_tflops={"bf16": h100.dense_tflops["bf16"]})
    assert compute_dtype_for(r1, only_bf16, "auto") == "bf16"
    with pytest.raises(KvplanError, match="no dense fp8 peak"):
        compute_dtype_for(r1, only_bf16, "fp8")
