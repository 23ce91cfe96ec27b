"""On-disk formats: framing, versioning, the array codec, limits, param dicts, archives.

Lowest layer; imports numpy and msgpack only, never ``vm`` or ``compiler``.
"""
