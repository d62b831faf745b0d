"""What the two rehearsal commands (`mturk_rehearsal`, `prolific_rehearsal`) share: serving a
local protocol fake until Ctrl-C or `kill`, and telling the researcher the settings that point
QA Judge at it."""
from __future__ import annotations

import signal
from collections.abc import Callable


def serve_until_stopped(httpd, *, announce: Callable[[], None]) -> None:
    """`announce()`, then serve until Ctrl-C or SIGTERM; the socket is closed either way."""
    try:  # before anything is printed: whoever reads the output may stop it at once
        signal.signal(signal.SIGTERM, _stop)  # `kill` stops it like Ctrl-C
    except ValueError:  # not the main thread (called from code)
        pass
    try:
        announce()
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        httpd.server_close()


def announce_settings(command, *, env: dict[str, str], mismatched: list[str],
                      forgets: str) -> None:
    """The `export` lines of `env`, a warning naming the settings this shell does not have yet
    (`mismatched`), and what stopping the server forgets."""
    out = command.stdout
    out.write("Start QA Judge (runserver, and Celery if you use it) with:")
    for name, value in env.items():
        out.write(f"  export {name}={value}")
    if mismatched:
        out.write(command.style.WARNING(
            "This shell's settings do not point at the rehearsal yet: "
            + ", ".join(mismatched) + " (export the lines above where QA Judge runs)."))
    out.write(f"{forgets} live in memory: stopping the server forgets them. Ctrl-C to stop.")
    command.stdout.flush()


def _stop(_signum, _frame) -> None:
    raise KeyboardInterrupt
