"""The DeviceTaintSelector CRD: the names, columns and rules users rely on, and agreement with the models.

The schema and its CEL rules were also run through kube-apiserver's own CRD validation and
custom-resource validation (apiextensions-apiserver v0.37.2) during development; admission
behaviour itself belongs to the end-to-end suite.
"""

from __future__ import annotations

from crd_support import check_identity, crd, spec_schema, version

from operators.taintselector.models import API_VERSION, KIND, PLURAL, DeviceSelection, TaintSelector


def test_identity() -> None:
    check_identity(PLURAL, KIND, API_VERSION)
    assert crd(PLURAL)["spec"]["names"]["shortNames"] == ["dts"]


def test_status_subresource_and_printer_columns() -> None:
    assert version(PLURAL)["subresources"] == {"status": {}}
    columns = {column["name"]: column for column in version(PLURAL)["additionalPrinterColumns"]}
    assert columns["Ready"]["jsonPath"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Devices"] == {
        "name": "Devices",
        "type": "integer",
        "description": "Number of devices the selection currently selects.",
        "jsonPath": ".status.selectedDevices",
    }
    assert columns["Effect"]["jsonPath"] == ".spec.taint.effect"
    assert columns["Age"]["type"] == "date"
    assert [name for name, column in columns.items() if "priority" not in column] == [
        "Ready",
        "Devices",
        "Effect",
        "Age",
    ]


def test_taint_schema() -> None:
    taint = spec_schema(PLURAL)["properties"]["taint"]
    assert taint["required"] == ["key", "effect"]
    assert taint["properties"]["effect"]["enum"] == ["None", "NoSchedule", "NoExecute"]
    assert taint["properties"]["value"]["maxLength"] == 63


def test_selector_schema_matches_the_model() -> None:
    selection = spec_schema(PLURAL)["properties"]["deviceSelector"]
    aliases = {field.alias for field in DeviceSelection.model_fields.values()}
    assert set(selection["properties"]) == aliases
    expression = selection["properties"]["selectors"]["items"]["properties"]["cel"]["properties"][
        "expression"
    ]
    assert expression["maxLength"] == 10 * 1024  # Kubernetes' CEL selector limit
    assert selection["properties"]["selectors"]["maxItems"] == 32
    rules = [rule["rule"] for rule in selection["x-kubernetes-validations"]]
    assert len(rules) == 2
    assert "self.allDevices" in rules[0]  # something must be selected, or allDevices said explicitly
    assert rules[1].startswith("!(has(self.allDevices) && self.allDevices)")  # allDevices stands alone


def test_status_schema() -> None:
    status = version(PLURAL)["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
    assert set(status) == {"observedGeneration", "selectedDevices", "dryRun", "conditions"}
    assert set(status["dryRun"]["properties"]) == {
        "publishedDevices",
        "allocatedDevices",
        "claims",
        "pods",
        "namespaces",
    }
    assert status["conditions"]["x-kubernetes-list-map-keys"] == ["type"]


def test_documented_examples_parse() -> None:
    example = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": "broken-gpu", "uid": "u", "generation": 1},
        "spec": {
            "taint": {"key": "dra.example.com/unhealthy", "value": "Broken", "effect": "NoExecute"},
            "deviceSelector": {
                "driver": "gpu.example.com",
                "selectors": [
                    {"cel": {"expression": 'device.attributes["gpu.example.com"].uuid == "GPU-1"'}}
                ],
            },
        },
    }
    parsed = TaintSelector.model_validate(example)
    assert parsed.spec.device_selector.expressions == (
        'device.attributes["gpu.example.com"].uuid == "GPU-1"',
    )
    assert parsed.spec.device_selector.has_criteria
    assert not parsed.spec.device_selector.all_devices
