"""Assignment 2, multi-head attention: ``spec``, ``reference`` and ``bank``."""
