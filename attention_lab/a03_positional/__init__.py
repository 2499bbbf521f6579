"""Assignment 3, positional encoding: visible self-checks (``checks``), the positional-encoding explorer
(``visual``) and the stored worked cases (``worked_cases.json``)."""
