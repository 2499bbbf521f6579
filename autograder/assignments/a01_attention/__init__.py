"""Assignment 1, scaled dot-product attention: ``spec`` (steps, hidden and worked cases, example students),
``reference`` and ``bank`` (correct variants, known mistakes as edits of the solution)."""
