"""A process that hosts sessions and gets killed by a test: ``python -m tests.agent.crash_host STORE URL``.

It starts the store and the sessions, starts a turn in session "hard" whose model asks for
a slow terminal command, prints ``running`` when the tool has started, and waits to be
killed (SIGKILL, no cleanup).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from protocols._session import StartTurn, Subscribe, ToolStarted
from tests.agent.session_kit import start_kit


class _Model:
    def __init__(self, url: str) -> None:
        self.base_url = url


def main() -> None:
    store, url = Path(sys.argv[1]), sys.argv[2]
    kit = start_kit(store, _Model(url))  # type: ignore[arg-type]
    started = threading.Event()

    class Watcher:
        def tell(self, event: Any) -> None:
            if isinstance(event, ToolStarted):
                started.set()

    session = kit.session("hard")
    session.tell(Subscribe(subscriber=Watcher()))
    session.tell(StartTurn(text="run the slow thing"))
    if not started.wait(30):
        print("the tool never started", flush=True)
        sys.exit(1)
    print("running", flush=True)
    threading.Event().wait(60)  # until killed
    sys.exit(2)


if __name__ == "__main__":
    main()
