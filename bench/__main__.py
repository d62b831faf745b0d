"""`python -m bench [--only a,b] [--quick] [--output-dir DIR] [--database-url URL]`

Makes a throwaway database (PostgreSQL at 127.0.0.1:5432 when it answers, else a SQLite file in
a scratch folder), migrates it, runs the benchmarks, prints the table, merges the results into
`bench/results.json` and regenerates `docs/PERFORMANCE.md`, then drops the database.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from .runner import REPO

POSTGRES_ADMIN_URL = "postgres://postgres@127.0.0.1:5432/postgres"


@contextlib.contextmanager
def throwaway_database(scratch: Path, given: str = ""):
    """Yields (database URL, vendor). A given URL is used as it is (and not dropped)."""
    if given:
        yield given, ("sqlite" if given.startswith("sqlite") else "postgresql")
        return
    import dj_database_url
    import psycopg2

    admin_url = os.environ.get("BENCH_POSTGRES_ADMIN_URL", POSTGRES_ADMIN_URL)
    params = dj_database_url.parse(admin_url)
    connect = {"host": params["HOST"], "port": params["PORT"] or 5432,
               "user": params["USER"], "password": params["PASSWORD"] or None,
               "dbname": params["NAME"], "connect_timeout": 5}
    try:
        admin = psycopg2.connect(**connect)
    except psycopg2.OperationalError as exc:
        print(f"PostgreSQL not reachable ({str(exc).strip()}); using SQLite", file=sys.stderr)
        yield f"sqlite:///{scratch / 'bench.sqlite3'}", "sqlite"
        return
    admin.autocommit = True
    name = f"qaj_bench_{os.getpid()}_{int(time.time())}"
    with admin.cursor() as cursor:
        cursor.execute(f'CREATE DATABASE "{name}"')
    admin.close()
    base = admin_url.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}", "postgresql"
    finally:
        from django.db import connections

        connections.close_all()
        admin = psycopg2.connect(**connect)
        admin.autocommit = True
        with admin.cursor() as cursor:
            cursor.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--quick", action="store_true",
                        help="tiny inputs: checks the plumbing, the numbers mean nothing")
    parser.add_argument("--output-dir", type=Path, default=None,
                        help="where results.json and PERFORMANCE.md go "
                             "(default: bench/ and docs/)")
    parser.add_argument("--database-url", default="",
                        help="use this database instead of creating a throwaway one")
    parser.add_argument("--data-dir", type=Path, default=Path(
        os.environ.get("QAJ_SHARED_DATA", REPO.parent / "shared" / "data")))
    parser.add_argument("--profile", type=Path, default=None, metavar="DIR",
                        help="profile each benchmark with pyinstrument into DIR")
    parser.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    from . import registry

    if args.list:
        for name in registry.names():
            print(name)
        return 0
    names = [n.strip() for n in args.only.split(",") if n.strip()] or registry.names()
    benchmarks = [registry.get(n) for n in names]  # unknown names fail before any setup
    if not args.data_dir.is_dir():
        parser.error(f"real data folder {args.data_dir} not found (--data-dir)")
    results_path = (args.output_dir or REPO / "bench") / "results.json"
    document_path = (args.output_dir or REPO / "docs") / "PERFORMANCE.md"

    with tempfile.TemporaryDirectory(prefix="qaj-bench-") as scratch_name:
        scratch = Path(scratch_name)
        with throwaway_database(scratch, args.database_url) as (url, vendor):
            os.environ["DATABASE_URL"] = url
            os.environ["DJANGO_SETTINGS_MODULE"] = "bench.settings"
            # Artifacts, broker folders and the like go to the scratch folder, not var/.
            os.environ["QAJ_VAR_DIR"] = str(scratch / "var")
            import django

            django.setup()
            from django.core.management import call_command

            from .document import write_document
            from .runner import Context, machine_info, merge_results, run_one, table

            started = time.perf_counter()
            call_command("migrate", verbosity=0)
            print(f"database: {vendor} (migrated in {time.perf_counter() - started:.0f} s)",
                  flush=True)
            machine = machine_info()  # before the benchmarks change torch's thread count
            ctx = Context(quick=args.quick, work_dir=scratch, data_dir=args.data_dir,
                          database_url=url, vendor=vendor)
            results = []
            run = {"id": datetime.now(UTC).isoformat(timespec="seconds"),
                   "benchmarks": [b.name for b in benchmarks], "wall_s": 0.0,
                   "quick": args.quick}
            for benchmark in benchmarks:
                print(f"--- {benchmark.name}: {benchmark.title}", flush=True)
                result = run_one(benchmark, ctx, profile_dir=args.profile)
                results.append(result)
                print(f"    {result.status} in {result.seconds:.0f} s", flush=True)
                if result.error:
                    print(result.error, file=sys.stderr)
                # Written after every benchmark: an interrupted run keeps what it measured.
                run["wall_s"] = round(time.perf_counter() - started, 1)
                write_document(document_path,
                               merge_results(results_path, [result], machine, run))
    print()
    print(table(results))
    print(f"\nwrote {results_path} and {document_path}")
    # Misses are results (named in the table and the document); only a crash fails the command.
    return 1 if any(r.status == "error" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
