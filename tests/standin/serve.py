"""One "container" of the container stand-in (see container.py): the invoke endpoint and
the Lambda Runtime API of one function instance, on one loopback port, and the function's
process. Started detached by `container.py start`; argument: the container's directory.
"""

import fcntl
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
RUNTIME = "/2018-06-01/runtime"
INVOKE = "/2015-03-31/functions/function/invocations"
HOST_ALIASES = ("host.containers.internal", "host.docker.internal")
ACCOUNT = os.environ.get("STACKFLOW_STANDIN_ACCOUNT", "123456789012")


def log(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def node_modules_dir():
    if os.environ.get("STACKFLOW_LAMBDA_NODE_MODULES"):
        return os.environ["STACKFLOW_LAMBDA_NODE_MODULES"]
    tools = os.environ.get("STACKFLOW_TOOLS") or os.path.expanduser("~/.cache/stackflow-tools")
    return os.path.join(tools, "lambda-node-sdk", "node_modules")


class Function:
    """The function's process and the one invocation in flight."""

    def __init__(self, root, config, port):
        self.root = root
        self.fs = os.path.join(root, "fs")
        self.config = config
        self.port = port
        self.cond = threading.Condition()
        self.proc = None
        self.exit_status = None
        self.pending = None  # (request id, event bytes, deadline ms) not yet taken
        self.current = None  # request id of the invocation in flight
        self.answer = None  # (kind, body bytes)
        self.invoke_lock = threading.Lock()
        self.spawned = None  # when the process was started, until it first asked for an event
        self.init_ms = None  # how long that took, for the REPORT line of the invocation

    def env(self):
        env = {}
        for key, value in self.config["env"].items():
            for alias in HOST_ALIASES:
                value = value.replace(alias, "127.0.0.1")
            env[key] = value
        handler = self.config["command"][0] if self.config["command"] else ""
        env.update({
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LANG": "C.UTF-8",
            "HOME": os.path.join(self.fs, "tmp"),
            "AWS_LAMBDA_RUNTIME_API": f"127.0.0.1:{self.port}",
            "LAMBDA_TASK_ROOT": os.path.join(self.fs, "var/task"),
            "LAMBDA_RUNTIME_DIR": os.path.join(self.fs, "var/runtime"),
            "_HANDLER": handler,
        })
        return env

    def command(self, env):
        image = self.config["image"]
        kind = image.rsplit("/", 1)[-1]
        if kind.startswith("provided:"):
            for place in ("var/runtime/bootstrap", "var/task/bootstrap"):
                path = os.path.join(self.fs, place)
                if os.path.exists(path):
                    return emulated(path)
            raise RuntimeError("no bootstrap in /var/runtime or /var/task")
        if kind.startswith("nodejs:"):
            if not os.path.isdir(node_modules_dir()):
                log(f"stand-in: no AWS SDK for JavaScript at {node_modules_dir()} "
                    "(bash .ci/install-lambda-sdk installs it); handlers that require it fail")
            paths = [os.path.join(self.fs, "opt/nodejs/node_modules"), node_modules_dir(),
                     env["LAMBDA_TASK_ROOT"]]
            env["NODE_PATH"] = ":".join(paths)
            return ["node", os.path.join(HERE, "runtime.js")]
        if kind.startswith("python:"):
            env["PYTHONPATH"] = ":".join([env["LAMBDA_TASK_ROOT"], os.path.join(self.fs, "opt/python")])
            env["PYTHONUNBUFFERED"] = "1"
            return [sys.executable, os.path.join(HERE, "runtime.py")]
        raise RuntimeError(f"the image {image} is not run by the stand-in (provided, nodejs and python only)")

    def ensure_started(self, override=None):
        """Starts the function's process unless it runs (with `override` over its
        environment); an error message when it cannot."""
        if self.proc is not None and self.exit_status is None:
            return None
        env = self.env()
        env.update(override or {})
        os.makedirs(env["HOME"], exist_ok=True)
        try:
            argv = self.command(env)
            self.proc = subprocess.Popen(argv, env=env, cwd=env["LAMBDA_TASK_ROOT"],
                                         stdin=subprocess.DEVNULL, stdout=sys.stdout, stderr=sys.stdout)
        except (OSError, RuntimeError) as e:
            return str(e)
        self.exit_status = None
        self.spawned = time.monotonic()
        threading.Thread(target=self.watch, args=(self.proc,), daemon=True).start()
        return None

    def watch(self, proc):
        status = proc.wait()
        with self.cond:
            if proc is self.proc:
                self.exit_status = status
            self.cond.notify_all()

    def invoke(self, event):
        """One invocation: the body fakecloud gets back (an answer or an error envelope)."""
        with self.invoke_lock:
            request_id = str(uuid.uuid4())
            timeout = float(self.config["env"].get("AWS_LAMBDA_FUNCTION_TIMEOUT", "3") or 3)
            started = time.monotonic()
            fault = take_fault(self.root, self.config["env"].get("AWS_LAMBDA_FUNCTION_NAME", ""))
            log(f"START RequestId: {request_id} Version: $LATEST")
            with self.cond:
                if fault[:1] == ["init"]:
                    self.stop()
                why = self.ensure_started(UNREACHABLE if fault[:1] == ["init"] else None)
                if fault[:1] == ["refuse"]:
                    body = error_body(fault[1], "injected by the stand-in: the call did not "
                                      "reach the function")
                elif why is not None:
                    body = error_body("Runtime.InvalidEntrypoint", why)
                else:
                    deadline_ms = int(time.time() * 1000 + timeout * 1000)
                    self.pending = (request_id, event, deadline_ms)
                    self.current = request_id
                    self.answer = None
                    self.cond.notify_all()
                    body = self.wait_answer(request_id, started + timeout, timeout)
                    self.pending = None
                    self.current = None
                    if fault[:1] == ["crash"] and self.answer is not None:
                        self.stop()
                        body = error_body("Runtime.ExitError", f"RequestId: {request_id} Error: "
                                          "Runtime exited with error: signal: killed (injected "
                                          "by the stand-in after the function answered)")
                    elif fault[:1] == ["lose"]:
                        body = error_body(fault[1], "injected by the stand-in: the function "
                                          "ran, its answer was lost")
            spent = (time.monotonic() - started) * 1000
            log(f"END RequestId: {request_id}")
            with self.cond:
                init, self.init_ms = self.init_ms, None
            cold = f"\tInit Duration: {init:.2f} ms" if init is not None else ""
            log(f"REPORT RequestId: {request_id}\tDuration: {spent:.2f} ms{cold}")
            return body

    def wait_answer(self, request_id, deadline, timeout):
        while True:
            if self.answer is not None:
                return self.answer[1]
            if self.exit_status is not None:
                return error_body("Runtime.ExitError", f"RequestId: {request_id} Error: Runtime exited "
                                  f"with error: exit status {self.exit_status}")
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                return error_body("Sandbox.Timedout", f"RequestId: {request_id} Error: Task timed out "
                                  f"after {timeout:.2f} seconds")
            self.cond.wait(min(left, 0.5))

    def next_event(self):
        with self.cond:
            if self.spawned is not None:
                self.init_ms = (time.monotonic() - self.spawned) * 1000
                self.spawned = None
            while self.pending is None:
                self.cond.wait()
            event, self.pending = self.pending, None
            return event

    def settle(self, request_id, kind, body):
        with self.cond:
            if request_id is not None and request_id != self.current:
                return False
            if self.current is None:
                return False
            self.answer = (kind, body)
            self.cond.notify_all()
            return True

    def kill(self):
        if self.proc is not None and self.exit_status is None:
            self.proc.kill()

    def stop(self):
        """Kills the function's process and waits for its end (the lock held)."""
        if self.proc is not None and self.exit_status is None:
            self.proc.kill()
            self.exit_status = self.proc.wait()


# An init fault's environment: every AWS call the function makes at init is refused.
UNREACHABLE = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1"}
FAULTS = ("refuse", "lose", "crash", "init")


def take_fault(root, function_name):
    """The next fault a test injected into `function_name`'s invocations, as words (empty
    for none): the first line of `<stand-in dir>/faults/<function name>`, taken under a lock
    (the function's containers share the file) and appended to `<name>.taken`.

    - `refuse <Error>`: the function is not run; the answer is that error (a Lambda
      service error before the call reached the function: `Lambda.ServiceException`...);
    - `lose <Error>`: the function runs to its end; its answer is replaced by that error
      (`Lambda.Unknown`, `Lambda.ClientExecutionTimeoutException`: the work is done, the
      caller does not know it);
    - `crash`: the function runs and answers, then its process is killed before the
      answer is passed on (`Runtime.ExitError`);
    - `init`: the process is started again with every AWS endpoint unreachable, so its
      init fails and it exits (`Runtime.ExitError`); the next invocation starts it as usual.
    """
    if not function_name:
        return []
    path = os.path.join(os.path.dirname(root), "faults", function_name)
    if not os.path.exists(path):
        return []
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        with open(path) as f:
            lines = [line.strip() for line in f if line.strip()]
        if not lines:
            return []
        with open(path + ".tmp", "w") as f:
            f.write("".join(line + "\n" for line in lines[1:]))
        os.replace(path + ".tmp", path)
        with open(path + ".taken", "a") as f:
            f.write(lines[0] + "\n")
    words = lines[0].split()
    if words[0] not in FAULTS or (words[0] in ("refuse", "lose")) != (len(words) == 2):
        log(f"stand-in: unknown fault {lines[0]!r} (one of {FAULTS}), not injected")
        return []
    log(f"stand-in: injecting {lines[0]!r} into {function_name}")
    return words


AARCH64 = 183  # ELF e_machine


def emulated(path):
    """How to run the executable at `path`: as it is, or under qemu-aarch64 when it is
    built for arm64 and this machine is not (as binfmt_misc would), with the aarch64 C
    library of Debian's libc6-arm64-cross (`QEMU_LD_PREFIX` names another)."""
    with open(path, "rb") as f:
        header = f.read(20)
    if header[:4] != b"\x7fELF" or int.from_bytes(header[18:20], "little") != AARCH64:
        return [path]
    if os.uname().machine in ("aarch64", "arm64"):
        return [path]
    qemu = shutil.which("qemu-aarch64")
    if qemu is None:
        raise RuntimeError("the bootstrap is built for arm64 (aarch64), this machine is "
                           f"{os.uname().machine}, and qemu-aarch64 is not installed "
                           "(Debian's qemu-user) to run it")
    prefix = os.environ.get("QEMU_LD_PREFIX") or "/usr/aarch64-linux-gnu"
    return [qemu, "-L", prefix, path] if os.path.isdir(prefix) else [qemu, path]


def error_body(error_type, message):
    return json.dumps({"errorType": error_type, "errorMessage": message}).encode()


def as_error(body, header_type):
    """A function's posted error as the envelope fakecloud expects."""
    try:
        value = json.loads(body or b"{}")
    except ValueError:
        value = None
    if not isinstance(value, dict):
        value = {"errorMessage": (body or b"").decode("utf-8", "replace")}
    value.setdefault("errorType", header_type or "Unhandled")
    value.setdefault("errorMessage", "")
    return json.dumps(value).encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    function = None

    def log_message(self, *args):
        pass

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            return self.rfile.read(length)
        if "chunked" in (self.headers.get("Transfer-Encoding") or ""):
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return b""

    def reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == f"{RUNTIME}/invocation/next":
            request_id, event, deadline_ms = self.function.next_event()
            name = self.function.config["env"].get("AWS_LAMBDA_FUNCTION_NAME", "function")
            region = self.function.config["env"].get("AWS_REGION", "us-east-1")
            self.reply(200, event, {
                "Lambda-Runtime-Aws-Request-Id": request_id,
                "Lambda-Runtime-Deadline-Ms": str(deadline_ms),
                "Lambda-Runtime-Invoked-Function-Arn": f"arn:aws:lambda:{region}:{ACCOUNT}:function:{name}",
                "Lambda-Runtime-Trace-Id": f"Root=1-{uuid.uuid4().hex[:8]}-{uuid.uuid4().hex[:24]};Sampled=0",
            })
        else:
            self.reply(404, b'{"errorType":"NotFound"}')

    def do_POST(self):
        body = self.body()
        fn = self.function
        if self.path == INVOKE:
            self.reply(200, fn.invoke(body))
            return
        parts = self.path[len(RUNTIME):].strip("/").split("/")
        if self.path.startswith(RUNTIME) and parts[:1] == ["invocation"] and len(parts) == 3:
            if parts[2] == "response":
                ok = fn.settle(parts[1], "response", body)
            elif parts[2] == "error":
                kind = self.headers.get("Lambda-Runtime-Function-Error-Type")
                ok = fn.settle(parts[1], "error", as_error(body, kind))
            else:
                ok = False
            self.reply(202 if ok else 400, b'{"status":"OK"}' if ok else b'{"errorType":"InvalidRequestID"}')
        elif self.path == f"{RUNTIME}/init/error":
            kind = self.headers.get("Lambda-Runtime-Function-Error-Type") or "Runtime.InitError"
            fn.settle(None, "error", as_error(body, kind))
            self.reply(202, b'{"status":"OK"}')
        else:
            self.reply(404, b'{"errorType":"NotFound"}')


def owner_alive(config):
    owner = config["labels"].get("fakecloud-instance", "")
    pid = owner.rsplit("-", 1)[-1]
    return not pid.isdigit() or os.path.exists(f"/proc/{pid}")


def watchdog(root, config, function):
    """Ends the container when fakecloud is gone or `rm` removed its directory."""
    while True:
        time.sleep(0.5)
        if not os.path.isdir(root) or not owner_alive(config):
            function.kill()
            shutil.rmtree(root, ignore_errors=True)
            try:
                os.rmdir(os.path.dirname(root))  # the emulator's directory, once empty
            except OSError:
                pass
            os._exit(0)


def main():
    root = sys.argv[1]
    with open(os.path.join(root, "config.json")) as f:
        config = json.load(f)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    port = server.server_address[1]
    function = Function(root, config, port)
    Handler.function = function
    signal.signal(signal.SIGTERM, lambda *_: (function.kill(), os._exit(0)))
    threading.Thread(target=watchdog, args=(root, config, function), daemon=True).start()
    with open(os.path.join(root, "pid"), "w") as f:
        f.write(str(os.getpid()))
    with open(os.path.join(root, "port.tmp"), "w") as f:
        f.write(str(port))
    os.replace(os.path.join(root, "port.tmp"), os.path.join(root, "port"))
    server.serve_forever()


if __name__ == "__main__":
    main()
