"""A family's methods as data: the committed copy of what its service's Describe answers.

Planning a sweep needs every method's version, default configuration and search space, and
asking the services means starting every family (minutes, weights on disk, a GPU's memory).
So each family folder holds ``description.json``: the ``MethodInfo`` messages its Describe
returns, in protobuf's JSON mapping (typed values: an int stays an int, a float a float), minus
``library_versions``, which describe the environment a service runs in, not the method.

It is generated, never written by hand: ``python -m methods.describe`` (``make describe``)
imports each family and writes what ``methods.sdk.service.describe_method`` (Describe's own
code) returns. A test fails when a committed description and the live Describe disagree, and a
sweep refuses a service whose Describe differs from the description its plan used (the trial
keys would then name configurations the service does not run). A family without the file (a
contributor's new method before ``make describe``) is described by its running service instead.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format

from contract.families import ROOT, Family
from contract.space import (
    ChoiceParam,
    Config,
    FloatParam,
    IntParam,
    Param,
    config_from_proto,
    config_to_proto,
    param_from_proto,
    param_to_proto,
)
from contract.v1 import method_service_pb2 as pb

DESCRIPTION_FILE = "description.json"
GENERATOR = "python -m methods.describe"
#: A method's kind as the wire names it: the one mapping Describe's encoder (``method_info``) and every reader use.
KINDS = {"supervised": pb.METHOD_KIND_SUPERVISED, "gfm": pb.METHOD_KIND_GFM}
KIND_NAMES = {value: name for name, value in KINDS.items()}


class DescriptionError(ValueError):
    """A description file that cannot be read, or one that disagrees with its family."""


@dataclass(frozen=True)
class MethodSpec:
    """A method as its service describes it, or its committed description says: the orchestrator samples from it."""

    name: str
    version: str
    family: str
    kind: str
    default_config: Config
    search_space: tuple[Param, ...]
    max_classes: int = 0
    library_versions: dict[str, str] = field(default_factory=dict)


def method_info(
    name: str,
    version: str,
    family: str,
    kind: str,
    default_config: Config,
    search_space: tuple[Param, ...],
    capabilities: pb.Capabilities,
    library_versions: dict[str, str] | None = None,
    description: str = "",
) -> pb.MethodInfo:
    """A method's ``MethodInfo``, as Describe sends it and a description file holds it: the one encoder, which
    ``spec_from_proto`` reads back (a kind other than ``KINDS``' is read as supervised)."""
    return pb.MethodInfo(
        name=name,
        version=version,
        family=family,
        kind=KINDS.get(kind, pb.METHOD_KIND_SUPERVISED),
        capabilities=capabilities,
        default_config=config_to_proto(default_config),
        search_space=[param_to_proto(p) for p in search_space],
        library_versions=library_versions or {},
        description=description,
    )


def spec_from_proto(info: pb.MethodInfo) -> MethodSpec:
    return MethodSpec(
        name=info.name,
        version=info.version,
        family=info.family,
        kind=KIND_NAMES.get(info.kind, "supervised"),
        default_config=config_from_proto(info.default_config),
        search_space=tuple(param_from_proto(p) for p in info.search_space),
        max_classes=info.capabilities.max_classes,
        library_versions=dict(info.library_versions),
    )


def spec_to_dict(spec: MethodSpec) -> dict[str, Any]:
    """What of a method decides its trials (name, version, family, kind, default configuration, search space), as
    a description file writes it; ``spec_from_dict`` reads it back with the same planning identity."""
    info = method_info(
        spec.name,
        spec.version,
        spec.family,
        spec.kind,
        spec.default_config,
        spec.search_space,
        pb.Capabilities(max_classes=spec.max_classes),
    )
    return info_to_dict(info)


def spec_from_dict(entry: Any) -> MethodSpec:
    """A method from ``spec_to_dict``'s form (a description file's entry); DescriptionError when it is not one."""
    try:
        return spec_from_proto(json_format.ParseDict(entry, pb.MethodInfo()))
    except (ValueError, TypeError, AttributeError, json_format.ParseError) as exc:
        raise DescriptionError(f"not a method description ({str(exc)[:200]})") from None


def info_to_dict(info: pb.MethodInfo) -> dict[str, Any]:
    """One method's entry of a description file: its MethodInfo as JSON, without the environment's library versions."""
    kept = pb.MethodInfo()
    kept.CopyFrom(info)
    kept.ClearField("library_versions")
    return json_format.MessageToDict(kept, preserving_proto_field_name=True)


def description_text(family: str, infos: list[pb.MethodInfo]) -> str:
    """The file ``GENERATOR`` writes for a family: stable bytes for the same methods (sorted keys, one layout)."""
    document = {
        "family": family,
        "generated_by": f"{GENERATOR} {family}",
        "methods": [info_to_dict(info) for info in infos],
    }
    return json.dumps(document, indent=1, sort_keys=True) + "\n"


def description_path(family: str, root: Path = ROOT) -> Path:
    return root / family / DESCRIPTION_FILE


def read_description(family: Family, root: Path = ROOT) -> dict[str, MethodSpec] | None:
    """The family's methods by name, as its committed description says; None when it has no description yet.

    DescriptionError (one line) when the file is not a description of exactly the methods the family declares.
    """
    path = description_path(family.name, root)
    if not path.exists():
        return None
    try:
        document = json.loads(path.read_text())
        infos = [json_format.ParseDict(entry, pb.MethodInfo()) for entry in document["methods"]]
        specs = {info.name: spec_from_proto(info) for info in infos}
    except (OSError, ValueError, KeyError, TypeError, json_format.ParseError) as exc:
        raise DescriptionError(f"{path} is not a method description ({exc}); regenerate it: `{GENERATOR}`") from None
    if document.get("family") != family.name or tuple(specs) != family.methods:
        raise DescriptionError(
            f"{path} describes {', '.join(specs) or 'nothing'} but family {family.name} declares "
            f"{', '.join(family.methods)}; regenerate it with `{GENERATOR} {family.name}`"
        )
    return specs


def spec_differences(described: MethodSpec, live: MethodSpec) -> list[str]:
    """What a live Describe says differently from a description (library versions aside): empty when they agree.

    Types count (a default of 1 is not 1.0: the configuration hash, and so the trial key, tells them apart).
    """
    fields = ("name", "version", "family", "kind", "max_classes")
    differences = [f for f in fields if getattr(described, f) != getattr(live, f)]
    if _typed(described.default_config) != _typed(live.default_config):
        differences.append("default_config")
    if [_param(p) for p in described.search_space] != [_param(p) for p in live.search_space]:
        differences.append("search_space")
    return differences


def planning_identity(spec: MethodSpec) -> list[Any]:
    """What of a method decides its trials and their keys, in the canonical form ``spec_differences`` compares:
    its version, its default configuration and its search space, with their values' types."""
    return [spec.version, _typed(spec.default_config), [_param(p) for p in spec.search_space]]


def _typed(config: Config) -> str:
    return json.dumps({k: [type(v).__name__, v] for k, v in config.items()}, sort_keys=True)


def _param(param: Param) -> tuple:
    if isinstance(param, ChoiceParam):
        return ("choice", param.name, tuple((type(v).__name__, v) for v in param.values))
    kind = "float" if isinstance(param, FloatParam) else "int" if isinstance(param, IntParam) else "?"
    return (kind, param.name, param.low, param.high, param.log)
