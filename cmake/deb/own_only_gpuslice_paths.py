#!/usr/bin/env python3
"""Rewrites .deb files so that they list no directory shared with the rest of the system.

  own_only_gpuslice_paths.py PACKAGE.deb...

CPack lists every directory of its staging tree in the package, /usr/local/bin and
/usr/local/lib among them. No Debian package owns those, so dpkg takes the package for their
owner: removing it, dpkg deletes them when empty and warns "directory ... not empty so not
removed" when another program lives there. This keeps the package's files and its own
directories (those every file under which is the package's), and drops the directory entries of
/, /usr, /usr/local, /usr/local/{bin,lib,share}, /usr/local/share/doc, /usr/share and
/usr/share/doc. dpkg creates no missing parent: the packages' preinst (cmake/deb/preinst) makes
those it installs into when they are missing, and leaves them for good. Everything else (control.tar, the
other members, file order) is kept as it is.
"""
import io
import sys
import tarfile

SHARED = {"./usr", "./usr/local", "./usr/local/bin", "./usr/local/lib", "./usr/local/share",
          "./usr/local/share/doc", "./usr/share", "./usr/share/doc", "./usr/lib"}


def members(data):
    """The ar archive's members as (header, name, payload)."""
    if not data.startswith(b"!<arch>\n"):
        raise SystemExit("not an ar archive")
    at, out = 8, []
    while at < len(data):
        header = data[at:at + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        out.append((header, name, data[at + 60:at + 60 + size]))
        at += 60 + size + (size % 2)
    return out


def filtered_data_tar(name, payload):
    mode = {"data.tar.xz": "xz", "data.tar.gz": "gz"}.get(name)
    if mode is None:
        raise SystemExit("%s: cannot rewrite %s (set CPACK_DEBIAN_COMPRESSION_TYPE to xz)" % (sys.argv[0], name))
    out = io.BytesIO()
    with tarfile.open(fileobj=io.BytesIO(payload), mode="r:" + mode) as source, \
            tarfile.open(fileobj=out, mode="w:" + mode, format=source.format) as target:
        for info in source.getmembers():
            path = "./" + info.name.lstrip("./") if info.name not in (".", "./") else "./"
            if info.isdir() and path.rstrip("/") in SHARED:
                continue
            target.addfile(info, source.extractfile(info) if info.isfile() else None)
    return out.getvalue()


def rewrite(path):
    with open(path, "rb") as f:
        parts = members(f.read())
    out = bytearray(b"!<arch>\n")
    for header, name, payload in parts:
        if name.startswith("data.tar"):
            payload = filtered_data_tar(name, payload)
            header = header[:48] + ("%-10d" % len(payload)).encode() + header[58:]
        out += header + payload + (b"\n" if len(payload) % 2 else b"")
    with open(path, "wb") as f:
        f.write(out)


if __name__ == "__main__":
    for deb in sys.argv[1:]:
        rewrite(deb)
