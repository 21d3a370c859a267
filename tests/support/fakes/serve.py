"""Run a fake endpoint as a process, for end-to-end tests in tmux.

    python -m tests.support.fakes.serve --protocol ollama|openai [--port N] [--script FILE.json]
                                [--model NAME ...] [--api-key KEY]

Prints the base URL (``http://127.0.0.1:PORT``) as the first line of stdout,
then serves until it gets SIGTERM or SIGINT. ``FILE.json`` holds a JSON list of
script entries (see :mod:`tests.support.fakes.servers`); when they run out, every
request gets the default reply ``"You said: <last user content>"``.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading

from .servers import make_server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.support.fakes.serve", description=__doc__.splitlines()[0])
    parser.add_argument("--protocol", choices=["ollama", "openai"], required=True)
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument("--script", help="a JSON file holding a list of script entries")
    parser.add_argument("--model", action="append", help="a model name to list (repeatable)")
    parser.add_argument("--api-key", help="openai only: require this bearer key")
    args = parser.parse_args(argv)

    script = []
    if args.script:
        with open(args.script, encoding="utf-8") as fh:
            script = json.load(fh)
        if not isinstance(script, list):
            parser.error("the script file must hold a JSON list")
    kw = {}
    if args.model:
        kw["models"] = args.model
    if args.api_key and args.protocol == "openai":
        kw["api_key"] = args.api_key
    server = make_server(args.protocol, script, port=args.port, **kw)
    server.start()
    print(server.base_url, flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
