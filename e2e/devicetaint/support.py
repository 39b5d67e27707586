"""A recording validating webhook, for fault injection and for seeing requests the API does not keep.

kube-apiserver calls it for DELETE of pods and for updates of ``pods/status``, restricted by a label, so
other tests' pods are never affected. It records every request (operation, sub-resource, user, delete
options) and can refuse the first N pod DELETEs with status 500, which kube-apiserver passes on to the
client unchanged: that is how scenario 32's "the first 3 DELETEs return 500" is produced.

It serves HTTPS on 127.0.0.1 with a throw-away CA made by the devcluster's PKI helper.
"""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from devcluster import pki
from devcluster.kube import Kube

LABEL = "e2e.dra-operators.test/recorded"


@dataclass
class Recorder:
    fail_deletes: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def review(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(request)
            refuse = request["operation"] == "DELETE" and self.fail_deletes > 0
            if refuse:
                self.fail_deletes -= 1
        response: dict[str, Any] = {"uid": request["uid"], "allowed": not refuse}
        if refuse:
            response["status"] = {"code": 500, "message": "injected failure"}
        return response

    def deletes(self) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if r["operation"] == "DELETE"]

    def status_updates(self, username: str) -> list[dict[str, Any]]:
        with self.lock:
            return [
                r
                for r in self.requests
                if r.get("subResource") == "status" and r["userInfo"]["username"] == username
            ]


def _handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            answer = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "response": recorder.review(review["request"]),
            }
            body = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@contextmanager
def recording_webhook(api: Kube, name: str, fail_deletes: int = 0) -> Iterator[Recorder]:
    """Serve the webhook and register it for pods labelled ``LABEL=name``, until the block ends.

    The registration goes first at the end: with the server gone, a registered webhook would fail every
    DELETE of those pods, including the namespace cleanup's.
    """
    key_dir = Path(tempfile.mkdtemp(prefix="dt-webhook-"))
    keys = pki.generate(key_dir)
    recorder = Recorder(fail_deletes)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(recorder))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(keys.path("serving.crt"), keys.path("serving.key"))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, name="dt-webhook", daemon=True)
    thread.start()
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    try:
        api.create(
            path,
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": name},
                "webhooks": [
                    {
                        "name": "recorder.e2e.dra-operators.test",
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{server.server_address[1]}/review",
                            "caBundle": base64.b64encode(keys.read("ca.crt")).decode(),
                        },
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["DELETE", "UPDATE"],
                                "resources": ["pods", "pods/status"],
                            }
                        ],
                        "objectSelector": {"matchLabels": {LABEL: name}},
                        "failurePolicy": "Fail",
                        "sideEffects": "None",
                        "admissionReviewVersions": ["v1"],
                        "timeoutSeconds": 5,
                    }
                ],
            },
        )
        yield recorder
    finally:
        api.delete(f"{path}/{name}")
        server.shutdown()
        server.server_close()
        shutil.rmtree(key_dir, ignore_errors=True)
