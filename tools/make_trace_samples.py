#!/usr/bin/env python3
"""Write the sample traces of tests/data/traces/: a few hundred made-up requests in each format ``kvplan simulate
--trace`` reads, for the tests and docs/traces.md. No row comes from the real datasets: every figure is drawn here
from a seeded ``random.Random`` (the standard library's Mersenne Twister, the same sequence on every machine and
Python version), so the files are reproducible byte for byte.

* ``azure_code_300.csv``: the Azure LLM inference traces' columns (Azure/AzurePublicDataset,
  AzureLLMInferenceDataset2023.md): ``TIMESTAMP,ContextTokens,GeneratedTokens``, wall-clock datetimes with 7
  fractional digits (100 ns ticks), as the 2023 files write them. Gaps exponential (mean 0.4 s), contexts
  lognormal (median 1,500), outputs lognormal (median 20): a code-completion-like shape, not the trace's figures.
* ``burstgpt_300.csv``: BurstGPT's columns (HPMLL/BurstGPT, README.md "Schema"): ``Timestamp,Model,Request
  tokens,Response tokens,Total tokens,Log Type``, whole seconds from the start; two models, two log types, and
  about 3% of the rows with 0 response tokens (BurstGPT's failures).
* ``mooncake_300.jsonl``: Mooncake's FAST'25 JSON lines (kvcache-ai/Mooncake, FAST25-release/traces):
  ``timestamp`` (ms), ``input_length``, ``output_length``, ``hash_ids`` (ceil(input_length / 512) ids); every
  prompt starts with block 0 (a system prompt), and about half continue an earlier request's full blocks (a
  conversation's next turn), so prefixes are shared.
* ``kvplan_300.csv``: kvplan's own ``prompt_tokens,output_tokens,arrival_s``.

Usage: ``python tools/make_trace_samples.py`` (writes the files) or ``--check`` (exit 1 if a file differs from what
this script writes). Standard library only.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import random
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "traces"
ROWS = 300
SEED = 19          # the issue that asked for them
BLOCK = 512


def _lognormal(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return min(max(int(round(rng.lognormvariate(math.log(median), sigma))), low), high)


def azure(rng: random.Random) -> str:
    start = datetime.datetime(2023, 11, 16, 18, 0, 0)
    ticks = 0                                             # 100 ns ticks since the start
    lines = ["TIMESTAMP,ContextTokens,GeneratedTokens"]
    for _ in range(ROWS):
        ticks += int(rng.expovariate(1 / 0.4) * 10**7)
        sec, tick = divmod(ticks, 10**7)
        stamp = (start + datetime.timedelta(seconds=sec)).strftime("%Y-%m-%d %H:%M:%S") + f".{tick:07d}"
        lines.append(f"{stamp},{_lognormal(rng, 1500, 0.8, 3, 7437)},{_lognormal(rng, 20, 1.0, 1, 1899)}")
    return "\n".join(lines) + "\n"


def burstgpt(rng: random.Random) -> str:
    t = 5                                                  # the first request 5 s after midnight
    lines = ["Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type"]
    for _ in range(ROWS):
        t += int(rng.expovariate(1 / 3.0))
        model = "GPT-4" if rng.random() < 0.2 else "ChatGPT"
        log = "API log" if rng.random() < 0.4 else "Conversation log"
        request = _lognormal(rng, 600, 1.0, 1, 30000)
        response = 0 if rng.random() < 0.03 else _lognormal(rng, 250, 0.9, 1, 4000)
        lines.append(f"{t},{model},{request},{response},{request + response},{log}")
    return "\n".join(lines) + "\n"


def mooncake(rng: random.Random) -> str:
    t = 0
    next_id = 1                                            # id 0: the system prompt every request starts with
    earlier: list[list[int]] = []
    lines = []
    for _ in range(ROWS):
        t += int(rng.expovariate(1 / 300.0))
        ids = [0]
        if earlier and rng.random() < 0.5:                # the next turn of an earlier conversation: its full
            prev = rng.choice(earlier)                     # blocks (its partial last one is written anew)
            ids = prev[:-1] if len(prev) > 1 else [0]
        new_blocks = max(1, _lognormal(rng, 6, 0.9, 1, 120))
        ids += list(range(next_id, next_id + new_blocks))
        next_id += new_blocks
        input_length = (len(ids) - 1) * BLOCK + rng.randint(1, BLOCK)   # the last block partial
        output_length = _lognormal(rng, 300, 0.8, 1, 2000)
        earlier.append(ids)
        lines.append(json.dumps({"timestamp": t, "input_length": input_length, "output_length": output_length,
                                 "hash_ids": ids}))
    return "\n".join(lines) + "\n"


def kvplan(rng: random.Random) -> str:
    t = 0.0
    lines = ["prompt_tokens,output_tokens,arrival_s"]
    for _ in range(ROWS):
        t += rng.expovariate(1 / 0.5)
        lines.append(f"{_lognormal(rng, 1000, 0.7, 1, 16000)},{_lognormal(rng, 2000, 0.9, 1, 30000)},{t:.3f}")
    return "\n".join(lines) + "\n"


FILES = {"azure_code_300.csv": azure, "burstgpt_300.csv": burstgpt, "mooncake_300.jsonl": mooncake,
         "kvplan_300.csv": kvplan}


def samples() -> dict[str, str]:
    """Each file's text, each from its own stream (seed SEED and the file's place) so one can change alone."""
    return {name: make(random.Random(SEED * 100 + i)) for i, (name, make) in enumerate(FILES.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare the files with what this script writes")
    args = parser.parse_args(argv)
    stale = []
    for name, text in samples().items():
        path = OUT / name
        if args.check:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            OUT.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path} ({text.count(chr(10))} lines)")
    if stale:
        print("differ from tools/make_trace_samples.py: " + ", ".join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
