"""Settings for the benchmark's own server: the base settings, DEBUG off (a debug server keeps
every SQL query in memory), and a URLconf that adds the bare comparison view. Only the benchmark
uses this module, so the bare view is never exposed by a deployment."""
from config.settings.base import *  # noqa: F403

DEBUG = False
ROOT_URLCONF = "bench.urls"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
}
# The benchmark's judges run against fake endpoints on 127.0.0.1 (testing/openai_server.py).
QAJ_JUDGE_PRIVATE_NETWORKS = "loopback"
