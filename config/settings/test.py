"""Test settings: fast password hashing, eager nothing (integration tests start real workers)."""
import os

from .base import *  # noqa: F403

DEBUG = False
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# The tests' tiny random BERTs cannot beat token F1; the promotion floor has its own tests
# (tests/metrics_app/lerc/test_promotion_floor.py), which set the baselines they compare against.
QAJ_LERC_PROMOTION_BASELINES: list[str] = []

# The suite runs on machines with and without native bf16 (AMX, AVX-512 BF16): fp32 scoring
# makes every number it checks the same on both. bf16 scoring has its own tests, which ask for it.
QAJ_LERC_PRECISION = "fp32"

# A job's heartbeat runs in a thread on its own database connection, which cannot see the rows
# of a test that runs inside a transaction: its first beat would find no job and end the run as
# "taken over" (it did on a loaded machine, when one step of a test outlasted 15 s). The tests
# of the lease itself and of killed workers set their own interval (override_settings, or the
# environment of the worker they start).
QAJ_JOB_HEARTBEAT_SECONDS = float(os.environ.get("QAJ_JOB_HEARTBEAT_SECONDS", "600"))

# The fake endpoints the tests start (testing/openai_server.py) listen on 127.0.0.1; the tests of
# the address policy set their own.
QAJ_JUDGE_PRIVATE_NETWORKS = os.environ.get("QAJ_JUDGE_PRIVATE_NETWORKS", "loopback")
