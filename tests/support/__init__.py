"""Helpers shared by test modules: plain functions and constants (fixtures live in conftest.py
files, shared ones in `celery_workers`, a plugin the root conftest loads). A test module never
imports from another test module."""
