"""Assignment 3, positional encoding: ``spec``, ``reference`` and ``bank``."""
