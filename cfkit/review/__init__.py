"""Looking at edits: the terminal review and the contact sheet.

* :mod:`cfkit.review.halfblocks` — an image drawn with Unicode half blocks (Rich renderable)
* :mod:`cfkit.review.view` — original | edited | difference with the spec and the check (Rich renderable)
* :mod:`cfkit.review.loop` — review decisions in the store and the interactive key loop
* :mod:`cfkit.review.sheet` — the HTML and PNG contact sheet of all pairs
"""
