"""LLM support of cmx-mlperf: a tiny locally built Llama, a transformers streaming SUT,
an OpenAI-compatible HTTP SUT (the FlexBench design), a loopback test server and ROUGE.

Heavy modules (torch, transformers, rouge-score) are imported inside functions only.
"""
