"""The swap suite's cases and their swapped order: :mod:`cfkit.swap`, named here as the probe's rooms name it.

The rules live in :mod:`cfkit.swap` so that a report, which reads them too, does
not load the probe package (its backends and store) to get them.
"""

from cfkit.swap import ORIGINAL_ORDER, SWAP_CONDITIONS, SWAPPED_ORDER, answer_text, as_listed, swap_case_ids, \
    swap_problem, swapped

__all__ = ["ORIGINAL_ORDER", "SWAPPED_ORDER", "SWAP_CONDITIONS", "answer_text", "as_listed", "swap_case_ids",
           "swap_problem", "swapped"]
