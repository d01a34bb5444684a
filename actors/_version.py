"""The installed package's version (``hermes --version``, ``/health``, both OpenAPI documents)."""

from __future__ import annotations


def package_version() -> str:
    import importlib.metadata  # ~50 ms: looked up only where a version is shown

    try:
        return importlib.metadata.version("hermes-actors")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"
