"""Open wisp's database with every table's migrations: the store's, the layered context's, episodic memory's.

Each owner keeps its own steps (:data:`wisp.core.store.MIGRATIONS`,
:data:`wisp.core.context.schema.MIGRATIONS`,
:data:`wisp.core.episodes.schema.MIGRATIONS`); this module only lists them,
in the order they run, so that the store never imports a feature (DESIGN.md,
"Arrows that never exist": storage knows no feature).
"""

from __future__ import annotations

import os

from .context import schema as context_schema
from .episodes import schema as episodes_schema
from .migrations import Migration
from .store import Store

__all__ = ["FEATURE_MIGRATIONS", "open_store"]

#: The features' steps, after the store's own.
FEATURE_MIGRATIONS: tuple[Migration, ...] = (*context_schema.MIGRATIONS, *episodes_schema.MIGRATIONS)


async def open_store(path: str | os.PathLike[str]) -> Store:
    """:meth:`wisp.core.store.Store.open` with every feature's tables.
    Raises what it raises."""
    return await Store.open(path, FEATURE_MIGRATIONS)
