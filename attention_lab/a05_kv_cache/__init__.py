"""Assignment 5, incremental decoding with a KV cache: visible self-checks (``checks``), the cost plot
(``visual``) and the stored worked cases (``worked_cases.json``)."""
