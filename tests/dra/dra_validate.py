#!/usr/bin/env python3
"""Validates what the DRA driver writes against the official schemas (tests/data/).

  dra_validate.py resourceslice FILE   resource.k8s.io/v1 ResourceSlice, OpenAPI v3 (strict)
  dra_validate.py deviceclass FILE     resource.k8s.io/v1 DeviceClass, likewise
  dra_validate.py cdi FILE             a CDI spec, the CDI project's JSON schema and device names

Exit 0 when valid; 1 with one line per error on stdout. Strict as the API server is with
fieldValidation=Strict: an object schema that lists properties accepts no others. Beyond the
schema, the few rules of the API server's validation the driver could break and the schema
cannot say (names that are DNS labels, capacity and attribute counts, one node field).
"""
import copy
import json
import os
import re
import sys
import warnings

import jsonschema

# Debian's jsonschema 4.10 has RefResolver; a newer one from pip warns that it is deprecated.
warnings.filterwarnings("ignore", category=DeprecationWarning)

# tests/data/, beside this file's folder (tests/dra/).
DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
NAME_PART = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
# A CDI device name, as the CDI project's parser (pkg/parser ValidateDeviceName) checks it.
CDI_DEVICE_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.:]*[A-Za-z0-9])?$")
TAINT_EFFECTS = ("None", "NoSchedule", "NoExecute")


def qualified_name(text, prefix_required=False):
    """Kubernetes' qualified name (a label key): [prefix/]name."""
    prefix, _, name = text.rpartition("/")
    if prefix_required and not prefix:
        return False
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return False
    return len(name) <= 63 and bool(NAME_PART.match(name))


def closed(schema):
    """Every object schema with properties, closed (strict field validation)."""
    if isinstance(schema, dict):
        out = {k: closed(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [closed(v) for v in schema]
    return schema


def schema_errors(obj, component):
    with open(os.path.join(DATA, "kubernetes", "resource.k8s.io-v1-openapi.json")) as f:
        doc = closed(json.load(f))
    schema = copy.deepcopy(doc)
    schema["$ref"] = "#/components/schemas/io.k8s.api.resource.v1." + component
    validator = jsonschema.Draft7Validator(schema)
    return ["%s: %s" % ("/".join(map(str, e.absolute_path)) or "(root)", e.message) for e in validator.iter_errors(obj)]


def taint_errors(name, taints):
    errors = []
    if len(taints) > 4:
        errors.append("device %r: more than 4 taints" % name)
    for t in taints:
        if not qualified_name(t["key"]):
            errors.append("device %r taint key %r: not a label name" % (name, t["key"]))
        value = t.get("value", "")
        if value and (len(value) > 63 or not NAME_PART.match(value)):
            errors.append("device %r taint value %r: not a label value" % (name, value))
        if t["effect"] not in TAINT_EFFECTS:
            errors.append("device %r taint effect %r: not one of %s" % (name, t["effect"], ", ".join(TAINT_EFFECTS)))
    return errors


def deviceclass_errors(obj):
    errors = schema_errors(obj, "DeviceClass")
    if errors:
        return errors
    if obj.get("apiVersion") != "resource.k8s.io/v1" or obj.get("kind") != "DeviceClass":
        errors.append("apiVersion/kind: not resource.k8s.io/v1 DeviceClass")
    name = obj["spec"].get("extendedResourceName")
    if name is not None:
        prefix = name.rpartition("/")[0]
        if not qualified_name(name, prefix_required=True) or prefix == "kubernetes.io" or \
                prefix.endswith(".kubernetes.io") or name.startswith("requests."):
            errors.append("spec.extendedResourceName %r: not an extended resource name (domain/name, "
                          "outside kubernetes.io)" % name)
    return errors


def resourceslice_errors(obj):
    errors = schema_errors(obj, "ResourceSlice")
    if errors:
        return errors
    if obj.get("apiVersion") != "resource.k8s.io/v1" or obj.get("kind") != "ResourceSlice":
        errors.append("apiVersion/kind: not resource.k8s.io/v1 ResourceSlice")
    spec = obj["spec"]
    if sum(k in spec for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection")) != 1:
        errors.append("spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection")
    devices = spec.get("devices", [])
    if len(devices) > 128:
        errors.append("spec.devices: more than 128")
    names = set()
    for d in devices:
        name = d["name"]
        if not DNS_LABEL.match(name) or len(name) > 63:
            errors.append("device %r: not a DNS label" % name)
        if name in names:
            errors.append("device %r: duplicate" % name)
        names.add(name)
        if len(d.get("attributes", {})) + len(d.get("capacity", {})) > 32:
            errors.append("device %r: more than 32 attributes and capacities" % name)
        for key, attribute in d.get("attributes", {}).items():
            if len(attribute) != 1:
                errors.append("device %r attribute %r: exactly one value field" % (name, key))
            if len(attribute.get("string", "")) > 64:
                errors.append("device %r attribute %r: string longer than 64" % (name, key))
        errors += taint_errors(name, d.get("taints", []))
        for key, capacity in d.get("capacity", {}).items():
            if "requestPolicy" in capacity and not d.get("allowMultipleAllocations"):
                errors.append("device %r capacity %r: requestPolicy without allowMultipleAllocations" % (name, key))
    return errors


def cdi_errors(obj):
    with open(os.path.join(DATA, "cdi", "schema.json")) as f:
        schema = json.load(f)
    with open(os.path.join(DATA, "cdi", "defs.json")) as f:
        defs = json.load(f)
    resolver = jsonschema.RefResolver(base_uri="file://" + os.path.join(DATA, "cdi") + "/", referrer=schema,
                                      store={"defs.json": defs, "file://" + os.path.join(DATA, "cdi", "defs.json"): defs})
    validator = jsonschema.Draft7Validator(schema, resolver=resolver)
    errors = ["%s: %s" % ("/".join(map(str, e.absolute_path)) or "(root)", e.message)
              for e in validator.iter_errors(obj)]
    if errors:
        return errors
    for d in obj["devices"]:
        if not CDI_DEVICE_NAME.match(d["name"]):
            errors.append("device %r: not a CDI device name (letters, digits, _ - . :, starting and ending with a "
                          "letter or digit)" % d["name"])
    return errors


def main():
    kinds = {"resourceslice": resourceslice_errors, "deviceclass": deviceclass_errors, "cdi": cdi_errors}
    if len(sys.argv) != 3 or sys.argv[1] not in kinds:
        print("usage: dra_validate.py resourceslice|deviceclass|cdi FILE")
        return 2
    with open(sys.argv[2]) as f:
        obj = json.load(f)
    errors = kinds[sys.argv[1]](obj)
    for e in errors:
        print(e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
