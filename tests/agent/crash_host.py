"""A process that hosts sessions and gets killed by a test: ``python -m tests.agent.crash_host STORE URL [FIFO]``.

It starts the store and the sessions, starts a turn in session "hard" whose model asks for
a slow terminal command, prints ``running`` when the tool has started (with FIFO: once the
command wrote a line to it, so its process runs), and waits to be killed (SIGKILL, no cleanup).
It records its process groups in ``groups/`` beside STORE, as ``hermes serve`` does in its home.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any

from actors import use_group_ledger
from protocols._session import StartTurn, Subscribe, ToolStarted
from tests.agent.session_kit import start_kit


class _Model:
    def __init__(self, url: str) -> None:
        self.base_url = url


def main() -> None:
    store, url = Path(sys.argv[1]), sys.argv[2]
    use_group_ledger(store.parent / "groups")  # as hermes serve does: its killer reaps the tool's group from it
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
    if len(sys.argv) > 3:  # the command says when its process runs (and is in the group ledger)
        up = threading.Event()
        threading.Thread(target=lambda: (Path(sys.argv[3]).read_text(), up.set()), daemon=True).start()
        if not up.wait(30):
            print("the tool's process never started", flush=True)
            sys.exit(1)
    print("running", flush=True)
    threading.Event().wait(60)  # until killed
    sys.exit(2)


if __name__ == "__main__":
    main()
