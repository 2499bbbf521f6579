"""Assignment 4, masks and numerical stability: visible self-checks (``checks``), the masking explorer
(``visual``) and the stored worked cases (``worked_cases.json``)."""
