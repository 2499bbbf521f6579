"""Assignment 4, masks and numerical stability: ``spec``, ``reference`` and ``bank``."""
