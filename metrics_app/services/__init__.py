"""Writes of the metrics app (services: `<entity>_<action>`, keyword-only)."""
