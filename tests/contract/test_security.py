"""Services beyond loopback: TLS and a shared token (contract.security), through real processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from contract.security import CA_ENV, CERT_ENV, ENV_NAMES, KEY_ENV, NAME_ENV, TOKEN_FILE_ENV, Security, SecurityError
from contract.v1 import method_service_pb2 as pb
from orchestrator.services.client import MethodClient, ServiceUnavailable
from tests.conftest import HANG_S, TINY_SWEEP

REPO = Path(__file__).resolve().parents[2]
TOKEN = "0123456789abcdef0123456789abcdef"


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> dict[str, Path]:
    """A self-signed certificate for the name ``nodeground`` (as `make swarm-up` makes one), a key and a token file."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    root = tmp_path_factory.mktemp("pki")
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
         "-subj", "/CN=nodeground", "-addext", "subjectAltName=DNS:nodeground,IP:127.0.0.1",
         "-keyout", str(root / "key.pem"), "-out", str(root / "cert.pem")],
        check=True, capture_output=True,
    )  # fmt: skip
    (root / "token").write_text(TOKEN + "\n")
    (root / "wrong").write_text("not-the-token")
    return {"cert": root / "cert.pem", "key": root / "key.pem", "token": root / "token", "wrong": root / "wrong"}


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ENV_NAMES}
    return {**env, "NODEGROUND_THREADS": "1", **extra}


def _serve(env: dict[str, str], host: str = "127.0.0.1") -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "methods.serve", "--family", "gnn", "--host", host, "--port", "0"],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    line = process.stdout.readline().split()
    assert line and line[0] == "NODEGROUND_LISTENING", process.stderr.read()
    return process, f"127.0.0.1:{line[1]}"


@pytest.fixture(scope="module")
def secured(pki):
    """A gnn service serving TLS and requiring the token, as a Swarm task does."""
    process, endpoint = _serve(
        _clean_env(**{CERT_ENV: str(pki["cert"]), KEY_ENV: str(pki["key"]), TOKEN_FILE_ENV: str(pki["token"])})
    )
    yield endpoint
    process.terminate()
    process.wait(HANG_S)


def test_settings_that_cannot_work_are_one_line_errors(pki, tmp_path):
    cases = [
        ({CERT_ENV: str(pki["cert"])}, "go together"),
        ({TOKEN_FILE_ENV: str(pki["token"])}, "needs TLS"),
        ({CA_ENV: str(pki["cert"]), TOKEN_FILE_ENV: str(pki["cert"])}, "one line of printable ASCII"),
        ({CA_ENV: str(tmp_path / "absent.pem")}, "absent.pem: No such file or directory"),
    ]
    for env, message in cases:
        with pytest.raises(SecurityError, match=message) as err:
            Security.from_env(env)
        assert "\n" not in str(err.value)
    assert Security.from_env({}) == Security()  # nothing set: plaintext, no token


def test_a_token_file_that_is_no_regular_file_is_refused_at_once(tmp_path):
    """Finding 12: a FIFO as the token file hung every client and service; /dev/zero took the machine's memory."""
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    for path, kind in ((fifo, "a FIFO"), ("/dev/zero", "a character device"), ("/dev/urandom", "a character device")):
        with pytest.raises(SecurityError, match=f"^{TOKEN_FILE_ENV} {path} is {kind}, not a regular file$"):
            Security.from_env({TOKEN_FILE_ENV: str(path)})
    huge = tmp_path / "huge"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)
    with pytest.raises(SecurityError, match="holds 1.0 GiB, more than the 64.0 KiB it may hold"):
        Security.from_env({TOKEN_FILE_ENV: str(huge)})


