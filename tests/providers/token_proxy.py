"""A proxy on 127.0.0.1 in front of moto's server that honours EC2's ClientToken, as AWS does.

moto ignores ``ClientToken`` (every RunInstances makes new instances), so a test against it cannot
show what stops two launchers that share no state file. AWS's documented behaviour
(EC2 API reference, "Ensuring idempotency"): a RunInstances repeated with the same client token
and the same parameters returns the first call's result and launches nothing; the same token with
other parameters fails with ``IdempotentParameterMismatch``. This proxy does exactly that, and
nothing else: every other request goes to moto untouched. Repeats of one token are serialised (a
second call waits for the first to finish), as the cloud's token store is.

What it leaves unproven: AWS keeps tokens for at least 24 hours and per account and region (here:
per proxy, for the test's life), and which parameters AWS compares is not published in full
(here: every form field of the request but the signature-dependent ones).
"""

from __future__ import annotations

import contextlib
import http.server
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field

MISMATCH = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error>'
            b"<Code>IdempotentParameterMismatch</Code><Message>The client token you have "
            b"provided is associated with a request that specified different parameters"
            b"</Message></Error></Errors><RequestID>token-proxy</RequestID></Response>")


@dataclass
class TokenLog:
    """What the proxy saw: RunInstances calls by token, and how each was answered."""

    forwarded: list[str] = field(default_factory=list)
    replayed: list[str] = field(default_factory=list)
    mismatched: list[str] = field(default_factory=list)
    #: per mismatch, the form fields whose values differed from the token's first call
    differing: list[list[str]] = field(default_factory=list)
    no_token: int = 0


def _form(body: bytes) -> dict[str, list[str]]:
    return urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


@contextlib.contextmanager
def token_proxy(upstream: str, delay_s: float = 0.0) -> Iterator[tuple[str, TokenLog]]:
    """(the proxy's URL, its log) while the block runs; ``upstream`` is moto's URL;
    ``delay_s``: every request is answered that much later (a slow but healthy endpoint)."""
    log = TokenLog()
    lock = threading.Lock()
    per_token: dict[str, threading.Lock] = {}
    done: dict[str, tuple[dict[str, list[str]], int, bytes, str]] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *_: object) -> None:  # quiet
            pass

        def _forward(self, body: bytes | None) -> tuple[int, bytes, str]:
            headers = {k: v for k, v in self.headers.items()
                       if k.lower() not in ("host", "content-length", "connection")}
            req = urllib.request.Request(upstream + self.path, data=body, method=self.command,
                                         headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return resp.status, resp.read(), resp.headers.get("Content-Type", "text/xml")
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read(), exc.headers.get("Content-Type", "text/xml")

        def _reply(self, status: int, body: bytes, ctype: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _handle(self) -> None:
            if delay_s:
                time.sleep(delay_s)
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            form = _form(body) if body else {}
            token = (form.get("ClientToken") or [""])[0]
            if form.get("Action") != ["RunInstances"]:
                self._reply(*self._forward(body))
                return
            if not token:
                log.no_token += 1
                self._reply(*self._forward(body))
                return
            with lock:
                mine = per_token.setdefault(token, threading.Lock())
            with mine:  # a repeat waits for the first call of its token
                params = form  # every form field (none is signed into the body)
                if token in done:
                    first, status, payload, ctype = done[token]
                    if first != params:
                        log.mismatched.append(token)
                        log.differing.append(sorted(k for k in set(first) | set(params)
                                                    if first.get(k) != params.get(k)))
                        self._reply(400, MISMATCH, "text/xml")
                        return
                    log.replayed.append(token)
                    self._reply(status, payload, ctype)
                    return
                status, payload, ctype = self._forward(body)
                log.forwarded.append(token)
                if status < 300:  # AWS keeps the token of a call that succeeded
                    done[token] = (params, status, payload, ctype)
                self._reply(status, payload, ctype)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _handle  # noqa: N815

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", log
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
