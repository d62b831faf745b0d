"""Local development and the one-command demo: debug on, embedded defaults."""
from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DJANGO_DEBUG", True)
