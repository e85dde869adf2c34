#!/usr/bin/env python3
"""A tiny Lambda runtime API on loopback, to time a function's cold init and invoke it.

For each run it starts the bootstrap with a Lambda-like environment (the engine's
variables set, AWS_ENDPOINT_URL on a loopback port this script listens on), and measures
the time from the process start to its first `GET /2018-06-01/runtime/invocation/next`.
Any connection to the AWS endpoint before that request is an init-time network call and
is reported. With --event, the first run also gets that payload and the function's answer
(response, or error with its errorType) is printed. Then the bootstrap is stopped.

    python3 functions/bootstrap/scripts/runtime_api.py \\
        --bootstrap target/lambda/stackflow-fn-bootstrap/bootstrap --handler Plan \\
        --runs 5 --event events/plan.json

--handler is the function's handler string (`_HANDLER`), which names the task the
bootstrap runs (default: Plan).

--strace FILE runs the first run under `strace -f -e trace=connect` and writes the trace
there (to see that init connects to nothing but the runtime API).

Prints one JSON document: init times in milliseconds, their median, the endpoint
connections seen during init, and the invocation's result.
"""

import argparse
import http.server
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

PREFIX = "/2018-06-01/runtime"


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.first_next = threading.Event()
        self.first_next_at = None
        self.answered = threading.Event()
        self.answer = None
        self.pending_event = None
        self.endpoint_connections = 0
        self.endpoint_connections_before_next = 0


STATE = State()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the bootstrap was stopped

    def do_GET(self):
        if self.path != PREFIX + "/invocation/next":
            self._reply(404)
            return
        now = time.monotonic()
        with STATE.lock:
            if STATE.first_next_at is None:
                STATE.first_next_at = now
                STATE.endpoint_connections_before_next = STATE.endpoint_connections
            event, STATE.pending_event = STATE.pending_event, None
        STATE.first_next.set()
        if event is None:
            # No work: hold the request until the bootstrap is stopped.
            time.sleep(30)
            return
        request_id = str(uuid.uuid4())
        self._reply(
            200,
            event,
            {
                "Content-Type": "application/json",
                "Lambda-Runtime-Aws-Request-Id": request_id,
                "Lambda-Runtime-Deadline-Ms": str(int(time.time() * 1000) + 60_000),
                "Lambda-Runtime-Invoked-Function-Arn": "arn:aws:lambda:us-east-1:123456789012:function:local",
                "Lambda-Runtime-Trace-Id": "Root=1-00000000-000000000000000000000000;Sampled=0",
            },
        )

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        kind = self.path.rsplit("/", 1)[-1]
        # Accept first, then record: the run stops the bootstrap once it has the answer.
        self._reply(202, b'{"status":"OK"}', {"Content-Type": "application/json"})
        if self.path.startswith(PREFIX + "/invocation/") and kind in ("response", "error"):
            try:
                payload = json.loads(body or b"null")
            except ValueError:
                payload = body.decode(errors="replace")
            STATE.answer = {
                "kind": kind,
                "errorTypeHeader": self.headers.get("Lambda-Runtime-Function-Error-Type"),
                "body": payload,
            }
            STATE.answered.set()
        elif self.path == PREFIX + "/init/error":
            STATE.answer = {"kind": "init-error", "body": body.decode(errors="replace")}
            STATE.answered.set()


def count_endpoint_connections(sock):
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        with STATE.lock:
            STATE.endpoint_connections += 1
        conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--event", help="a payload file for the first run")
    ap.add_argument("--handler", default="Plan", help="the handler string (_HANDLER): the task")
    ap.add_argument("--function-name", default="stackflow-local")
    ap.add_argument("--strace", help="trace the first run's connect calls into this file")
    ap.add_argument("--timeout", type=float, default=20.0)
    args = ap.parse_args()

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    api = "127.0.0.1:%d" % server.server_address[1]

    endpoint = socket.socket()
    endpoint.bind(("127.0.0.1", 0))
    endpoint.listen(16)
    threading.Thread(target=count_endpoint_connections, args=(endpoint,), daemon=True).start()

    home = tempfile.mkdtemp(prefix="lambda-home-")
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": home,
        "AWS_LAMBDA_RUNTIME_API": api,
        "_HANDLER": args.handler,
        "AWS_LAMBDA_FUNCTION_NAME": args.function_name,
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "128",
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_LOG_GROUP_NAME": "/aws/lambda/" + args.function_name,
        "AWS_LAMBDA_LOG_STREAM_NAME": "local",
        "AWS_REGION": "us-east-1",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "AKIDLOCAL",
        "AWS_SECRET_ACCESS_KEY": "local-secret",
        "AWS_SESSION_TOKEN": "local-token",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:%d" % endpoint.getsockname()[1],
        "STACKFLOW_TABLE": "stackflow-events",
        "STACKFLOW_BUCKET": "stackflow-engine",
    }

    results = {
        "bootstrap": args.bootstrap,
        "handler": args.handler,
        "init_ms": [],
        "endpoint_connections_during_init": [],
    }
    for run in range(args.runs):
        with STATE.lock:
            STATE.first_next.clear()
            STATE.first_next_at = None
            STATE.answered.clear()
            STATE.answer = None
            STATE.endpoint_connections = 0
            if run == 0 and args.event:
                with open(args.event, "rb") as f:
                    STATE.pending_event = f.read()
        cmd = [args.bootstrap]
        if run == 0 and args.strace:
            cmd = ["strace", "-f", "-e", "trace=connect", "-o", args.strace] + cmd
        log = open(os.path.join(home, "run-%d.log" % run), "wb")
        started = time.monotonic()
        child = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            # Wait for the first GET /next, or for the bootstrap to exit (an init error).
            deadline = started + args.timeout
            while not STATE.first_next.wait(0.01):
                if child.poll() is not None or time.monotonic() > deadline:
                    break
            if not STATE.first_next.is_set():
                code = child.poll()
                log.flush()
                with open(log.name, "rb") as f:
                    output = f.read().decode(errors="replace")
                results["error"] = "no GET /next (exit %s, %ss limit): %s" % (code, args.timeout, output[-2000:])
                break
            results["init_ms"].append(round((STATE.first_next_at - started) * 1000, 2))
            results["endpoint_connections_during_init"].append(STATE.endpoint_connections_before_next)
            if run == 0 and args.event:
                if STATE.answered.wait(args.timeout * 3):
                    results["invocation"] = STATE.answer
                else:
                    results["invocation"] = "no answer within %ss" % (args.timeout * 3)
        finally:
            child.terminate()
            try:
                child.wait(5)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
            log.close()
        if run == 0:
            with open(log.name, "rb") as f:
                results["first_run_log"] = f.read().decode(errors="replace").splitlines()[:20]
    if results["init_ms"]:
        results["init_ms_median"] = statistics.median(results["init_ms"])
    server.shutdown()
    endpoint.close()
    json.dump(results, sys.stdout, indent=2)
    print()
    return 0 if "error" not in results else 1


if __name__ == "__main__":
    sys.exit(main())
