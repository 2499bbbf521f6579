"""Assignment 2, multi-head attention: visible self-checks (``checks``), the multi-head explorer (``visual``) and
the stored worked cases (``worked_cases.json``)."""
