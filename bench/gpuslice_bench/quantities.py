"""Byte quantities as Kubernetes and gpuslice write them ("512Mi", "4Gi", "4G", plain bytes)."""

_SUFFIXES = [("Ki", 1 << 10), ("Mi", 1 << 20), ("Gi", 1 << 30), ("Ti", 1 << 40),
             ("k", 1000), ("K", 1000), ("M", 1000 ** 2), ("G", 1000 ** 3), ("T", 1000 ** 4)]


def parse_bytes(text):
    """The number of bytes, or None for anything common/quantity.h would refuse."""
    if isinstance(text, bool):
        return None
    if isinstance(text, int):
        return text if text >= 0 else None
    if not isinstance(text, str):
        return None
    multiplier = 1
    for suffix, factor in _SUFFIXES:
        if len(text) > len(suffix) and text.endswith(suffix):
            text, multiplier = text[:-len(suffix)], factor
            break
    if not text.isdigit() or not text.isascii():
        return None
    return int(text) * multiplier


def format_bytes(n):
    """Short binary units: 512 MiB, 4 GiB, 1.5 GiB."""
    if n is None:
        return "-"
    for unit, factor in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            value = n / factor
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{n} B"
