"""A wire tap in front of a real OTLP/HTTP receiver: it decodes every span the exporters send,
then forwards the request unchanged. Backends that key spans by id (Phoenix) store a span sent
twice once; the tap sees both sends, so the tests can say "exactly once" about the wire.
"""

from __future__ import annotations

import gzip
import threading
from collections import defaultdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROJECT_KEY = "openinference.project.name"


class OtlpTap:
    def __init__(self, upstream: str):
        self.upstream = upstream
        self.sent: dict[str, list[tuple[str, str]]] = defaultdict(list)
        """(span name, span id hex) of every span received, by the resource's project name."""
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def record(self, body: bytes) -> None:
        request = ExportTraceServiceRequest.FromString(body)
        with self._lock:
            for resource_spans in request.resource_spans:
                attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
                project = attributes.get(PROJECT_KEY, "default")
                for scope in resource_spans.scope_spans:
                    self.sent[project] += [(span.name, span.span_id.hex()) for span in scope.spans]

    def __enter__(self) -> OtlpTap:
        tap = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                plain = gzip.decompress(body) if self.headers.get("Content-Encoding") == "gzip" else body
                if self.path.endswith("/v1/traces"):
                    tap.record(plain)
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("content-type", "content-encoding")}
                reply = httpx.post(tap.upstream + self.path, content=body, headers=headers, timeout=30)
                self.send_response(reply.status_code)
                self.send_header("Content-Type", reply.headers.get("content-type", "application/x-protobuf"))
                self.send_header("Content-Length", str(len(reply.content)))
                self.end_headers()
                self.wfile.write(reply.content)

            def log_message(self, *args: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
