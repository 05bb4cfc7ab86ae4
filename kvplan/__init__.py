"""kvplan: a capacity planner for the KV cache of LLM serving, built for long chain-of-thought decode."""

__version__ = "0.1.0"
