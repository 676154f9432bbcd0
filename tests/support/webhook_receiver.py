"""A webhook receiver in its own process, as a team's chat service would be: it appends what it got ({"path",
"headers", "body", "verdict"}) as a JSON line to a file. Without a secret it answers 200 to every POST; with one it
checks the timestamped signature as docs/inbox.md shows a receiver should (`Rein-Signature: t=...,v1=...` over
"<t>.<body>"), and refuses a post that is unsigned, forged, older than TOLERANCE seconds, or seen before (401/409).

    python -m tests.support.webhook_receiver PORT FILE [SECRET [TOLERANCE]]
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def verify(secret: str, header: str, body: bytes, seen: set[str], tolerance: float = 300.0) -> str | None:
    """Why the post is refused (None: it is rein's, fresh, and new). The docs' receiver, line for line."""
    fields = dict(part.split("=", 1) for part in header.split(",") if "=" in part)
    stamp, sent = fields.get("t", ""), fields.get("v1", "")
    if not stamp.isdigit() or not sent:
        return "unsigned"
    expected = hmac.new(secret.encode(), stamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, sent):
        return "forged"
    if abs(time.time() - int(stamp)) > tolerance:
        return "too old"
    if sent in seen:
        return "replayed"
    seen.add(sent)  # kept for the tolerance window: older ones are refused as too old anyway
    return None


def main(port: int, out: str, secret: str = "", tolerance: float = 300.0) -> None:
    seen: set[str] = set()
    lock = threading.Lock()

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            with lock:
                why = verify(secret, self.headers.get("Rein-Signature", ""), body, seen, tolerance) if secret else None
                with open(out, "a") as f:
                    f.write(json.dumps({"path": self.path, "headers": dict(self.headers), "body": body.decode(),
                                        "verdict": why or "accepted"}) + "\n")
            self.send_response(200 if why is None else 409 if why == "replayed" else 401)
            self.end_headers()
            self.wfile.write((why or "ok").encode())

        def log_message(self, *_: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", port), Hook)
    print(f"receiver listening on {port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], *(sys.argv[3:4]), *(float(a) for a in sys.argv[4:5]))
