"""SQL of the layered context's tables (issue "Layered context"): migration 2.

Filled in by the layered-context work; until then it creates nothing.
"""

MIGRATION = """
SELECT 1;
"""
