"""The committed gRPC stubs must be exactly what `make proto` generates from the .proto files."""

import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GENERATED = ("method_service_pb2.py", "method_service_pb2.pyi", "method_service_pb2_grpc.py")


def test_committed_stubs_are_up_to_date(tmp_path):
    shutil.copytree(REPO / "proto", tmp_path / "proto", ignore=shutil.ignore_patterns("__pycache__"))
    protos = sorted(str(p.relative_to(tmp_path)) for p in (tmp_path / "proto").rglob("*.proto"))
    subprocess.run(  # the Makefile's `proto` rule
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            "-Icontract/v1=proto/nodeground/v1",
            "--python_out=.",
            "--pyi_out=.",
            "--grpc_python_out=.",
            *protos,
        ],
        cwd=tmp_path,
        check=True,
    )
    for name in GENERATED:
        fresh = (tmp_path / "contract/v1" / name).read_text()
        committed = (REPO / "contract/v1" / name).read_text()
        assert fresh == committed, f"contract/v1/{name} is stale: run `make proto` and commit the result"
