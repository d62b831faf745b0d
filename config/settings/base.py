"""Settings shared by every environment.

Everything a deployment changes comes from environment variables; the defaults need no
server at all (SQLite file, filesystem Celery broker, local artifact folder) so that a fresh
clone runs with one command.
"""
from __future__ import annotations

import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent.parent
VAR_DIR = Path(os.environ.get("QAJ_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str = "") -> list[str]:
    return [part.strip() for part in os.environ.get(name, default).split(",") if part.strip()]


DEV_SECRET_KEY = "dev-only-insecure-key-change-me"  # development and tests only
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", DEV_SECRET_KEY)
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1,[::1],testserver")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    # Swagger UI served from this package, not a CDN: the docs work offline and under the CSP.
    "drf_spectacular_sidecar",
    "annotation.apps.AnnotationConfig",
    "metrics_app.apps.MetricsAppConfig",
    # Sign-in throttling (config/login_throttle.py); after the apps, so the admin lists
    # annotation first.
    "axes",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, so it sees exceptions from views first: a too-large body is a JSON 413 and a busy
    # SQLite a 503 with advice, not an HTML 400 or a 500.
    "config.middleware.ExplainedErrorsMiddleware",
    # Turns a locked-out sign-in into the 429 page that says what to do (config/login_throttle.py).
    "axes.middleware.AxesMiddleware",
]

# --- Sign-in throttling (django-axes) ------------------------------------------------------------
# Only the admin login signs anyone in (researchers); annotators use links and tokens. After
# AXES_FAILURE_LIMIT wrong passwords for one username from one address, that pair is locked for
# AXES_COOLOFF_TIME, right password or not. Unlock: `manage.py axes_reset_username NAME`.
AUTHENTICATION_BACKENDS = [
    "config.login_throttle.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = int(os.environ.get("QAJ_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=int(os.environ.get("QAJ_LOGIN_LOCKOUT_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_CLIENT_IP_CALLABLE = "config.login_throttle.client_address"
AXES_HANDLER = "config.login_throttle.LoginThrottleHandler"  # writes only when there are failures
AXES_LOCKOUT_TEMPLATE = "admin/login_locked.html"
# Failures are recorded (Axes › Access attempts); successful sign-ins are not logged row by row.
AXES_DISABLE_ACCESS_LOG = True
AXES_VERBOSE = False

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "core.context_processors.vocabulary",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'qajudge.sqlite3'}"),
        conn_max_age=int(os.environ.get("DATABASE_CONN_MAX_AGE", "60")),
        # A kept connection is checked before a request reuses it: after a database restart
        # the first request reconnects instead of failing (docs/RELIABILITY.md).
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web server and Celery worker write to the same file. WAL lets pages read while a job
    # writes; IMMEDIATE takes the write lock when a transaction begins, so a writer waits for
    # the busy timeout instead of failing at once when two read-then-write transactions meet;
    # long jobs compute outside transactions and write in short ones (docs/RELIABILITY.md).
    DATABASES["default"].setdefault("OPTIONS", {}).update({
        "timeout": int(os.environ.get("QAJ_SQLITE_BUSY_TIMEOUT", "30")),
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
    })
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # A fresh QAJ_VAR_DIR (or a DATABASE_URL file in a folder not made yet): SQLite creates the
    # file but not its folder, and `migrate` would fail with "unable to open database file".
    if DATABASES["default"]["NAME"] not in ("", ":memory:"):
        Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
# Parallel test runs (several developers, or SQLite + PostgreSQL passes) must not share a test
# database; QAJ_TEST_DB_NAME pins the name for a run and for the worker processes it starts.
if os.environ.get("QAJ_TEST_DB_NAME"):
    DATABASES["default"]["TEST"] = {"NAME": os.environ["QAJ_TEST_DB_NAME"]}

# Where `rundemo` finds the published judgments it loads as real-data demo projects (read in
# place; a missing folder is skipped).
QAJ_DEMO_DATA_DIR = Path(os.environ.get("QAJ_DEMO_DATA_DIR", BASE_DIR.parent / "shared" / "data"))

# Largest file the admin's browser import accepts (larger: manage.py import_data).
QAJ_IMPORT_UPLOAD_MAX_MB = int(os.environ.get("QAJ_IMPORT_UPLOAD_MAX_MB", "20"))
# Cost estimates warn when a stage's effective hourly pay (from the trial's median time per
# item) is below this many US dollars.
QAJ_MIN_HOURLY_PAY = float(os.environ.get("QAJ_MIN_HOURLY_PAY", "12"))

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("DJANGO_STATIC_ROOT", VAR_DIR / "staticfiles"))

LOGIN_URL = "admin:login"
# Where a sign-in goes when its `next` is missing or points off-site (Django refuses those):
# the landing page, which links every researcher page. Django's default is no page here.
LOGIN_REDIRECT_URL = "/"

REST_FRAMEWORK = {
    # Token first: DRF takes the WWW-Authenticate header from the first class, so a request
    # without credentials gets 401 + "WWW-Authenticate: Token" rather than a bare 403.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    # Staff researchers and superusers only (annotation/permissions.py); 401 without credentials.
    "DEFAULT_PERMISSION_CLASSES": ["annotation.permissions.IsResearcher"],
    "DEFAULT_SCHEMA_CLASS": "config.schema.AutoSchema",
    # DRF's defaults, with JSON nesting limited (a deep body is a 400, not a RecursionError).
    "DEFAULT_PARSER_CLASSES": [
        "core.api.LimitedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "TITLE": "QA Judge API",
    "DESCRIPTION": "Projects, items, judgments, reports and metric scoring for QA Judge.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The schema and the docs page answer whom the API answers (a researcher; 401 without
    # credentials, 403 for other accounts), not the whole internet.
    "SERVE_PERMISSIONS": ["annotation.permissions.IsResearcher"],
    # Path parameters as Django's converters match them: a value outside the pattern never
    # reaches a view (the URL resolver answers 404), so the schema must not promise it.
    "PATH_CONVERTER_OVERRIDES": {
        "slug": {"type": "string", "pattern": "^[-a-zA-Z0-9_]+$"},
        "int": {"type": "integer", "minimum": 0},
    },
    # Several models have a `kind` or `status` field with different choices: name each enum.
    "ENUM_NAME_OVERRIDES": {
        "TaskKindEnum": "annotation.models.TaskKind",
        "StageKindEnum": "annotation.models.StageKind",
        "StageStatusEnum": "annotation.models.StageStatus",
        "ProviderEnum": "annotation.models.Provider",
        "ExperimentModeEnum": "annotation.models.ExperimentMode",
        "ModelKindEnum": "metrics_app.models.ModelKind",
        "ModelStatusEnum": "metrics_app.models.ModelStatus",
        "ScoringStatusEnum": "metrics_app.models.ScoringStatus",  # scoring and judge jobs
    },
}

# --- Celery -----------------------------------------------------------------------------------
# The default broker is kombu's filesystem transport so that a fresh clone needs no server;
# CELERY_BROKER_URL=redis://... or amqp://... switches to a real broker.
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
QAJ_BROKER_DIR = Path(
    os.environ.get("QAJ_BROKER_DIR", VAR_DIR / "broker")
)
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
QAJ_BEAT_SCHEDULE_FILE = str(VAR_DIR / "celerybeat-schedule")

# --- Artifacts (trained models) ----------------------------------------------------------------
# A local folder by default; s3://bucket/prefix stores model versions in S3 through boto3.
QAJ_ARTIFACT_ROOT = os.environ.get("QAJ_ARTIFACT_ROOT", str(VAR_DIR / "artifacts"))

# --- Crowd providers --------------------------------------------------------------------------
# Public HTTPS base URL that MTurk/Prolific send workers to (the task pages live under it).
QAJ_PUBLIC_BASE_URL = os.environ.get("QAJ_PUBLIC_BASE_URL", "http://127.0.0.1:8000")
# MTurk uses the sandbox unless production is asked for explicitly.
MTURK_PRODUCTION = env_bool("MTURK_PRODUCTION", False)
MTURK_ENDPOINT_URL = os.environ.get("MTURK_ENDPOINT_URL", "")
PROLIFIC_API_URL = os.environ.get("PROLIFIC_API_URL", "https://api.prolific.com/api/v1/")
PROLIFIC_API_TOKEN = os.environ.get("PROLIFIC_API_TOKEN", "")
# Provider retries (throttling, 5xx, lost responses): attempts and the first backoff in seconds.
MTURK_MAX_ATTEMPTS = int(os.environ.get("MTURK_MAX_ATTEMPTS", "8"))
MTURK_RETRY_BASE_SECONDS = float(os.environ.get("MTURK_RETRY_BASE_SECONDS", "0.5"))
PROLIFIC_MAX_ATTEMPTS = int(os.environ.get("PROLIFIC_MAX_ATTEMPTS", "8"))
PROLIFIC_RETRY_BASE_SECONDS = float(os.environ.get("PROLIFIC_RETRY_BASE_SECONDS", "0.5"))
PROLIFIC_WORKSPACE_ID = os.environ.get("PROLIFIC_WORKSPACE_ID", "")
# A participant group used as a block list on Prolific (blocking is local-only without it).
PROLIFIC_BLOCKLIST_GROUP_ID = os.environ.get("PROLIFIC_BLOCKLIST_GROUP_ID", "")
PROLIFIC_FEE_RATE = os.environ.get("PROLIFIC_FEE_RATE", "0.333")
# Prolific sessions are verified against the study's submissions before their work counts or is
# paid (annotation/services/assignments/verification.py): once at the task page's door (one
# call, this timeout), and by the sync. An unverified session idle this long gives its items back.
QAJ_PROLIFIC_VERIFY_ON_ENTRY = env_bool("QAJ_PROLIFIC_VERIFY_ON_ENTRY", True)
PROLIFIC_VERIFY_TIMEOUT_SECONDS = float(os.environ.get("PROLIFIC_VERIFY_TIMEOUT_SECONDS", "3"))
QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES = float(
    os.environ.get("QAJ_PROLIFIC_UNVERIFIED_TIMEOUT_MINUTES", "45"))
# Task-page rate limits, JSON: {"page": [requests, seconds], "api": [...], "page_address": [...],
# "api_address": [...]} over the defaults in annotation/views/task_pages.py (docs/RELIABILITY.md).
def _rate_limits(raw: str) -> dict[str, tuple[int, int]]:
    scopes = ("page", "api", "page_address", "api_address")
    try:
        parsed = json.loads(raw or "{}")
        limits = {scope: (int(value[0]), int(value[1])) for scope, value in parsed.items()}
    except (ValueError, TypeError, IndexError, KeyError, AttributeError) as exc:
        raise ValueError(f'QAJ_TASK_RATE_LIMITS must be JSON like {{"page_address": [1200, 60]}} '
                         f"(requests, seconds per scope); got {raw!r}: {exc}") from None
    unknown = sorted(set(limits) - set(scopes))
    if unknown or any(n < 1 or seconds < 1 for n, seconds in limits.values()):
        raise ValueError(f"QAJ_TASK_RATE_LIMITS: scopes are {', '.join(scopes)} with positive "
                         f"[requests, seconds]; got {raw!r}")
    return limits


QAJ_TASK_RATE_LIMITS = _rate_limits(os.environ.get("QAJ_TASK_RATE_LIMITS", ""))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("QAJ_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "WARNING"}},
}

# Celery settings proper (read by worker/celery.py through the CELERY_ namespace).
if CELERY_BROKER_URL.startswith("filesystem://"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(QAJ_BROKER_DIR / "queue"),
        "data_folder_out": str(QAJ_BROKER_DIR / "queue"),
        "processed_folder": str(QAJ_BROKER_DIR / "processed"),
        # Exchange bindings; kombu's default is ./control in the working directory.
        "control_folder": str(QAJ_BROKER_DIR / "control"),
        "store_processed": False,
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Late-acked tasks not acknowledged within this time are delivered again: keep it above the
    # longest LERC training (a second delivery of a live job is a no-op, see docs/DEPLOYMENT.md).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "visibility_timeout": int(os.environ.get("QAJ_BROKER_VISIBILITY_TIMEOUT", "3600")),
    }
    # Several deployments (or test runs) can share one Redis: a prefix keeps their queues apart.
    if os.environ.get("QAJ_BROKER_KEY_PREFIX"):
        CELERY_BROKER_TRANSPORT_OPTIONS["global_keyprefix"] = os.environ["QAJ_BROKER_KEY_PREFIX"]
# Late acks + reject on worker loss: a task whose worker dies is redelivered; the task code makes
# redelivery safe (idempotency tokens, status checks before side effects).
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_DEFAULT_QUEUE = "default"
# The LERC beat check is light and must run when every GPU worker is dead: exact names win over
# the glob in Celery's router. (The stale-job sweep, `metrics.recover_stale_jobs`, is on
# `default` too.)
CELERY_TASK_ROUTES = {
    "worker.tasks.lerc.lerc_refresh": {"queue": "default"},
    "worker.tasks.lerc.*": {"queue": "gpu"},
}
CELERY_BEAT_SCHEDULE_FILENAME = QAJ_BEAT_SCHEDULE_FILE
# Periodic jobs; each area adds its entries here (name -> {"task": ..., "schedule": seconds}).
CELERY_BEAT_SCHEDULE: dict[str, dict] = {}
# Crowd providers: reconcile, review and pay every live stage (annotation/services/review.py).
# The period bounds MTurk's auto-approval delay too (`review_window_problem`).
QAJ_PROVIDER_SYNC_SECONDS = float(os.environ.get("QAJ_PROVIDER_SYNC_SECONDS", "300"))
if not 0 < QAJ_PROVIDER_SYNC_SECONDS < float("inf"):
    raise ValueError("QAJ_PROVIDER_SYNC_SECONDS must be a number of seconds above 0, not "
                     f"{os.environ.get('QAJ_PROVIDER_SYNC_SECONDS')!r}")
CELERY_BEAT_SCHEDULE["providers-sync"] = {
    "task": "worker.tasks.providers.providers_sync_all",
    "schedule": QAJ_PROVIDER_SYNC_SECONDS,
}
# Annotator pages: idle in-house/Prolific assignments give their items back (every 5 minutes).
CELERY_BEAT_SCHEDULE["release-abandoned-assignments"] = {
    "task": "worker.tasks.assignments.release_abandoned_assignments", "schedule": 300.0,
}
# Where finished Prolific participants are sent (`?cc=<stage.settings.prolific_completion_code>`)
# and which turkSubmitTo origins task pages may post a finished HIT to.
PROLIFIC_COMPLETION_URL = os.environ.get(
    "PROLIFIC_COMPLETION_URL", "https://app.prolific.com/submissions/complete"
)
QAJ_MTURK_SUBMIT_HOSTS = env_list(
    "QAJ_MTURK_SUBMIT_HOSTS", "https://www.mturk.com,https://workersandbox.mturk.com"
)
# LERC: retrain when a project gathered this many new judgments (a version "training" whose
# worker stopped beating is failed by the job lease sweep below).
QAJ_LERC_MIN_NEW_JUDGMENTS = int(os.environ.get("QAJ_LERC_MIN_NEW_JUDGMENTS", "500"))
QAJ_LERC_BACKBONE = os.environ.get("QAJ_LERC_BACKBONE", "")  # "" = packaged MiniLM
# How the learned judge scores: "auto" holds its weights in bf16 on a CPU with native bf16
# (AMX, AVX-512 BF16) and in fp32 elsewhere (CUDA autocasts to bf16 either way); "fp32" gives
# the same numbers on every machine at 0.6-0.7x the speed there (docs/LERC.md, "bf16 serving").
QAJ_LERC_PRECISION = os.environ.get("QAJ_LERC_PRECISION", "auto").strip().lower()
if QAJ_LERC_PRECISION not in ("auto", "fp32", "bf16"):
    raise ValueError(f"QAJ_LERC_PRECISION must be auto, fp32 or bf16, not {QAJ_LERC_PRECISION!r}")
# TrainConfig fields every new version starts from (JSON in the variable; keys given there
# replace these). The defaults are sized for a CPU: all 23,499 EVOUNA judgments train in under
# an hour on 2 cores (docs/LERC.md: 25 minutes for the 15,717 of the main split), validation and
# test are capped so evaluation stays minutes, and the learning rate is the top of the paper's
# grid (few steps on small data). Two epochs, because the second raised validation Pearson on
# every run of the protocol; training keeps whichever epoch validates better.
def _json_object_env(name: str) -> dict:
    """The JSON object in the variable `name` ({} when unset or empty); ImproperlyConfigured
    naming the variable when it is not JSON or not an object, so every manage.py command says
    what to fix instead of a traceback. (The values are checked where they are used:
    QAJ_LERC_TRAIN_OPTIONS by TrainConfig when a version is created.)"""
    raw = os.environ.get(name, "") or "{}"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not JSON ({exc}); give an object such as "
                                   f'{{"epochs": 2}}, got {raw!r}') from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"{name} must be a JSON object such as {{\"epochs\": 2}}, "
                                   f"not a {type(value).__name__}: {raw!r}")
    return value


QAJ_LERC_TRAIN_OPTIONS = {
    "epochs": 2, "learning_rate": 3e-5, "max_length": 256, "max_val_examples": 2000,
    "max_test_examples": 3000,
    **_json_object_env("QAJ_LERC_TRAIN_OPTIONS"),
}
# A new version is promoted only if, on the same validation judgments, its Pearson with the
# human scores beats every one of these baselines (those that can run here) and is at least the
# promoted version's. Comma-separated metric names; empty turns the floor off.
QAJ_LERC_PROMOTION_BASELINES = [
    name.strip() for name in
    os.environ.get("QAJ_LERC_PROMOTION_BASELINES", "f1,bertscore,meteor").split(",")
    if name.strip()
]
# Beat retrains on judgments gathered on the platform; imported judgments count only when this
# is true (a re-import must not start a CPU training run).
QAJ_LERC_REFRESH_COUNTS_IMPORTS = os.environ.get(
    "QAJ_LERC_REFRESH_COUNTS_IMPORTS", "false").lower() == "true"
CELERY_BEAT_SCHEDULE["lerc-refresh"] = {
    "task": "worker.tasks.lerc.lerc_refresh",
    "schedule": float(os.environ.get("QAJ_LERC_REFRESH_SECONDS", "3600")),
}
# Scoring jobs created while the broker was down are sent once it is back.
CELERY_BEAT_SCHEDULE["metrics-enqueue-pending-scoring"] = {
    "task": "metrics.enqueue_pending_scoring", "schedule": 120.0,
}
# The job lease (core/leases.py), held by scoring jobs, judge runs and LERC training: renewed
# every QAJ_JOB_HEARTBEAT_SECONDS; a job silent for QAJ_JOB_STALE_AFTER_SECONDS lost its worker.
# One sweep over every kind (metrics_app/services/job_leases.py) sends a scoring or judge job
# again, up to QAJ_JOB_MAX_ATTEMPTS runs, then fails it with the reason; a LERC version is
# failed at once.
# QAJ_LERC_STALE_AFTER_SECONDS, LERC training's own limit before the lease was shared (default
# 300), is the old name of QAJ_JOB_STALE_AFTER_SECONDS: read when only it is set.
QAJ_JOB_HEARTBEAT_SECONDS = float(os.environ.get("QAJ_JOB_HEARTBEAT_SECONDS", "15"))
QAJ_JOB_STALE_AFTER_SECONDS = float(
    os.environ.get("QAJ_JOB_STALE_AFTER_SECONDS")
    or os.environ.get("QAJ_LERC_STALE_AFTER_SECONDS") or "120")
QAJ_JOB_MAX_ATTEMPTS = int(os.environ.get("QAJ_JOB_MAX_ATTEMPTS", "3"))
CELERY_BEAT_SCHEDULE["jobs-recover-stale"] = {
    "task": "metrics.recover_stale_jobs", "schedule": 60.0,
}
# Judge jobs (LLM judges over a project) are sent again by the same pending resend.
CELERY_BEAT_SCHEDULE["judges-enqueue-pending"] = {
    "task": "judges.enqueue_pending", "schedule": 120.0,
}
# USD per million tokens per judge model, {"model": [prompt, completion]}, adding to or
# replacing metrics_app/services/judges/versions.py DEFAULT_PRICES.
QAJ_JUDGE_PRICES = json.loads(os.environ.get("QAJ_JUDGE_PRICES", "{}") or "{}")
# The loopback and private networks an LLM judge's endpoint may be in (comma-separated CIDRs or
# addresses, or the words `loopback` and `private`): a judge's base_url is written by one
# researcher, and an endpoint at an internal address would reach the deployment's own network.
# Public addresses are always allowed, link-local ones (the cloud metadata service) never
# (metrics_app/services/judges/client.py:address_refusal). Production: none unless set, e.g.
# "loopback" for vLLM on this machine, "10.1.2.3" for the lab's server.
QAJ_JUDGE_PRIVATE_NETWORKS = os.environ.get("QAJ_JUDGE_PRIVATE_NETWORKS", "")
# Reports: recompute agreement/worker/STARC/long-form reports of projects with new judgments.
CELERY_BEAT_SCHEDULE["reports-refresh-stale"] = {
    "task": "worker.tasks.reports.reports_refresh_stale",
    "schedule": float(os.environ.get("QAJ_REPORT_REFRESH_SECONDS", "120")),
}
# Of the projects whose report has read every judgment, how many a beat checks for another
# changed input (`stale_report_watermarks`: about 16 queries and a hash of the items each), a
# random draw of that many: a deployment of 1,000 finished studies checks each about every 50
# beats, not all of them every 2 minutes (a page that reads a stale report recomputes it anyway).
QAJ_REPORT_FINGERPRINT_CHECKS = int(os.environ.get("QAJ_REPORT_FINGERPRINT_CHECKS", "20"))
