"""cfkit: counterfactual and diagnostic probes for contextual aesthetic suitability."""

__version__ = "0.1.0"
