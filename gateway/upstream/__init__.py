"""The gateway's own side of its broker connections: its service identity."""
