"""Production: every secret from the environment, HTTPS only, strict cookies and headers."""
import os

from config.security import secret_key_require

from .base import *  # noqa: F403

DEBUG = False
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
secret_key_require(SECRET_KEY, dev_key=DEV_SECRET_KEY)  # noqa: F405
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = True
SECURE_HSTS_SECONDS = 31536000
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = True
CSRF_COOKIE_SECURE = True
SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_HTTPONLY = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
# A strict CSP on every page that does not set its own (task pages allow MTurk to frame them).
MIDDLEWARE = [*MIDDLEWARE, "config.security.DefaultCSPMiddleware"]  # noqa: F405

# --- Cache (rate limits) --------------------------------------------------------------------------
# Task-page and JSON-call rate limits count in the default cache. Local memory would count per
# process (each gunicorn worker its own limit); with QAJ_CACHE_URL (or REDIS_URL) every process
# shares one Redis counter. The key prefix keeps it apart from a broker on the same server.
_CACHE_URL = os.environ.get("QAJ_CACHE_URL") or os.environ.get("REDIS_URL")
if _CACHE_URL:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _CACHE_URL,
            "KEY_PREFIX": "qaj",
        }
    }
# The header our reverse proxy sets with the client's address (e.g. X-Forwarded-For); empty =
# use REMOTE_ADDR. Set it only behind a proxy that overwrites/appends it (see RELIABILITY.md).
QAJ_TRUSTED_PROXY_HEADER = os.environ.get("QAJ_TRUSTED_PROXY_HEADER", "")