def test_a_token_fifo_stops_the_service_and_the_orchestrator_in_one_line(tmp_path):
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    env = _clean_env(**{TOKEN_FILE_ENV: str(fifo)})
    for command in (
        [sys.executable, "-m", "methods.serve", "--family", "gnn", "--port", "0"],
        [sys.executable, "-m", "orchestrator", "run", *TINY_SWEEP, "--endpoint", "gnn=127.0.0.1:9", "--store",
         str(tmp_path / "r.sqlite")],
    ):  # fmt: skip
        done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_S)
        assert done.returncode == 2, done.stderr
        assert done.stderr.strip().splitlines()[-1] == f"error: {TOKEN_FILE_ENV} {fifo} is a FIFO, not a regular file"


def test_a_secured_service_answers_only_tls_clients_with_its_token(secured, pki):
    ca = pki["cert"].read_bytes()
    plain = MethodClient(secured, Security())
    with pytest.raises(ServiceUnavailable, match=f"if it serves TLS, set {CA_ENV}"):
        plain.wait_healthy(3)
    plain.close()
    no_token = MethodClient(secured, Security(ca=ca, server_name="nodeground"))
    no_token.wait_healthy(HANG_S)  # health needs TLS, not the token (probes carry none)
    with pytest.raises(ServiceUnavailable, match="UNAUTHENTICATED: this service requires its token"):
        no_token.describe()
    with pytest.raises(grpc.RpcError) as refused:  # a client-streaming call is refused too
        no_token._stub.UploadGraph(iter([pb.GraphChunk(data=b"x")]), timeout=HANG_S)
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    no_token.close()
    wrong = MethodClient(secured, Security(ca=ca, server_name="nodeground", token="not-the-token"))
    with pytest.raises(ServiceUnavailable, match="UNAUTHENTICATED"):
        wrong.describe()
    wrong.close()
    right = MethodClient(secured, Security(ca=ca, server_name="nodeground", token=TOKEN))
    assert "mlp" in {spec.name for spec in right.describe()}
    right.close()


def test_a_sweep_reaches_a_secured_service_with_the_environment_and_embedded_ones_stay_plaintext(
    secured, pki, tmp_path
):
    client_env = _clean_env(**{CA_ENV: str(pki["cert"]), NAME_ENV: "nodeground", TOKEN_FILE_ENV: str(pki["token"])})
    base = [
        sys.executable,
        "-m",
        "orchestrator",
        "run",
        *TINY_SWEEP,
        "--budget",
        "1",
        "--splits",
        "0",
        "--regimes",
        "10/10/80",
    ]
    remote = subprocess.run([*base, "--endpoint", f"gnn={secured}", "--store", str(tmp_path / "remote.sqlite")],
                            cwd=REPO, env=client_env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert remote.returncode == 0, remote.stderr[-2000:]
    # the same settings do not leak into the loopback children the orchestrator starts itself
    embedded = subprocess.run([*base, "--services", "embedded", "--store", str(tmp_path / "embedded.sqlite")],
                              cwd=REPO, env=client_env, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert embedded.returncode == 0, embedded.stderr[-2000:]
    wrong = subprocess.run([*base, "--endpoint", f"gnn={secured}", "--store", str(tmp_path / "wrong.sqlite")],
                           cwd=REPO, env={**client_env, TOKEN_FILE_ENV: str(pki["wrong"])}, capture_output=True,
                           text=True, timeout=300)  # fmt: skip
    assert wrong.returncode == 2 and "Traceback" not in wrong.stderr
    assert [line for line in wrong.stderr.splitlines() if line.startswith("error:")] == [
        f"error: the service at {secured} refused Describe: UNAUTHENTICATED: this service requires its token "
        "(NODEGROUND_TOKEN_FILE on the client)"
    ]


def test_a_service_on_a_shared_address_without_tls_says_so(tmp_path):
    process, _ = _serve(_clean_env(), host="0.0.0.0")
    try:
        process.terminate()
        _, err = process.communicate(timeout=HANG_S)
    finally:
        process.kill()
    assert "serving plaintext without a token on 0.0.0.0" in err
