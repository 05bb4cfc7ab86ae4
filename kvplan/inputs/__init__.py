"""Inputs: user values (preset ids, paths, Hugging Face ids, unit strings, start-up logs, plan files) turned into
specs and scenarios, with one-line errors."""
