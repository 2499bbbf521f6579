"""Assignment 5, incremental decoding with a KV cache: ``spec``, ``reference`` and ``bank``."""
