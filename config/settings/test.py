"""Test settings: fast password hashing, eager nothing (integration tests start real workers)."""
from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The tests' tiny random BERTs cannot beat token F1; the promotion floor has its own tests
# (tests/metrics_app/lerc/test_promotion_floor.py), which set the baselines they compare against.
QAJ_LERC_PROMOTION_BASELINES: list[str] = []

# The suite runs on machines with and without native bf16 (AMX, AVX-512 BF16): fp32 scoring
# makes every number it checks the same on both. bf16 scoring has its own tests, which ask for it.
QAJ_LERC_PRECISION = "fp32"
