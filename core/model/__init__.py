"""Model endpoints over httpx."""
