"""Local development and the one-command demo: debug on, embedded defaults. With DEBUG off
(`DJANGO_DEBUG=0`) this is a deployment, and the development key, public in this repository,
would sign every in-house link, page token and session: it refuses to start without a strong
`DJANGO_SECRET_KEY`, as production does."""
import os

from config.security import secret_key_require

from .base import *  # noqa: F403
from .base import DEV_SECRET_KEY, SECRET_KEY, env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
if not DEBUG:
    secret_key_require(SECRET_KEY, dev_key=DEV_SECRET_KEY,
                       where=" and DEBUG is off (DJANGO_DEBUG); for a deployment use "
                             "config.settings.production")

# A researcher's own machine: a model served here (vLLM, Ollama, llama.cpp) or on the lab's
# network is the common case; with DEBUG off this is a deployment, which allows none unless set.
QAJ_JUDGE_PRIVATE_NETWORKS = os.environ.get("QAJ_JUDGE_PRIVATE_NETWORKS",
                                            "loopback,private" if DEBUG else "")
