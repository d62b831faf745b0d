"""Forcing a race: steps run side by side in threads with their own connections, each
pausing right after a chosen read until the others have read too (3 s at most: a step the
code under test makes wait for a lock never gets there, and the first goes on alone)."""
from __future__ import annotations

import threading
import traceback
from collections.abc import Callable


def side_by_side(steps: list[Callable[[], object]], *, monkeypatch,
                 reads: list[tuple[object, str]],
                 expected: type[BaseException] | tuple[type[BaseException], ...]
                 ) -> tuple[list[str], list[str]]:
    """Run `steps` at once, each function `getattr(module, name)` of `reads` made to wait
    after it returns. Returns (the messages of the `expected` exceptions raised, the
    tracebacks of any other)."""
    from django.db import connections

    read_all = threading.Barrier(len(steps))
    for module, name in reads:
        original = getattr(module, name)

        def read_then_wait(*args, _original=original, **kwargs):
            result = _original(*args, **kwargs)
            try:
                read_all.wait(timeout=3)
            except threading.BrokenBarrierError:
                pass  # another step waits for a lock this one holds
            return result

        monkeypatch.setattr(module, name, read_then_wait)
    refused: list[str] = []
    errors: list[str] = []

    def run(step) -> None:
        try:
            step()
        except expected as exc:
            refused.append(str(exc))
        except Exception as exc:  # noqa: BLE001 - returned to the test
            errors.append("".join(traceback.format_exception(exc)))
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(step,)) for step in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return refused, errors
