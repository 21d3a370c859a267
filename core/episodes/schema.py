"""SQL of episodic memory's tables (issue "Episodic memory"): migration 3.

Filled in by the episodic-memory work; until then it creates nothing.
"""

MIGRATION = """
SELECT 1;
"""
