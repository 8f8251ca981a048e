"""The host facts are one set: what a record carries is what a bundle records, and what the estimate reads back."""

from __future__ import annotations

import json

from orchestrator.host import hardware, hardware_of, host_facts, host_json

RECORDED = {"hostname", "platform", "cpu_count", "python", "torch", "orchestrator"}


def test_a_record_carries_the_host_facts_and_its_services_device():
    facts = host_facts()
    assert set(facts) == RECORDED
    assert json.loads(host_json(facts)) == facts
    device = {"device": "cuda:0", "device_name": "NVIDIA H200"}
    assert json.loads(host_json(facts, device)) == {**facts, **device}
    assert list(json.loads(host_json(facts, device))) == sorted(RECORDED | set(device))  # stable, sorted keys


def test_a_bundle_records_the_same_facts_and_more():
    facts, bundle = host_facts(), hardware()
    assert {k: bundle[k] for k in RECORDED} == facts
    assert {"machine", "gpus"} <= set(bundle) - RECORDED


def test_the_estimate_reads_the_hardware_back_from_a_record():
    facts = host_facts()
    assert hardware_of(host_json(facts)) == "cpu"
    assert hardware_of(host_json(facts, {"device": "cuda:0", "device_name": "NVIDIA H200"})) == "NVIDIA H200"
    assert hardware_of(host_json(facts, {"device": "cuda:1"})) == "cuda:1"
    assert hardware_of(None) == hardware_of("not json") == "cpu"


def test_a_cpu_records_hardware_line_names_its_model_threads_and_kernels():
    """Records of one line share a price; a line without kernels is a record written before services named them."""
    facts = host_facts()
    service = {"device": "cpu", "cpu_model": "AMD EPYC", "compute_threads": 1}
    assert hardware_of(host_json(facts, {**service, "kernels": "native"})) == "AMD EPYC, 1 thread, native kernels"
    assert hardware_of(host_json(facts, {**service, "compute_threads": 2, "kernels": "pinned"})) == (
        "AMD EPYC, 2 threads, pinned kernels"
    )
    assert hardware_of(host_json(facts, service)) == "AMD EPYC, 1 thread"
