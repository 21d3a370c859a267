"""Episodic memory across conversations: capture, refine, query, forget."""
