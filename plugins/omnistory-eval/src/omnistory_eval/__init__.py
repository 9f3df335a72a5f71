"""Evaluation: automatic metrics and LLM judges, run evaluator-major over a whole sweep."""
