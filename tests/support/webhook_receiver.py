"""A webhook receiver in its own process, as a team's chat service would be: it answers 200 to every POST and
appends what it got ({"path", "headers", "body"}) as a JSON line to a file.

    python -m tests.support.webhook_receiver PORT FILE
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def main(port: int, out: str) -> None:
    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with open(out, "a") as f:
                f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body.decode()}) + "\n")
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"receiver listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
