"""The example class and the hostile bank that ``make demo`` and ``make report`` grade, and the report."""
