"""Before the suite: are PostgreSQL and Redis there?

Exit 0: both reachable. Exit 1: something is missing and that is allowed (the suite then
runs on the embedded default). Exit 2: something is missing and OPS_REQUIRE_SERVICES=1,
as in CI, where a missing service must fail the run rather than skip tests.
"""

from __future__ import annotations

import os
import socket
import sys

SERVICES = {"PostgreSQL": ("127.0.0.1", 5432), "Redis": ("127.0.0.1", 6379)}


def reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=2):
            return True
    except OSError:
        return False


def main() -> int:
    missing = [name for name, addr in SERVICES.items() if not reachable(*addr)]
    if not missing:
        return 0
    print(f"preflight: not reachable: {', '.join(missing)}", file=sys.stderr)
    if os.environ.get("OPS_REQUIRE_SERVICES") == "1":
        print("preflight: OPS_REQUIRE_SERVICES=1, so this is a failure", file=sys.stderr)
        return 2
    return 1


if __name__ == "__main__":
    sys.exit(main())
