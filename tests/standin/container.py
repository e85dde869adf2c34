#!/usr/bin/env python3
"""A stand-in for the container engine CLI that fakecloud runs Lambda code through.

Test support only: no crate depends on it. The emulator harness
(`tests/src/emulator.rs`) starts fakecloud with `FAKECLOUD_CONTAINER_CLI` pointing here,
so that `Invoke` (and Step Functions' Lambda tasks, and custom resource handlers) run
the function's code on this machine, where no container engine runs.

What fakecloud 0.51.0 calls (`fakecloud-lambda` `runtime/docker.rs`,
`fakecloud-core` `container_net.rs`), and what this answers:

- `--version`: a line that names podman, so fakecloud takes the podman path (the host
  alias `host.containers.internal`, no `--add-host`, no `network inspect`).
- `info [...]`: the liveness probe; succeeds.
- `create -p :8080 --label K=V... -e K=V|-e K... --tmpfs T IMAGE HANDLER`: makes a
  "container": a directory under `$STACKFLOW_STANDIN_DIR` (default
  `/tmp/stackflow-standin-<uid>`) holding the image, handler and environment
  (`-e K` alone takes the value from this process's environment, as docker does: the
  credentials come that way); prints its id.
- `cp SRC/. ID:/path`: copies the extracted code into the container's tree
  (`ID/fs/var/task`, `ID/fs/var/runtime`, `ID/fs/opt`), modes kept.
- `start ID`: starts the container's server, a detached `container.py __serve ID`
  listening on a loopback port of its own: it is both the invoke endpoint fakecloud
  posts to (`POST /2015-03-31/functions/function/invocations`, the Runtime Interface
  Emulator's) and the Lambda Runtime API the function polls
  (`/2018-06-01/runtime/...`, `AWS_LAMBDA_RUNTIME_API`).
- `port ID 8080`: `127.0.0.1:<that port>`.
- `logs --tail N ID`: the last N lines of what the function wrote (stdout and stderr)
  and the START/END/REPORT lines (fakecloud keeps the last 4 KiB for `LogType=Tail`).
- `rm -f ID`: stops the server and the function, removes the directory; its
  `config.json` and its log's START/END/REPORT lines are kept in `removed/ID/` (fakecloud
  removes an instance idle for 5 minutes, and a long run's count of REPORT lines must not
  lose it); what the function wrote is not kept.
- anything else (`ps`, `network`, `volume`, `pull`, `tag`, `run`...): exit 1.

How the function runs (a local process, started at the first invocation, as the RIE
does, and again after it exited):

- `provided.al2023` / `provided.al2`: `bootstrap` from `/var/runtime` (else
  `/var/task`): a binary built for this host runs as it is, one built for arm64 under
  `qemu-aarch64` (Debian's `qemu-user`, with `libc6-arm64-cross`'s C library), whatever
  the function's `Architectures` says.
- `nodejs*`: `runtime.js` beside this file under the installed `node` (whatever its
  version: the runtime's version is not honoured). `NODE_PATH` has the function's
  layers (`/opt/nodejs/node_modules`), the AWS SDK for JavaScript v3 that
  `.ci/install-lambda-sdk` installs (`$STACKFLOW_LAMBDA_NODE_MODULES`, else
  `$STACKFLOW_TOOLS` or `~/.cache/stackflow-tools`, `lambda-node-sdk/node_modules`),
  then the code. CommonJS handlers, and `.mjs` ones through `import()`.
- `python3.*`: `runtime.py` beside this file under the installed `python3`; only the
  standard library (no boto3) besides the function's own code and layers.
- the environment is the function's (fakecloud's reserved variables included) with the
  emulator's host alias (`host.containers.internal`, `host.docker.internal`) rewritten
  to `127.0.0.1`, plus `PATH`, `AWS_LAMBDA_RUNTIME_API`, `LAMBDA_TASK_ROOT`, `_HANDLER`;
  nothing else of this machine's environment.

Faults a test injects (`serve.py`'s `take_fault` says each one): the lines of
`$STACKFLOW_STANDIN_DIR/faults/<function name>`, one taken by each invocation of that
function, in order: `refuse <Error>` (Lambda refused the call: the function does not run),
`lose <Error>` (the function ran; its answer is replaced by the error), `crash` (the
process is killed once the function answered: `Runtime.ExitError`), `init` (the process
is started again with no AWS endpoint reachable, so its init fails). What was taken is
appended to `<function name>.taken`.

Limits (what real Lambda does that this does not):

- no isolation: the code runs as this user, on this machine's file system; `/tmp` is
  the machine's `/tmp`; memory size, ephemeral storage, architecture and VPC settings
  are ignored (the bootstrap's ELF machine chooses qemu, not the setting); `PackageType=Image` functions are not supported (`pull` fails).
- one invocation at a time per container (as Lambda; fakecloud starts more containers
  for concurrent calls); the function's timeout (`AWS_LAMBDA_FUNCTION_TIMEOUT`) kills the
  process and answers `Sandbox.Timedout`; a process that exits mid-invocation answers
  `Runtime.ExitError` with its exit status. Init and invoke phases are not told apart
  beyond `/runtime/init/error`.
- Node: the handler runs under whatever `node` is installed (20 on the test machines)
  whatever `nodejs*` runtime the function names; only the SDK clients that
  `.ci/install-lambda-sdk` installs exist (S3, Lambda, Step Functions, SSM and the
  credential providers: what CDK's handlers in the corpus require); `https.request`
  calls to the emulator's host (which CDK's handlers make to the custom resource
  `ResponseURL`, port 443 and TLS implied) are sent as plain HTTP to the emulator's port;
  the context has the usual fields but `callbackWaitsForEmptyEventLoop` is not honoured
  (the answer is sent when the handler's promise or callback settles); no streaming.
- Python: standard library only (no boto3); no `awslambdaric` extras.
- logs are plain lines (no timestamp/request-id prefixes); no CloudWatch Logs. The REPORT
  line of an invocation that started the process has `Init Duration` (from the start to
  its first request for an event), as Lambda's cold starts do.
- a container's server stops by itself when the fakecloud that made it is gone
  (the `fakecloud-instance=fakecloud-<pid>` label) or its directory was removed.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
VERSION_LINE = "stackflow container stand-in 1 (a podman-compatible subset; local processes, no containers)"


def state_dir():
    return os.environ.get("STACKFLOW_STANDIN_DIR") or f"/tmp/stackflow-standin-{os.getuid()}"


def container_dir(cid):
    if not cid or "/" in cid or cid.startswith("."):
        fail(f"no such container: {cid!r}")
    return os.path.join(state_dir(), cid)


def fail(message, code=1):
    print(f"stand-in: {message}", file=sys.stderr)
    sys.exit(code)


def parse_create(args):
    """The configuration of `create ARGS`: image, command, environment, labels."""
    env, labels = {}, {}
    i = 0
    with_value = {"-p", "--publish", "--label", "-e", "--env", "--add-host", "--tmpfs", "--name",
                  "--network", "--memory", "--cpus", "--platform", "--entrypoint", "-v", "--volume"}
    while i < len(args) and args[i].startswith("-"):
        flag = args[i]
        if "=" in flag and flag.startswith("--"):
            flag, value = flag.split("=", 1)
            i += 1
        elif flag in with_value:
            if i + 1 >= len(args):
                fail(f"create: {flag} needs a value")
            value = args[i + 1]
            i += 2
        else:
            i += 1
            continue
        if flag in ("-e", "--env"):
            if "=" in value:
                key, val = value.split("=", 1)
                env[key] = val
            elif value in os.environ:
                env[value] = os.environ[value]
        elif flag == "--label":
            key, _, val = value.partition("=")
            labels[key] = val
    if i >= len(args):
        fail("create: no image")
    return {"image": args[i], "command": args[i + 1:], "env": env, "labels": labels}


def cmd_create(args):
    config = parse_create(args)
    cid = "standin" + uuid.uuid4().hex[:20]
    root = container_dir(cid)
    os.makedirs(state_dir(), mode=0o700, exist_ok=True)
    os.makedirs(os.path.join(root, "fs"), mode=0o700)
    with open(os.path.join(root, "config.json"), "w") as f:
        json.dump(config, f)
    print(cid)


def cmd_cp(args):
    if len(args) != 2 or ":" not in args[1]:
        fail("cp: only `cp SRC ID:/path` is supported")
    src = args[0]
    cid, dest = args[1].split(":", 1)
    root = container_dir(cid)
    if not os.path.isdir(root):
        fail(f"no such container: {cid}")
    target = os.path.join(root, "fs", dest.lstrip("/"))
    if src.endswith("/.") or os.path.isdir(src):
        shutil.copytree(src.rstrip(".").rstrip("/") or "/", target, dirs_exist_ok=True, symlinks=True,
                        copy_function=link_or_copy)
    else:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        link_or_copy(src, target)


def link_or_copy(src, dst):
    """A hard link where the file system allows it (fakecloud copies a function's code
    into every instance, twice for `provided` runtimes: a link costs no space), else a
    copy. The code is never written to, so sharing it is safe."""
    try:
        if os.path.exists(dst):
            os.unlink(dst)
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)
    return dst


def read_port(root, wait):
    deadline = time.monotonic() + wait
    path = os.path.join(root, "port")
    while True:
        try:
            with open(path) as f:
                text = f.read().strip()
            if text:
                return int(text)
        except (FileNotFoundError, ValueError):
            pass
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)


def cmd_start(args):
    ids = [a for a in args if not a.startswith("-")]
    if not ids:
        fail("start: no container")
    for cid in ids:
        root = container_dir(cid)
        if not os.path.isdir(root):
            fail(f"no such container: {cid}")
        log = open(os.path.join(root, "log"), "ab")
        server = os.path.join(HERE, "serve.py")
        proc = subprocess.Popen(
            [sys.executable, server, root],
            stdin=subprocess.DEVNULL, stdout=log, stderr=log,
            start_new_session=True, close_fds=True,
        )
        log.close()
        if read_port(root, 10) is None:
            proc.kill()
            fail(f"start: the server of {cid} did not listen within 10 s:\n{tail(root, 20)}")
        print(cid)


def cmd_port(args):
    ids = [a for a in args if not a.startswith("-")]
    if not ids:
        fail("port: no container")
    port = read_port(container_dir(ids[0]), 5)
    if port is None:
        fail(f"port: {ids[0]} is not running")
    print(f"127.0.0.1:{port}")


def tail(root, lines):
    try:
        with open(os.path.join(root, "log"), "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return ""
    return b"\n".join(data.splitlines()[-lines:]).decode("utf-8", "replace")


def cmd_logs(args):
    lines, ids, i = 100000, [], 0
    while i < len(args):
        if args[i] in ("--tail", "-n") and i + 1 < len(args):
            lines = int(args[i + 1]) if args[i + 1].isdigit() else lines
            i += 2
            continue
        if not args[i].startswith("-"):
            ids.append(args[i])
        i += 1
    if not ids:
        fail("logs: no container")
    text = tail(container_dir(ids[0]), lines)
    if text:
        print(text)


def cmd_rm(args):
    for cid in [a for a in args if not a.startswith("-")]:
        root = container_dir(cid)
        try:
            with open(os.path.join(root, "pid")) as f:
                pid = int(f.read().strip())
            # The server's own session: it and the function it started.
            os.killpg(pid, signal.SIGKILL)
        except (FileNotFoundError, ValueError, ProcessLookupError, PermissionError):
            pass
        keep_log(cid, root)
        shutil.rmtree(root, ignore_errors=True)


def keep_log(cid, root):
    """Keeps a removed container's `config.json` and the platform's lines of its log
    (START, END, REPORT) in `removed/<id>/`, so that a count of invocations outlives
    fakecloud's idle reaper, which removes a warm instance after 5 idle minutes, in the
    middle of a long deploy. What the function itself wrote is not kept: it is the
    function's (a test's handler may print a value on purpose)."""
    kept = os.path.join(state_dir(), "removed", cid)
    platform = (b"START RequestId: ", b"END RequestId: ", b"REPORT RequestId: ")
    try:
        with open(os.path.join(root, "log"), "rb") as f:
            lines = [line for line in f.read().splitlines(True) if line.startswith(platform)]
        os.makedirs(kept, mode=0o700, exist_ok=True)
        os.replace(os.path.join(root, "config.json"), os.path.join(kept, "config.json"))
        with open(os.path.join(kept, "log"), "wb") as f:
            f.writelines(lines)
    except OSError:
        pass


def main(argv):
    if not argv:
        fail("no command")
    command, args = argv[0], argv[1:]
    if command in ("--version", "version"):
        print(VERSION_LINE)
    elif command == "info":
        print(json.dumps({"standin": VERSION_LINE}))
    elif command == "create":
        cmd_create(args)
    elif command == "cp":
        cmd_cp(args)
    elif command == "start":
        cmd_start(args)
    elif command == "port":
        cmd_port(args)
    elif command == "logs":
        cmd_logs(args)
    elif command == "rm":
        cmd_rm(args)
    else:
        fail(f"{command}: not supported by the container stand-in (Lambda zip functions only)")


if __name__ == "__main__":
    main(sys.argv[1:])
