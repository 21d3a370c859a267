"""wisp.tui: Textual screens and widgets. No SQL, no HTTP."""
