"""Test settings: fast password hashing, eager nothing (integration tests start real workers)."""
from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
