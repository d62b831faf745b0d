"""Local development and the one-command demo: debug on, embedded defaults. With DEBUG off
(`DJANGO_DEBUG=0`) this is a deployment, and the development key, public in this repository,
would sign every in-house link, page token and session: it refuses to start without a strong
`DJANGO_SECRET_KEY`, as production does, and sends its cookies over HTTPS only."""
import os

from config.security import secret_key_require

from .base import *  # noqa: F403
from .base import DEV_SECRET_KEY, SECRET_KEY, env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
if not DEBUG:
    secret_key_require(SECRET_KEY, dev_key=DEV_SECRET_KEY,
                       where=" and DEBUG is off (DJANGO_DEBUG); for a deployment use "
                             "config.settings.production")
    # A deployment's cookies, as production's: the session and CSRF cookies travel over HTTPS
    # only (browsers still keep them on http://localhost); a deployment on plain HTTP says so
    # with DJANGO_SECURE_COOKIES=0. Its pages get production's CSP too (no framing, no inline
    # script), besides X-Frame-Options DENY.
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("DJANGO_SECURE_COOKIES", True)
    SESSION_COOKIE_HTTPONLY = True
    MIDDLEWARE = [*MIDDLEWARE, "config.security.DefaultCSPMiddleware"]  # noqa: F405

# A researcher's own machine: a model served here (vLLM, Ollama, llama.cpp) or on the lab's
# network is the common case; with DEBUG off this is a deployment, which allows none unless set.
QAJ_JUDGE_PRIVATE_NETWORKS = os.environ.get("QAJ_JUDGE_PRIVATE_NETWORKS",
                                            "loopback,private" if DEBUG else "")
