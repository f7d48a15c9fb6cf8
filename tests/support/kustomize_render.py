#!/usr/bin/env python3
"""Renders a kustomization directory as `kubectl kustomize DIR` does, for the subset
deploy/kubernetes/ uses; prints the objects as one JSON list (in kustomize's legacy order).

  kustomize_render.py DIR

Why here: kubectl is not a Debian 12 package, so the tests cannot rely on it. This renderer
implements only what the tree uses, with kustomize's semantics for it, and refuses everything
else by name rather than guess:
- `resources`: files (YAML streams) under the kustomization's directory and directories
  holding a kustomization (rendered first), in the order listed, by relative paths; an absolute
  path, a file outside the directory or a path that does not exist is an error;
- `images`: entries {name, newName, newTag, digest}, applied to every container and init
  container image whose name (before ':' or '@') is `name`: newName replaces the name, newTag the
  tag, digest the tag and any digest;
- an object given twice (same apiVersion group, kind, namespace and name) is an error, as in
  kustomize.
Where kubectl is installed, tests/deploy/deploy_kustomize_test.cc renders every overlay with both
and requires the same objects. Exit status 1 with one line on stderr for any error.
"""
import json
import os
import sys

import yaml

KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KNOWN_FIELDS = {"apiVersion", "kind", "resources", "images"}
ENTRY_FIELDS = {"name", "newName", "newTag", "digest"}
# kustomize's "legacy" order (api/resource/... gvk ordering): these kinds first, in this order,
# then every other kind, then the webhook configurations last.
ORDER_FIRST = ["Namespace", "ResourceQuota", "StorageClass", "CustomResourceDefinition", "ServiceAccount",
               "PodSecurityPolicy", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding", "ConfigMap",
               "Secret", "Endpoints", "Service", "LimitRange", "PriorityClass", "PersistentVolume",
               "PersistentVolumeClaim", "Deployment", "StatefulSet", "CronJob", "PodDisruptionBudget"]
ORDER_LAST = ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


class RenderError(Exception):
    pass


def kustomization_file(directory):
    for name in KUSTOMIZATION_FILES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    raise RenderError("%s: no kustomization.yaml" % directory)


def object_id(obj):
    group = obj.get("apiVersion", "").rpartition("/")[0]
    meta = obj.get("metadata") or {}
    return (group, obj.get("kind", ""), meta.get("namespace", ""), meta.get("name", ""))


def set_image(image, entry):
    at = image.find("@")
    digest = image[at:] if at >= 0 else ""
    rest = image[:at] if at >= 0 else image
    colon = rest.rfind(":")
    if colon > rest.rfind("/"):
        name, tag = rest[:colon], rest[colon:]
    else:
        name, tag = rest, ""
    if name != entry["name"]:
        return image
    name = entry.get("newName", name)
    if "newTag" in entry:
        tag, digest = ":" + str(entry["newTag"]), ""
    if "digest" in entry:
        tag, digest = "", "@" + entry["digest"]
    return name + tag + digest


def pod_specs(obj):
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Pod":
        return [spec]
    if obj.get("kind") == "CronJob":
        return [((spec.get("jobTemplate") or {}).get("spec") or {}).get("template", {}).get("spec") or {}]
    template = spec.get("template")
    return [template.get("spec") or {}] if isinstance(template, dict) else []


def apply_images(objects, entries):
    for entry in entries:
        unknown = set(entry) - ENTRY_FIELDS
        if unknown or "name" not in entry:
            raise RenderError("images entry %r: unsupported fields %s (this renderer knows %s)"
                              % (entry, sorted(unknown), sorted(ENTRY_FIELDS)))
        for obj in objects:
            for spec in pod_specs(obj):
                for key in ("initContainers", "containers"):
                    for container in spec.get(key) or []:
                        if "image" in container:
                            container["image"] = set_image(container["image"], entry)


def render(directory):
    path = kustomization_file(directory)
    with open(path) as f:
        k = yaml.safe_load(f) or {}
    unknown = set(k) - KNOWN_FIELDS
    if unknown:
        raise RenderError("%s: fields %s are not supported by this renderer (only %s)" % (path, sorted(unknown),
                                                                                          sorted(KNOWN_FIELDS)))
    objects = []
    root = os.path.realpath(directory)
    for resource in k.get("resources") or []:
        if os.path.isabs(resource):
            raise RenderError("%s: resource %s cannot be absolute" % (path, resource))
        target = os.path.normpath(os.path.join(directory, resource))
        if os.path.isdir(target):
            objects += render(target)
        elif os.path.isfile(target):
            # kustomize's default load restriction: a file must be under the kustomization's root.
            if not os.path.realpath(target).startswith(root + os.sep):
                raise RenderError("%s: file %s is not in or below %s" % (path, resource, directory))
            with open(target) as f:
                objects += [d for d in yaml.safe_load_all(f) if d is not None]
        else:
            raise RenderError("%s: resource %s does not exist" % (path, resource))
    seen = set()
    for obj in objects:
        if object_id(obj) in seen:
            raise RenderError("%s: %s/%s %s is given twice" % (path, obj.get("kind"), object_id(obj)[2],
                                                               object_id(obj)[3]))
        seen.add(object_id(obj))
    apply_images(objects, k.get("images") or [])
    return objects


def legacy_order(obj):
    kind = obj.get("kind", "")
    if kind in ORDER_FIRST:
        rank = ORDER_FIRST.index(kind)
    elif kind in ORDER_LAST:
        rank = len(ORDER_FIRST) + 1 + ORDER_LAST.index(kind)
    else:
        rank = len(ORDER_FIRST)
    return (rank, obj.get("apiVersion", ""), kind, (obj.get("metadata") or {}).get("namespace", ""),
            (obj.get("metadata") or {}).get("name", ""))


def main():
    if len(sys.argv) != 2:
        print("usage: kustomize_render.py DIR", file=sys.stderr)
        return 2
    try:
        objects = render(sys.argv[1])
    except (RenderError, yaml.YAMLError, OSError) as e:
        print("kustomize_render.py: %s" % e, file=sys.stderr)
        return 1
    print(json.dumps(sorted(objects, key=legacy_order)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
