"""Memory blocks: procedures, user facts and episodic memory, and their tools."""
