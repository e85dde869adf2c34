"""A minimal Lambda runtime loop for Python handlers, run by the container stand-in
(container.py; its limits are listed there). Test support only.

It imports the handler `_HANDLER` names (`module.function`, `a/b.function` for a module
in a folder), then forever takes the next event from the Runtime API
(AWS_LAMBDA_RUNTIME_API), calls `handler(event, context)` and posts its result or error.
"""

import http.client
import importlib
import json
import os
import sys
import time
import traceback

HOST, PORT = os.environ["AWS_LAMBDA_RUNTIME_API"].split(":")
CONN = http.client.HTTPConnection(HOST, int(PORT))


def api(method, route, body=None, headers=None):
    global CONN
    for attempt in (0, 1):
        try:
            CONN.request(method, "/2018-06-01/runtime" + route, body=body, headers=headers or {})
            response = CONN.getresponse()
            return response.headers, response.read()
        except (http.client.HTTPException, OSError):
            if attempt:
                raise
            CONN = http.client.HTTPConnection(HOST, int(PORT))


def error_body(exc, error_type=None):
    return json.dumps({
        "errorType": error_type or type(exc).__name__,
        "errorMessage": str(exc),
        "stackTrace": traceback.format_tb(exc.__traceback__),
    }).encode()


class Context:
    def __init__(self, request_id, arn, deadline_ms):
        self.aws_request_id = request_id
        self.invoked_function_arn = arn
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION")
        self.memory_limit_in_mb = os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME")
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self):
        return max(0, self._deadline_ms - int(time.time() * 1000))


def load_handler():
    spec = os.environ.get("_HANDLER", "")
    module_name, _, function_name = spec.rpartition(".")
    if not module_name:
        raise ValueError(f"Bad handler {spec!r}")
    sys.path.insert(0, os.environ["LAMBDA_TASK_ROOT"])
    module = importlib.import_module(module_name.replace("/", "."))
    handler = getattr(module, function_name, None)
    if not callable(handler):
        raise AttributeError(f"Handler {function_name!r} missing on module {module_name!r}")
    return handler


def main():
    try:
        handler = load_handler()
    except Exception as exc:  # noqa: BLE001 - every init failure is reported
        traceback.print_exc()
        api("POST", "/init/error", error_body(exc, "Runtime.ImportModuleError"),
            {"Lambda-Runtime-Function-Error-Type": "Runtime.ImportModuleError"})
        sys.exit(1)
    while True:
        headers, body = api("GET", "/invocation/next")
        request_id = headers["Lambda-Runtime-Aws-Request-Id"]
        context = Context(request_id, headers.get("Lambda-Runtime-Invoked-Function-Arn"),
                          int(headers.get("Lambda-Runtime-Deadline-Ms", "0")))
        try:
            result = handler(json.loads(body or b"null"), context)
            api("POST", f"/invocation/{request_id}/response", json.dumps(result).encode())
        except Exception as exc:  # noqa: BLE001 - the handler's error is the answer
            traceback.print_exc()
            api("POST", f"/invocation/{request_id}/error", error_body(exc),
                {"Lambda-Runtime-Function-Error-Type": "Runtime.UnhandledError"})
        sys.stdout.flush()


if __name__ == "__main__":
    main()
